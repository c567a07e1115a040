"""The widgets of one transcript entry: user message, assistant message, reasoning, tool card,
notices. Each is built from IR items alone, so the transcript can drop it when it scrolls far
out of view and rebuild it later from the thread.

Every entry is focusable: ``y`` copies it, ``enter`` expands or collapses it. CSS here names
widget types explicitly (no universal selectors), which keeps style matching cheap on long
transcripts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from roder_core.ir import (
    INTERRUPTED_KIND,
    AgentMessageItem,
    ApprovalItem,
    CommandExecutionItem,
    CompactionItem,
    ErrorItem,
    FileChangeItem,
    Item,
    PlanItem,
    ReasoningItem,
    Thread,
    ToolResultItem,
    UserMessageItem,
    interrupted_item,
)
from roder_tui.widgets.markdown_stream import MarkdownBody
from roder_tui.widgets.media import MediaPreview, attachment_card
from roder_tui.widgets.transcript import EntryWidget
from roder_tui.wording import plural

if TYPE_CHECKING:
    from roder_tui.widgets.transcript import Entry

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
#: Lines of tool output shown while a card is collapsed, and at most when expanded.
PREVIEW_LINES = 4
EXPANDED_LINES = 4000
#: A prompt longer than this many lines is shown folded to its first PROMPT_PREVIEW_LINES lines
#: (and to PROMPT_PREVIEW_CHARS characters) until expanded.
PROMPT_FOLD_LINES = 16
PROMPT_PREVIEW_LINES = 12
PROMPT_PREVIEW_CHARS = 600

ENTRY_BINDINGS: list[BindingType] = [
    # the focused entry is this one: the app copies it (and says where it went)
    Binding("y", "app.copy_focused", "Copy", show=False),
    Binding("enter", "toggle_entry", "Expand", show=False),
    Binding("f", "app.fork_here", "Fork here", show=False),
]


class StaticEntry(EntryWidget, Static, can_focus=True):
    """An entry drawn as one renderable from its items; ``_render_item`` says how."""

    BINDINGS = ENTRY_BINDINGS

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        super().__init__(self._render_item())

    def _render_item(self) -> RenderableType:
        raise NotImplementedError  # every entry kind draws itself

    def refresh_entry(self) -> None:
        self.update(self._render_item())


class UserMessageView(StaticEntry):
    DEFAULT_CSS = """
    UserMessageView {
        height: auto; margin: 1 0 0 0; padding: 0 1;
        border-left: thick $user-border; background: $surface;
    }
    UserMessageView:focus { background: $boost; }
    """

    def _render_item(self) -> RenderableType:
        return user_message_text(self.entry)


def user_message_text(entry: Entry) -> Text:
    """The prompt, then a card per image and a ``+ name`` line per other attachment. A long
    prompt (a pasted log or file) is folded to its start until expanded, as a tool card's output
    is, so that it does not push the conversation off the screen."""
    item = entry.items[0]
    assert isinstance(item, UserMessageItem)
    text = Text(item.text if entry.expanded else _folded_prompt(item.text))
    if len(text) < len(item.text):
        hidden = item.text.count("\n") - text.plain.count("\n")
        more = plural(hidden, "more line") if hidden else plural(len(item.text) - len(text), "more character")
        text.append(f"\n… {more} (enter to expand)", style="dim")
    if item.steer:
        text = Text.assemble(("steer: ", "roder.steer"), text)
    for attachment in item.attachments:
        if attachment.is_image:
            text.append("\n")
            text.append_text(attachment_card(attachment))
        else:
            text.append(f"\n+ {attachment.name}", style="dim")
    return text


def _folded_prompt(text: str) -> str:
    """The start of a long prompt: its first lines, and at most a few screens' worth of characters."""
    lines = text.split("\n")
    if len(lines) > PROMPT_FOLD_LINES:
        text = "\n".join(lines[:PROMPT_PREVIEW_LINES])
    return text if len(text) <= PROMPT_PREVIEW_CHARS else text[:PROMPT_PREVIEW_CHARS]


class UserMessageMediaView(EntryWidget, Vertical, can_focus=True):
    """A prompt with images, in a terminal that draws them: the message, then each picture."""

    BINDINGS = ENTRY_BINDINGS
    DEFAULT_CSS = """
    UserMessageMediaView {
        height: auto; margin: 1 0 0 0; padding: 0 1;
        border-left: thick $user-border; background: $surface;
    }
    UserMessageMediaView:focus { background: $boost; }
    UserMessageMediaView > Static { height: auto; }
    """

    def __init__(self, entry: Entry, widget_class: Any) -> None:
        super().__init__()
        self.entry = entry
        self._widget_class = widget_class
        self.text = Static(user_message_text(entry))

    def compose(self) -> ComposeResult:
        yield self.text
        item = self.entry.items[0]
        assert isinstance(item, UserMessageItem)
        for attachment in item.attachments:
            if attachment.is_image and attachment.media_id is not None:
                yield MediaPreview(attachment.media_id, self._widget_class)

    def refresh_entry(self) -> None:
        self.text.update(user_message_text(self.entry))


class AssistantMessageView(EntryWidget, Vertical, can_focus=True):
    BINDINGS = ENTRY_BINDINGS
    DEFAULT_CSS = """
    AssistantMessageView { height: auto; margin: 1 0 0 0; padding: 0 1; layout: stream; }
    AssistantMessageView:focus { background: $boost; }
    """

    def __init__(self, entry: Entry, streaming: bool = False) -> None:
        super().__init__()
        self.entry = entry
        item = entry.items[0]
        assert isinstance(item, AgentMessageItem)
        self.body = MarkdownBody(item.text, streaming=streaming)

    def compose(self) -> ComposeResult:
        yield self.body

    def action_toggle_entry(self) -> None:  # nothing to fold in an answer
        return

    def refresh_entry(self) -> None:
        """The item changed outside streaming (a reload mid-answer): show its final text."""
        item = self.entry.items[0]
        if not self.body.streaming and item.text != self.body.text:
            self.call_later(self.body.set_text, item.text)

    def rerender(self) -> None:
        self.body.rerender()


class ReasoningView(StaticEntry):
    """Model reasoning: one folded line by default, the full text when expanded."""

    DEFAULT_CSS = """
    ReasoningView { height: auto; margin: 1 0 0 0; padding: 0 1; color: $text-muted; }
    ReasoningView:focus { background: $boost; }
    """

    def _render_item(self) -> RenderableType:
        item = self.entry.items[0]
        assert isinstance(item, ReasoningItem)
        body = self.entry.live_text if self.entry.live else (item.text or item.summary)
        words = len(body.split())
        label = "thinking…" if self.entry.live else "thought"
        if not self.entry.expanded:
            return Text.assemble(("▸ ", "bold"), (f"{label} · {plural(words, 'word')}", "italic"), ("  (enter to expand)", "dim"))
        return Group(Text.assemble(("▾ ", "bold"), (label, "italic")), Text(body, style="italic"))


class ToolCardView(StaticEntry):
    """A tool call with its status, duration and output (bash: command and output; edits: a
    coloured unified diff). Collapsed cards show a few lines of output; enter shows all."""

    DEFAULT_CSS = """
    ToolCardView { height: auto; margin: 1 0 0 0; padding: 0 1; border-left: outer $panel; }
    ToolCardView:focus { background: $boost; border-left: outer $accent; }
    ToolCardView.-error { border-left: outer $error; }
    """

    #: False over SSH or with TEXTUAL_ANIMATIONS=none: a running card updates once a second.
    animate_spinner = True

    def __init__(self, entry: Entry) -> None:
        self._frame = 0
        self._timer: Any = None
        super().__init__(entry)

    def on_mount(self) -> None:
        self._sync_timer()

    def _sync_timer(self) -> None:
        running = self.entry.status == "running"
        if running and self._timer is None:
            self._timer = self.set_interval(0.1 if self.animate_spinner else 1.0, self._tick)
        elif not running and self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _tick(self) -> None:
        self._frame += 1
        super().refresh_entry()

    def refresh_entry(self) -> None:
        self.set_class(self.entry.status == "error", "-error")
        super().refresh_entry()
        self._sync_timer()

    def _render_item(self) -> RenderableType:
        entry = self.entry
        call = entry.find("toolCall")
        result = entry.find("toolResult")
        command = entry.find("commandExecution")
        change = entry.find("fileChange")
        approval = entry.find("approval")
        name = call.name if call else (result.name if result else "shell" if command else "tool")
        status = entry.status
        if status == "running":
            icon = (SPINNER[self._frame % len(SPINNER)], "roder.accent") if self.animate_spinner else ("…", "roder.accent")
        elif status in ("error", "interrupted", "denied"):
            icon = ("✗", "roder.error") if status == "error" else ("⊘", "roder.warning")
        elif status == "waiting":
            icon = ("?", "roder.warning")
        else:
            icon = ("✓", "roder.success")
        header = Text.assemble(icon, " ", (name, "bold"), "  ")
        header.append(summarize_arguments(name, call.arguments if call else {}, command), style="roder.muted")
        duration = result.duration_ms if result and result.duration_ms is not None else None
        if duration is None and status == "running" and entry.started_monotonic:
            duration = int((time.monotonic() - entry.started_monotonic) * 1000)
        if duration is not None:
            header.append(f"  {format_duration(duration)}", style="dim")
        # A call interrupted with its approval unanswered was not denied by anyone (the runtime
        # closes such an approval with a deny): no "[deny]" beside "[interrupted]".
        if (
            approval is not None
            and approval.decision is not None
            and not (status == "interrupted" and not approval.decision.allowed)
        ):
            header.append(f"  [{approval.decision.decision.replace('_', ' ')}]", style="dim italic")
        if status == "interrupted":
            header.append("  [interrupted]", style="roder.warning")
        parts: list[RenderableType] = [header]
        lead, body, tail = self._body_lines(result, command, change)
        diff = change is not None and bool(change.changes)
        limit = EXPANDED_LINES if entry.expanded else PREVIEW_LINES
        parts.extend(lead)
        if body:
            # Command output and running tools: the end is what matters (test results, the
            # last line printed), so a collapsed card shows the tail.
            from_end = tail or status == "running"
            shown = body[-limit:] if from_end else body[:limit]
            hidden = len(body) - len(shown)
            if not entry.expanded and not diff:
                # A collapsed card is a few rows, however long a line: one minified line or a
                # 3,000-character log line would otherwise fill the screen. Each shown line is cut
                # to one row ending in "…"; enter shows it whole.
                shown = [_one_row(line) for line in shown]
            hint = "enter to expand" if not entry.expanded else "output capped"
            if hidden > 0 and from_end:
                parts.append(Text(f"… {hidden} earlier lines ({hint})", style="dim"))
            parts.extend(shown)
            if hidden > 0 and not from_end:
                parts.append(Text(f"… {hidden} more lines ({hint})", style="dim"))
        return Group(*parts)

    def _body_lines(
        self, result: ToolResultItem | None, command: CommandExecutionItem | None, change: FileChangeItem | None
    ) -> tuple[list[Text], list[Text], bool]:
        """(lines always shown, lines folded when collapsed, whether the fold keeps the tail)."""
        if change is not None and change.changes:
            lines: list[Text] = []
            for fc in change.changes:
                lines.append(Text(f"{fc.kind} {fc.path}", style="bold"))
                lines.extend(numbered_diff(fc.diff, context=self.entry.expanded))
            return [], lines, False
        if command is not None:
            lines = [Text(line) for line in command.output.splitlines()]
            if command.exit_code not in (None, 0):
                lines.append(Text(f"exit code {command.exit_code}", style="roder.error"))
            return [Text(f"$ {command.command}", style="bold")], lines, True
        if self.entry.live_text:
            return [], [Text(line) for line in self.entry.live_text.splitlines()], True
        images = [attachment_card(a) for a in result.attachments if a.is_image] if result is not None else []
        if result is not None and result.text:
            style = "roder.error" if result.is_error else ""
            return images, [Text(line, style=style) for line in result.text.splitlines()], False
        return images, [], False


class NoticeView(StaticEntry):
    """Errors, compaction summaries, plans and approvals that are not tied to a tool card."""

    DEFAULT_CSS = """
    NoticeView { height: auto; margin: 1 0 0 0; padding: 0 1; color: $text-muted; }
    NoticeView:focus { background: $boost; }
    NoticeView.-error { color: $error; }
    """

    def __init__(self, entry: Entry) -> None:
        super().__init__(entry)
        first = entry.items[0]
        self.set_class(isinstance(first, ErrorItem) and first.kind != INTERRUPTED_KIND, "-error")

    def _render_item(self) -> RenderableType:
        item = self.entry.items[0]
        if isinstance(item, ErrorItem) and item.kind == INTERRUPTED_KIND:
            return Text("⏹ interrupted", style="roder.warning")
        if isinstance(item, ErrorItem):
            return Text.assemble(("error: ", "bold"), item.message)
        if isinstance(item, CompactionItem):
            head = Text.assemble(("── context compacted ", "bold"), ("(older turns stay visible above)", "dim"))
            if not self.entry.expanded:
                return Group(head, Text("enter to read the summary", style="dim"))
            return Group(head, Text(item.summary))
        if isinstance(item, PlanItem):
            lines = [Text("plan", style="bold")]
            marks = {"pending": "○", "in_progress": "◐", "completed": "●"}
            lines.extend(Text(f"{marks[s.status]} {s.text}") for s in item.steps)
            if item.text and not item.steps:
                lines.append(Text(item.text))
            return Group(*lines)
        if isinstance(item, UserMessageItem):  # one the user did not type (``sender`` says who sent it)
            head = Text.assemble(("◆ ", "roder.accent"), (f"from {item.sender}", "bold"), ("  · not typed by you", "dim"))
            sent = item.text.splitlines()
            if self.entry.expanded or len(sent) <= PREVIEW_LINES:
                return Group(head, Text(item.text))
            more = Text(f"… {plural(len(sent) - PREVIEW_LINES, 'more line')} · enter to expand", style="dim")
            return Group(head, Text("\n".join(sent[:PREVIEW_LINES])), more)
        if isinstance(item, ApprovalItem):
            decision = item.decision.decision.replace("_", " ") if item.decision else "pending"
            return Text(f"approval for {item.request.tool}: {decision}")
        return Text(json.dumps(item.wire())[:500])


def shown_items(thread: Thread) -> list[Item]:
    """A thread's items as the transcript shows them: each interrupted turn ends with a marker
    (stored by the runtime; drawn from the turn's status for threads stored before it was)."""
    items: list[Item] = []
    for turn in thread.turns:
        items.extend(turn.items)
        ended = turn.items[-1] if turn.items else None
        marked = isinstance(ended, ErrorItem) and ended.kind == INTERRUPTED_KIND
        if turn.status == "interrupted" and not marked:
            items.append(interrupted_item(turn.id))
    return items


def _one_row(line: Text) -> Text:
    """``line`` drawn on one row, cut with an ellipsis where it does not fit."""
    clipped = line.copy()
    clipped.no_wrap, clipped.overflow = True, "ellipsis"
    return clipped


class DiffRow(Text):
    """A diff line: its gutter (line number and sign), then the code, which wraps under the code
    rather than under the gutter, so a long line on a narrow screen still reads as one changed
    line beside its number. Everything else about it is the plain ``Text`` of the whole row."""

    gutter = 0

    @classmethod
    def of(cls, gutter: str, code: str, style: str) -> DiffRow:
        row = cls()
        row.append(gutter, style="dim")
        row.append(code, style=style)
        row.gutter = len(gutter)
        return row

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        width = options.max_width - self.gutter
        if width < 8:  # too narrow to indent: wrap the whole row
            yield from super().__rich_console__(console, options)
            return
        rows = self[self.gutter :].wrap(console, width, overflow="fold")
        for index, row in enumerate(rows):
            yield from (self[: self.gutter] if index == 0 else Text(" " * self.gutter)).render(console)
            yield from row.render(console)
            yield Segment.line()


def numbered_diff(diff: str, *, context: bool = False) -> list[Text]:
    """A unified diff as its changed lines with their line numbers (the old file's for removed
    lines, the new file's for added ones); ``context`` keeps unchanged lines too. No ``---``,
    ``+++`` or ``@@`` lines: a hunk gap is a dim ``⋮``."""
    out: list[Text] = []
    old = new = 0
    width = 4
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ", "diff ", "index ", "\\")):
            continue
        match = _HUNK_HEADER.match(line)
        if match:
            old, new = int(match[1]), int(match[2])
            if out:
                out.append(Text("   ⋮", style="dim"))
            continue
        if line.startswith("+"):
            out.append(DiffRow.of(f"{new:>{width}} + ", line[1:], "diff.added"))
            new += 1
        elif line.startswith("-"):
            out.append(DiffRow.of(f"{old:>{width}} - ", line[1:], "diff.removed"))
            old += 1
        else:
            if context:
                out.append(DiffRow.of(f"{new:>{width}}   ", line[1:], ""))
            old += 1
            new += 1
    return out


def summarize_arguments(name: str, arguments: dict[str, Any], command: CommandExecutionItem | None = None) -> str:
    """One line that says what a call does: the command, the path, or the first argument."""
    if command is not None:
        return _clip(command.command)
    for key in ("command", "cmd", "path", "file_path", "pattern", "url", "query"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return _clip(value)
    # Any other tool: ``name: value`` per argument, text as text (JSON showed a plan or a prompt
    # as one string of literal ``\n`` escapes), other values as JSON.
    return _clip(
        " · ".join(
            f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
            for key, value in arguments.items()
        )
    )


def _clip(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def format_duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms // 60_000}m{(ms % 60_000) // 1000:02d}s"
