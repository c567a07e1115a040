"""The panes of an agent team: each member's work beside the lead's transcript.

The work area (``WorkArea``: the lead's transcript and the panes) lays the panes out again on
every change of its size, whatever caused it (a terminal resize, the sidebar shown or hidden), so
there is one place that decides, for the width the chat really has:

- wide enough for the lead and every member side by side (``PANE_MIN_WIDTH`` each): all in a row;
- wide enough for two columns: the lead on the left, the members stacked on the right;
- narrower (down to 40 columns): the lead on top, the members stacked below it.

``ctrl+o`` moves the focus from the lead to each member and back; unless all are side by side,
the focused member's pane takes the whole work area. The focused pane is also where the prompt
goes: text sent while a member is focused is a ``team/member/message`` to it. A one-line team bar
above the prompt shows each member's state and the team's tokens and cost; each pane's title shows
the member's own. A pane's lines wrap at its width, and wrap again when the width changes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.events import Resize
from textual.widget import Widget

from roder_tui.widgets.team_status import STATUS_MARKS, usage_text

if TYPE_CHECKING:  # the IR (and pydantic) load after the first frame, with the runtime
    from roder_core.ir import Item
    from roder_core.teams.model import Team
    from roder_tui.widgets.member_pane import MemberPane

#: Narrowest useful pane beside another: below (members + lead) times this the members stack,
#: below twice this they stack under the lead.
PANE_MIN_WIDTH = 32
#: How the work area is arranged (``TeamPanes.arrangement``).
SIDE, COLUMN, STACK, ZOOM = "side", "column", "stack", "zoom"


#: By ``MemberStatus`` value (the wire's strings).
class TeamPanes(Vertical):
    """The member panes of the team the shown thread leads (hidden when there is none)."""

    DEFAULT_CSS = """
    TeamPanes { width: 1fr; height: 1fr; display: none; }
    TeamPanes > Container { height: 1fr; layout: horizontal; }
    TeamPanes.-stacked > Container { layout: vertical; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.team: Team | None = None
        #: The focused member's name; None: the lead (its transcript).
        self.focused: str | None = None
        #: A team whose panes the user closed (``team/pane/cleanup``): its updates do not reopen them.
        self.hidden: str | None = None
        #: How the work area was last arranged: SIDE, COLUMN, STACK or ZOOM (a member fills it).
        self.arrangement = SIDE
        self.row = Container()
        #: Team events and commands change the panes from different workers: one at a time.
        self._changing = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield self.row

    def panes(self) -> list[MemberPane]:
        if not self.row.children:
            return []  # no team shown: the panes' module (RichLog, rich.pretty) is not loaded for nothing
        from roder_tui.widgets.member_pane import MemberPane

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
            from roder_tui.widgets.member_pane import MemberPane

            panes = [MemberPane(m) for m in team.members if m.status != "stopped"]
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
            from roder_tui.widgets.member_pane import MemberPane

            new = [MemberPane(m) for m in team.members if m.name not in known and m.status != "stopped"]
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
        """Lay the panes out for a work area ``width`` cells wide; returns whether the lead's
        transcript shows (``WorkArea`` reads ``arrangement`` for its own direction)."""
        panes = self.panes()
        if self.team is None or not panes:
            self.display = False
            self.arrangement = SIDE
            return True
        if width >= PANE_MIN_WIDTH * (len(panes) + 1):
            self.arrangement = SIDE
        elif self.focused is not None:
            self.arrangement = ZOOM
        else:
            self.arrangement = COLUMN if width >= 2 * PANE_MIN_WIDTH else STACK
        side = self.arrangement == SIDE
        for pane in panes:
            pane.set_class(pane.member.name == self.focused, "-focused")
            pane.display = self.arrangement != ZOOM or pane.member.name == self.focused
        self.set_class(not side, "-stacked")
        # Side by side every pane is as wide as the lead's transcript; stacked, the panes take half.
        self.styles.width = f"{len(panes)}fr" if side else "1fr"
        self.display = True
        return self.arrangement != ZOOM

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


class WorkArea(Container):
    """The lead's transcript and the team's panes. Every change of its size (terminal resized,
    sidebar shown or hidden, toasts aside) lays the panes out again: the one place that does."""

    DEFAULT_CSS = """
    WorkArea { height: 1fr; layout: horizontal; }
    WorkArea.-stacked { layout: vertical; }
    """

    def __init__(self, transcript: Widget, panes: TeamPanes, **kwargs: Any) -> None:
        super().__init__(transcript, panes, **kwargs)
        self.transcript = transcript
        self.panes = panes

    def arrange_panes(self, width: int | None = None) -> None:
        width = width if width is not None else self.size.width
        if not width:
            return  # not laid out yet: its first Resize arranges it
        self.transcript.display = self.panes.lay_out(width)
        self.set_class(self.panes.arrangement == STACK, "-stacked")

    def on_resize(self, event: Resize) -> None:
        self.arrange_panes(event.size.width)

    def on_mount(self) -> None:
        self.app.screen_change_signal.subscribe(self, self._screen_changed)

    def _screen_changed(self, screen: Any) -> None:
        """A member's pane never shows through a dialog: while one covers the main screen the
        panes are hidden (their place kept, so nothing moves when it closes)."""
        self.panes.visible = screen is self.screen
