"""The transcript: a windowed, anchored, stream-layout scroll view over a thread's items.

Long threads stay fast because only a window of entries (at most ``MAX_MOUNTED``) is mounted.
Entries are plain data folded from IR items (``TranscriptModel``); scrolling near the top of the
window mounts older entries (rebuilt from the items) and drops ones far below, and the other way
round. New entries arrive at the bottom while the view is anchored there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from roder_tui.widgets.one_pass_layout import OnePassLayout

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from roder_core.ir import Item
    from roder_tui.widgets.messages import AssistantMessageView

EntryKind = Literal["user", "assistant", "reasoning", "tool", "notice"]

#: Mounted entries at most; entries loaded per step when scrolling past the window's edge.
MAX_MOUNTED = 60
CHUNK = 20
INITIAL = 40
_EDGE = 3  # lines from the window's edge that trigger loading more


@dataclass(eq=False)
class Entry:
    """One row of the transcript, folded from one or more items (a tool call and its result,
    command view, diff and approval share one card)."""

    key: str
    kind: EntryKind
    items: list[Any]
    expanded: bool = False
    live: bool = False
    live_text: str = ""
    started_monotonic: float = 0.0
    #: The turn that made this entry is over: a tool call still without a result never will have one.
    ended: bool = False
    widget: EntryWidget | None = field(default=None, repr=False)

    def find(self, item_type: str) -> Any | None:
        """The entry's item of one IR ``type`` (``"toolResult"``, ``"commandExecution"``...)."""
        return next((i for i in self.items if i.type == item_type), None)

    def put(self, item: Any) -> None:
        for index, existing in enumerate(self.items):
            if type(existing) is type(item) and (existing.id == item.id or self.kind == "tool"):
                self.items[index] = item
                return
        self.items.append(item)

    @property
    def status(self) -> str:
        if self.kind != "tool":
            return "done"
        approval = self.find("approval")
        result = self.find("toolResult")
        if result is not None:
            data = result.data if isinstance(result.data, dict) else {}
            if data.get("policy_denied"):
                return "denied"
            if data.get("interrupted"):
                return "interrupted"
            return "error" if result.is_error else "done"
        command = self.find("commandExecution")
        from roder_core.ir import ItemStatus  # loaded after the first frame, with the runtime

        if command is not None and command.status != ItemStatus.IN_PROGRESS:
            failed = command.status in ("failed", "declined") or command.exit_code not in (0, None)
            return "error" if failed else "done"
        if approval is not None and approval.decision is not None and not approval.decision.allowed:
            return "denied"
        if self.ended:
            return "interrupted"
        if approval is not None and approval.decision is None:
            return "waiting"
        return "running"

    def copy_text(self) -> str:
        first = self.items[0]
        if first.type in ("userMessage", "agentMessage"):
            return self.live_text if self.live and first.type == "agentMessage" else first.text
        if first.type == "reasoning":
            return self.live_text or first.text or first.summary
        if self.kind == "tool":
            parts: list[str] = []
            command = self.find("commandExecution")
            change = self.find("fileChange")
            result = self.find("toolResult")
            if command is not None:
                parts.append(f"$ {command.command}\n{command.output}")
            if change is not None:
                parts.extend(fc.diff for fc in change.changes)
            if not parts and result is not None:
                parts.append(result.text)
            return "\n".join(parts)
        for attr in ("message", "summary", "text"):
            value = getattr(first, attr, None)
            if isinstance(value, str):
                return value
        return ""


class TranscriptModel:
    """Folds items into entries. Shared by the live view and thread loading."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._by_key: dict[str, Entry] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> Entry | None:
        return self._by_key.get(key)

    def index(self, entry: Entry) -> int:
        # Entries near the end are the ones touched; search from there.
        for i in range(len(self.entries) - 1, -1, -1):
            if self.entries[i] is entry:
                return i
        raise ValueError("entry not in transcript")

    def add(self, item: Item) -> tuple[Entry | None, bool]:
        """Fold one item in; returns the entry it landed in and whether that entry is new."""
        if item.type == "custom":
            return None, False  # extension state, not for display
        key, kind = _key_of(item)
        entry = self._by_key.get(key)
        if entry is not None:
            entry.put(item)
            return entry, False
        entry = Entry(key=key, kind=kind, items=[item])
        if kind == "tool":
            entry.started_monotonic = time.monotonic()
        self.entries.append(entry)
        self._by_key[key] = entry
        return entry, True

    def extend(self, items: Iterable[Item]) -> None:
        for item in items:
            self.add(item)

    def prepend(self, items: Iterable[Item]) -> int:
        """Fold items that came before every entry (older turns fetched later) in above them;
        returns how many entries were added. Their tool calls are over."""
        older = TranscriptModel()
        older.extend(items)
        for entry in older.entries:
            entry.ended = entry.kind == "tool"
        self.entries[:0] = older.entries
        self._by_key = {**older._by_key, **self._by_key}
        return len(older.entries)


_KINDS: dict[str, EntryKind] = {"userMessage": "user", "agentMessage": "assistant", "reasoning": "reasoning"}


def _key_of(item: Item) -> tuple[str, EntryKind]:
    """Entries are keyed by item id, except a tool call's items, which share one card."""
    from roder_core.ir import ApprovalItem, CommandExecutionItem, FileChangeItem, ToolCallItem, ToolResultItem, UserMessageItem

    kind = _KINDS.get(item.type)
    if kind == "user" and isinstance(item, UserMessageItem) and item.sender:
        return item.id, "notice"  # sent on the user's behalf (a team's briefing): not their prompt
    if kind is not None:
        return item.id, kind
    if isinstance(item, ToolCallItem | ToolResultItem) or (
        isinstance(item, CommandExecutionItem | FileChangeItem) and item.call_id
    ):
        return f"call:{item.call_id}", "tool"
    if isinstance(item, ApprovalItem):
        return f"call:{item.request.call_id}", "tool"
    return item.id, "notice"


def reading_by_click(widget: Widget) -> bool:
    """Whether a click (a tap) on the transcript takes the focus from the prompt. Not in a
    browser: on a phone a tap is for reading and scrolling, and the keyboard that comes up must
    keep typing into the prompt."""
    return not widget.app.is_web


class EntryWidget(OnePassLayout):
    """What every transcript entry's widget offers the transcript and the key bindings
    (``roder_tui.widgets.messages`` has the kinds)."""

    entry: Entry

    def copy_text(self) -> str:
        return self.entry.copy_text()

    def action_toggle_entry(self) -> None:
        self.entry.expanded = not self.entry.expanded
        self.refresh_entry()

    def focus_on_click(self) -> bool:
        return reading_by_click(self)

    def refresh_entry(self) -> None:
        """Re-render from ``self.entry`` (after new data or a toggle)."""


def build_widget(entry: Entry) -> EntryWidget:
    # Imported on first use: the message widgets pull in Rich markdown, Pygments and the IR,
    # none of which the first frame needs.
    from roder_tui.widgets.messages import (
        AssistantMessageView,
        NoticeView,
        ReasoningView,
        ToolCardView,
    )

    if entry.kind == "user":
        widget: EntryWidget = _user_view(entry)
    elif entry.kind == "assistant":
        widget = AssistantMessageView(entry, streaming=entry.live)
    elif entry.kind == "reasoning":
        widget = ReasoningView(entry)
    elif entry.kind == "tool":
        widget = ToolCardView(entry)
    else:
        widget = NoticeView(entry)
    entry.widget = widget
    return widget


def _user_view(entry: Entry) -> EntryWidget:
    """A prompt with stored images gets inline previews where the terminal draws them."""
    from roder_tui.widgets.messages import UserMessageMediaView, UserMessageView

    item = entry.items[0]
    if any(getattr(a, "media_id", None) and a.is_image for a in getattr(item, "attachments", [])):
        from roder_tui.graphics import preview_widget_class

        widget_class = preview_widget_class(PREVIEWS.protocol)
        if widget_class is not None:
            return UserMessageMediaView(entry, widget_class)
    return UserMessageView(entry)


class _Previews:
    """The preview protocol the app prepared at start (None: text cards only)."""

    protocol: Any = None


PREVIEWS = _Previews()


class EarlierHint(Static):
    DEFAULT_CSS = """
    EarlierHint { height: auto; color: $text-muted; text-align: center; }
    """


class Transcript(VerticalScroll, can_focus=True):
    BINDINGS = [
        Binding("j,down", "focus_next_entry", "Next message", show=False),
        Binding("k,up", "focus_previous_entry", "Previous message", show=False),
        Binding("home,g", "jump_start", "First message", show=False),
        Binding("end,G", "jump_end", "Last message", show=False),
        Binding("question_mark", "app.help", "Help", show=False),
    ]
    # Vertical, not Textual's stream layout: the stream layout reuses the placements of children
    # before the first one that asked for a layout, and Textual 8.2 does not record an entry as
    # asking when only a widget nested inside it did (an answer's text) and a later entry asked
    # in the same frame (its tool card mounting). The answer then kept its old height: drawn
    # blank, the screen above it one row off (tests/tui/test_transcript_layout.py).
    DEFAULT_CSS = """
    Transcript { layout: vertical; height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = TranscriptModel()
        self.lo = 0  # first mounted entry index
        self.hi = 0  # one past the last mounted entry index
        self._hint = EarlierHint("")
        self._busy = False
        #: Fetches the items of the turns before the loaded ones (a long thread opened from its
        #: last turns); called once, when scrolling or jumping reaches the top.
        self.older: Callable[[], Awaitable[list[Item]]] | None = None

    def compose(self) -> ComposeResult:
        yield self._hint

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        """Anchored at the end (an answer streaming in), one layout places the grown entries and
        scrolls to the end: recorded without a second one (``OnePassLayout``). Scrolled back,
        Textual's own second pass stays (the window of entries mounts and drops on scroll)."""
        anchored = self._anchored and not self._anchor_released
        return super()._size_updated(size, virtual_size, container_size, layout=layout and not anchored)

    def on_mount(self) -> None:
        self.anchor()
        self._update_hint()

    def focus_on_click(self) -> bool:
        return reading_by_click(self)

    def on_key(self, event: events.Key) -> None:
        """A character typed while the transcript (or a message in it) has the focus, that no key
        of theirs takes, goes to the prompt, which takes the focus: typing never goes nowhere."""
        if not (event.is_printable and event.character):
            return
        focused = self.screen.focused
        chain = focused.ancestors_with_self if focused is not None else [self]
        if any(event.key in node._bindings.key_to_bindings for node in chain):
            return
        prompt = getattr(self.app, "prompt_bar", None)
        if prompt is None:
            return
        event.stop()
        event.prevent_default()
        # At once, not with focus() (which waits a turn of the loop): keys already queued behind
        # this one must reach the prompt too, not move through the transcript (k, j, g...).
        self.screen.set_focus(prompt.input)
        prompt.input.insert(event.character)

    # -------------------------------------------------------------- loading

    async def load(
        self,
        items: Iterable[Item],
        live_calls: frozenset[str] = frozenset(),
        older: Callable[[], Awaitable[list[Item]]] | None = None,
    ) -> None:
        """Show a thread: fold all items, mount only the last ``INITIAL`` entries. Tool calls
        not in ``live_calls`` (the running turn's) are over, whatever their items say. ``older``
        fetches what came before ``items`` when the view reaches their top."""
        self.older = older
        self.model = TranscriptModel()
        self.model.extend(items)
        for entry in self.model.entries:
            entry.ended = entry.kind == "tool" and entry.key not in live_calls
        await self._remount(max(len(self.model) - INITIAL, 0), len(self.model))
        self.anchor()

    def settle(self) -> None:
        """A turn ended: nothing in this thread runs any more (no card keeps spinning)."""
        for entry in reversed(self.model.entries):
            if entry.kind != "tool" or entry.ended:
                continue
            entry.ended = True
            if entry.widget is not None and entry.widget.is_attached:
                entry.widget.refresh_entry()

    async def _remount(self, lo: int, hi: int) -> None:
        for entry in self.model.entries[self.lo : self.hi]:
            entry.widget = None
        with self.app.batch_update():
            await self.remove_children(list(self.children)[1:])
            self.lo, self.hi = lo, hi
            widgets = [build_widget(e) for e in self.model.entries[lo:hi]]
            if widgets:
                await self.mount_all(widgets)
            self._update_hint()

    def _update_hint(self) -> None:
        self._hint.display = self.lo > 0 or self.older is not None
        if self.lo:
            self._hint.update(f"↑ {self.lo} earlier entries · scroll up or press home")
        elif self.older is not None:
            self._hint.update("↑ earlier turns · scroll up or press home")

    async def fetch_older(self) -> bool:
        """Put the turns before the loaded ones above the entries (nothing mounted moves);
        False when there were none to fetch."""
        fetch, self.older = self.older, None
        if fetch is None:
            return False
        count = self.model.prepend(await fetch())
        self.lo += count
        self.hi += count
        self._update_hint()
        return count > 0

    @property
    def at_end(self) -> bool:
        return self.hi >= len(self.model)

    # -------------------------------------------------------------- live items

    async def add_item(self, item: Item, *, live: bool = False) -> Entry | None:
        """An item started or completed. New entries mount when the window shows the end."""
        was_at_end = self.at_end
        entry, new = self.model.add(item)
        if entry is None:
            return None
        if new:
            entry.live = live and entry.kind in ("assistant", "reasoning")
            if was_at_end:
                await self.mount(build_widget(entry))
                self.hi = len(self.model)
                await self._prune_top()
            return entry
        if not live and entry.kind in ("assistant", "reasoning") and entry.live:
            entry.live = False
            widget = entry.widget
            from roder_core.ir import AgentMessageItem

            if _streams(widget) and widget.is_attached and isinstance(item, AgentMessageItem):
                await widget.body.finish(item.text)
                entry.live_text = ""
                return entry
            entry.live_text = ""
        widget = entry.widget
        if widget is not None and widget.is_attached:
            widget.refresh_entry()
        return entry

    async def stream(self, key: str, text: str) -> None:
        """Streamed text for a live entry (already coalesced by the caller)."""
        entry = self.model.get(key)
        if entry is None or not entry.live:
            if entry is not None and entry.kind == "tool":
                entry.live_text += text
                if entry.widget is not None and entry.widget.is_attached:
                    entry.widget.refresh_entry()
            return
        entry.live_text += text
        widget = entry.widget
        if widget is None or not widget.is_attached:
            return
        if _streams(widget):
            await widget.body.feed(text)
        else:
            widget.refresh_entry()

    async def resume_stream(self, key: str, text: str) -> None:
        """An answer or reasoning of a running turn, shown mid-stream (a thread opened while
        it runs, an app attached to a host): show all the text streamed so far, then keep
        streaming the deltas that follow into it."""
        entry = self.model.get(key)
        if entry is None or entry.kind not in ("assistant", "reasoning"):
            return
        entry.items[0] = entry.items[0].model_copy(update={"text": text})
        entry.live, entry.live_text = True, text
        old = entry.widget
        if old is None or not old.is_attached:
            return
        widget = build_widget(entry)
        await self.mount(widget, after=old)
        await old.remove()
        if _streams(widget):
            await widget.body.feed(text)

    def resume_tool_output(self, key: str, output: str) -> None:
        """The live output a running tool printed before this view opened."""
        entry = self.model.get(key)
        if entry is None or entry.kind != "tool":
            return
        entry.live_text, entry.ended = output, False
        if entry.widget is not None and entry.widget.is_attached:
            entry.widget.refresh_entry()

    async def _prune_top(self) -> None:
        excess = (self.hi - self.lo) - MAX_MOUNTED
        if excess <= 0:
            return
        doomed = self.model.entries[self.lo : self.lo + excess]
        height = sum(_outer_height(e.widget) for e in doomed)
        widgets = [e.widget for e in doomed if e.widget is not None]
        for e in doomed:
            e.widget = None
        self.lo += excess
        keep_view = not self.is_vertical_scroll_end
        await self.remove_children(widgets)
        self._update_hint()
        if keep_view and height:
            self.scroll_to(y=max(self.scroll_y - height, 0), animate=False, immediate=True)

    async def _prune_bottom(self) -> None:
        excess = (self.hi - self.lo) - MAX_MOUNTED
        if excess <= 0:
            return
        doomed = self.model.entries[self.hi - excess : self.hi]
        widgets = [e.widget for e in doomed if e.widget is not None]
        for e in doomed:
            e.widget = None
        self.hi -= excess
        await self.remove_children(widgets)

    # -------------------------------------------------------------- windowing on scroll

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        earlier = self.lo > 0 or self.older is not None
        if not self._busy and ((new <= _EDGE and earlier) or (new >= self.max_scroll_y - _EDGE and not self.at_end)):
            self._busy = True
            self.call_after_refresh(self._extend_window)

    async def _extend_window(self) -> None:
        try:
            if self.scroll_y <= _EDGE and self.lo == 0:
                await self.fetch_older()
            if self.scroll_y <= _EDGE and self.lo > 0:
                await self.load_earlier()
            elif self.scroll_y >= self.max_scroll_y - _EDGE and not self.at_end:
                await self.load_later()
        finally:
            self._busy = False

    async def load_earlier(self, count: int = CHUNK) -> None:
        """Mount ``count`` older entries above the window, keeping the view where it was."""
        if self.lo == 0:
            return
        new_lo = max(self.lo - count, 0)
        widgets = [build_widget(e) for e in self.model.entries[new_lo : self.lo]]
        first = self.children[1] if len(self.children) > 1 else None
        self.release_anchor()
        await self.mount_all(widgets, before=first) if first is not None else await self.mount_all(widgets)
        self.lo = new_lo
        self._update_hint()
        await self._prune_bottom()

        def restore() -> None:
            added = sum(_outer_height(w) for w in widgets)
            self.scroll_to(y=self.scroll_y + added, animate=False, immediate=True)

        self.call_after_refresh(restore)

    async def load_later(self, count: int = CHUNK) -> None:
        new_hi = min(self.hi + count, len(self.model))
        widgets = [build_widget(e) for e in self.model.entries[self.hi : new_hi]]
        await self.mount_all(widgets)
        self.hi = new_hi
        await self._prune_top()

    # -------------------------------------------------------------- keyboard

    def _entry_widgets(self) -> list[EntryWidget]:
        return [e.widget for e in self.model.entries[self.lo : self.hi] if e.widget is not None]

    async def action_focus_next_entry(self) -> None:
        await self._move_focus(+1)

    async def action_focus_previous_entry(self) -> None:
        await self._move_focus(-1)

    async def _move_focus(self, step: int) -> None:
        widgets = self._entry_widgets()
        if not widgets:
            return
        focused = self.app.focused
        index = widgets.index(focused) if focused in widgets else (len(widgets) if step < 0 else -1)
        target = index + step
        if target < 0 and self.lo == 0:
            await self.fetch_older()
        if target < 0 and self.lo > 0:
            await self.load_earlier()
            widgets = self._entry_widgets()
            target = widgets.index(focused) - 1 if focused in widgets else 0
        elif target >= len(widgets) and not self.at_end:
            await self.load_later()
            widgets = self._entry_widgets()
            target = widgets.index(focused) + 1 if focused in widgets else len(widgets) - 1
        if 0 <= target < len(widgets):
            widgets[target].focus()
            self.scroll_to_widget(widgets[target], animate=False)

    async def action_jump_start(self) -> None:
        await self.fetch_older()
        await self._remount(0, min(INITIAL, len(self.model)))
        self.release_anchor()
        self.scroll_home(animate=False, immediate=True)
        self._focus_edge(0)

    async def action_jump_end(self) -> None:
        await self.jump_end()
        self._focus_edge(-1)

    async def jump_end(self) -> None:
        """Show the end and follow new output, leaving the focus where it is (a prompt just sent
        keeps it)."""
        if not self.at_end or self.lo > max(len(self.model) - MAX_MOUNTED, 0):
            await self._remount(max(len(self.model) - INITIAL, 0), len(self.model))
        self.anchor()

    def _focus_edge(self, index: int) -> None:
        """``home`` and ``end`` focus the first or last message, as ``j``/``k`` would: ``y`` then
        copies it and ``enter`` expands it. A remount drops the message that had the focus, and
        the next key (``y``) went to the prompt as typed text."""
        widgets = self._entry_widgets()
        if widgets:
            widgets[index].focus(scroll_visible=False)

    def focused_entry(self) -> Entry | None:
        focused = self.app.focused
        return next((e for e in self.model.entries[self.lo : self.hi] if e.widget is focused), None)

    def last_answer(self) -> Entry | None:
        return next((e for e in reversed(self.model.entries) if e.kind == "assistant"), None)

    def rerender(self) -> None:
        """The theme changed: static renders pick up the new colours and code style."""
        for widget in self._entry_widgets():
            if _streams(widget):
                widget.rerender()
            else:
                widget.refresh_entry()


def _streams(widget: Widget | None) -> TypeGuard[AssistantMessageView]:
    """Assistant message views take streamed markdown (they have a MarkdownBody)."""
    if widget is None:
        return False
    from roder_tui.widgets.messages import AssistantMessageView  # loaded with the widget itself

    return isinstance(widget, AssistantMessageView)


def _outer_height(widget: Widget | None) -> int:
    if widget is None or not widget.is_attached:
        return 0
    return widget.outer_size.height + max(widget.styles.margin.top, 0)
