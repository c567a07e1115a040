"""One member's pane of an agent team: its thread's items, one compact entry each, in a log
that wraps at the pane's width. Loaded when a team is first shown (``TeamPanes``), so an app
without a team never imports ``RichLog`` and what it pulls in (``rich.pretty``, ``attrs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.widgets import RichLog

from roder_tui.widgets.team_status import STATUS_MARKS, usage_text

if TYPE_CHECKING:
    from roder_core.ir import Item
    from roder_core.teams.model import TeamMember

#: Lines of a message the team sent a member (its briefing, a teammate's message) shown in its
#: pane: the first and the last, where the briefing ends with the member's task.
SENT_HEAD, SENT_TAIL = 2, 4


def item_lines(item: Item) -> Text | None:
    """One compact entry per finished item of a member's thread."""
    from roder_core.ir import AgentMessageItem, ErrorItem, ToolCallItem, ToolResultItem, UserMessageItem
    from roder_tui.widgets.messages import summarize_arguments
    from roder_tui.wording import plural

    if isinstance(item, UserMessageItem) and item.sender:  # the team's briefing or a teammate's message
        lines = item.text.strip().splitlines()
        hidden = len(lines) - SENT_HEAD - SENT_TAIL
        if hidden > 1:
            lines = [*lines[:SENT_HEAD], f"… {plural(hidden, 'more line')}", *lines[-SENT_TAIL:]]
        return Text(f"◆ from {item.sender}\n" + "\n".join(lines), style="dim")
    if isinstance(item, UserMessageItem):
        return Text(f"▸ {item.text.strip()}", style="bold")
    if isinstance(item, AgentMessageItem) and item.text.strip():
        return Text(item.text.strip())
    if isinstance(item, ToolCallItem):  # summed up as on the transcript's tool cards
        return Text(f"→ {item.name} {summarize_arguments(item.name, item.arguments)}", style="cyan")
    if isinstance(item, ToolResultItem):
        first = (item.text.strip().splitlines() or [""])[0]
        mark = "✗" if item.is_error else "✓"
        return Text(f"  {mark} {first[:200]}", style="red" if item.is_error else "green")
    if isinstance(item, ErrorItem):
        return Text(f"✗ {item.message}", style="bold red")
    return None


class WrappingLog(RichLog):
    """A log whose lines wrap at its own width and wrap again when that width changes (RichLog
    renders each line once, at least ``min_width`` wide, so a narrow pane cut its lines)."""

    def __init__(self) -> None:
        super().__init__(wrap=True, markup=False, auto_scroll=True, min_width=1)
        self.texts: list[Text] = []
        self._wrapped_at = 0

    def add(self, text: Text) -> None:
        self.texts.append(text)
        self.write(text)

    def on_resize(self, event: Resize) -> None:
        width = event.size.width
        if width and self._size_known and width != self._wrapped_at and self.texts:
            self.clear()
            for text in self.texts:
                self.write(text, scroll_end=False)
            self.call_after_refresh(self.scroll_end, animate=False)
        if width:
            self._wrapped_at = width


class MemberPane(Vertical):
    DEFAULT_CSS = """
    MemberPane { width: 1fr; height: 1fr; min-height: 3; border: round $panel-lighten-2; padding: 0 0; }
    MemberPane.-focused { border: round $accent; }
    MemberPane WrappingLog { height: 1fr; background: $background; scrollbar-size-vertical: 1; overflow-x: hidden; }
    """

    def __init__(self, member: TeamMember) -> None:
        super().__init__()
        self.member = member
        self.log_view = WrappingLog()
        self.entries: list[str] = []

    def compose(self) -> ComposeResult:
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
            self.log_view.add(line)
