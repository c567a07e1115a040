"""The panes of an agent team: each member's work beside the lead's transcript.

When the terminal is wide enough every member gets a pane side by side with the lead's
transcript; when it is not, one thing is shown at a time (the lead's transcript or one member's
pane) and ``ctrl+o`` cycles through them. The focused pane is also where the prompt goes: text
sent while a member is focused is a ``team/member/message`` to it. A one-line team bar above the
prompt shows each member's state and the team's tokens and cost; each pane's title shows the
member's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widgets import RichLog

from roder_core.ir import Item, Usage
from roder_core.teams.model import MemberStatus, Team, TeamMember

#: Narrowest useful pane; below (members + lead) times this, panes are shown one at a time.
PANE_MIN_WIDTH = 32

STATUS_MARKS = {
    MemberStatus.WORKING: "●",
    MemberStatus.WAITING_APPROVAL: "?",
    MemberStatus.IDLE: "○",
    MemberStatus.FAILED: "✗",
    MemberStatus.INTERRUPTED: "■",
    MemberStatus.STOPPED: "-",
}


def tokens(usage: Usage) -> str:
    count = usage.total_tokens
    return f"{count / 1000:.1f}k tok" if count >= 1000 else f"{count} tok"


def usage_text(usage: Usage) -> str:
    return f"{tokens(usage)} · ${usage.cost_usd:.4f}"


def item_lines(item: Item) -> Text | None:
    """One compact entry per finished item of a member's thread."""
    kind = item.type
    if kind == "userMessage":
        return Text(f"▸ {item.text.strip()}", style="bold")  # type: ignore[union-attr]
    if kind == "agentMessage" and item.text.strip():  # type: ignore[union-attr]
        return Text(item.text.strip())  # type: ignore[union-attr]
    if kind == "toolCall":
        import json

        args = json.dumps(item.arguments, ensure_ascii=False)  # type: ignore[union-attr]
        return Text(f"→ {item.name} {args[:200]}", style="cyan")  # type: ignore[union-attr]
    if kind == "toolResult":
        first = (item.text.strip().splitlines() or [""])[0]  # type: ignore[union-attr]
        mark = "✗" if item.is_error else "✓"  # type: ignore[union-attr]
        return Text(f"  {mark} {first[:200]}", style="red" if item.is_error else "green")  # type: ignore[union-attr]
    if kind == "error":
        return Text(f"✗ {item.message}", style="bold red")  # type: ignore[union-attr]
    return None


class MemberPane(Vertical):
    DEFAULT_CSS = """
    MemberPane { width: 1fr; height: 1fr; border: round $panel-lighten-2; padding: 0 0; }
    MemberPane.-focused { border: round $accent; }
    MemberPane RichLog { height: 1fr; background: $background; scrollbar-size-vertical: 1; }
    """

    def __init__(self, member: TeamMember) -> None:
        super().__init__()
        self.member = member
        self.log_view = RichLog(wrap=True, markup=False, auto_scroll=True)
        self.entries: list[str] = []

    def compose(self):  # type: ignore[override]
        yield self.log_view

    def on_mount(self) -> None:
        self.show_member(self.member)

    def show_member(self, member: TeamMember) -> None:
        self.member = member
        agent = f" ({member.agent})" if member.agent else ""
        mark = STATUS_MARKS.get(member.status, "")
        self.border_title = f"{mark} {member.name}{agent} · {member.status}"
        self.border_subtitle = f"{member.mode} · {usage_text(member.usage)}"

    def add_item(self, item: Item) -> None:
        line = item_lines(item)
        if line is not None:
            self.entries.append(line.plain)
            self.log_view.write(line)


class TeamPanes(Vertical):
    """The member panes of the team the shown thread leads (hidden when there is none)."""

    DEFAULT_CSS = """
    TeamPanes { width: 1fr; height: 1fr; display: none; }
    TeamPanes > Horizontal { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.team: Team | None = None
        #: The focused member's name; None: the lead (its transcript).
        self.focused: str | None = None
        #: A team whose panes the user closed (``team/pane/cleanup``): its updates do not reopen them.
        self.hidden: str | None = None
        self.wide = True
        self.row = Horizontal()
        #: Team events and commands change the panes from different workers: one at a time.
        self._changing = asyncio.Lock()

    def compose(self):  # type: ignore[override]
        yield self.row

    def panes(self) -> list[MemberPane]:
        return list(self.row.query(MemberPane))

    def pane(self, name: str) -> MemberPane | None:
        return next((p for p in self.panes() if p.member.name == name), None)

    def member_of_thread(self, thread_id: str) -> str | None:
        if self.team is None:
            return None
        member = self.team.member_of_thread(thread_id)
        return member.name if member is not None else None

    async def show_team(self, team: Team | None, history: dict[str, list[Item]] | None = None) -> None:
        """Show a team's panes (its members' items so far in ``history``), or none."""
        async with self._changing:
            await self.row.remove_children()
            self.team, self.focused = team, None
            if team is None:
                return
            panes = [MemberPane(m) for m in team.members if m.status is not MemberStatus.STOPPED]
            await self.row.mount_all(panes)
            for pane in panes:
                for item in (history or {}).get(pane.member.name, []):
                    pane.add_item(item)

    async def update_team(self, team: Team) -> None:
        """A ``team/updated``: new members get a pane, every pane its member's latest state."""
        async with self._changing:
            if self.team is None or self.team.team_id != team.team_id:
                return
            self.team = team
            known = {p.member.name for p in self.panes()}
            new = [MemberPane(m) for m in team.members if m.name not in known and m.status is not MemberStatus.STOPPED]
            if new:
                await self.row.mount_all(new)
            for pane in self.panes():
                member = team.member(pane.member.name)
                if member is not None:
                    pane.show_member(member)

    def add_item(self, thread_id: str, item: Item) -> None:
        name = self.member_of_thread(thread_id)
        pane = self.pane(name) if name else None
        if pane is not None:
            pane.add_item(item)

    def order(self) -> list[str | None]:
        """Focus order: the lead, then each member shown."""
        return [None, *(p.member.name for p in self.panes())]

    def focus_member(self, name: str | None) -> None:
        if name is not None and self.pane(name) is None:
            raise ValueError(f"no pane for {name!r}")
        self.focused = name

    def cycle(self) -> str | None:
        order = self.order()
        index = order.index(self.focused) if self.focused in order else 0
        self.focused = order[(index + 1) % len(order)]
        return self.focused

    def lay_out(self, width: int) -> bool:
        """Lay the panes out for ``width`` cells; returns whether the lead's transcript shows."""
        panes = self.panes()
        if self.team is None or not panes:
            self.display = False
            return True
        self.wide = width >= PANE_MIN_WIDTH * (len(panes) + 1)
        for pane in panes:
            pane.set_class(pane.member.name == self.focused, "-focused")
            pane.display = self.wide or pane.member.name == self.focused
        self.display = self.wide or self.focused is not None
        return self.wide or self.focused is None

    def summary(self) -> Text:
        """The team bar: name, each member's state, the team's tokens and cost, the pane key."""
        team = self.team
        text = Text()
        if team is None:
            return text
        text.append(f"team {team.name}", style="bold")
        for member in team.members:
            style = "reverse" if member.name == self.focused else ""
            text.append("  ")
            text.append(f"{STATUS_MARKS.get(member.status, '')} {member.name}", style=style)
        text.append(f"  · {usage_text(team.usage)}")
        target = f"to {self.focused}" if self.focused else "to lead"
        text.append(f"  · prompt {target} · ctrl+o next pane", style="dim")
        return text
