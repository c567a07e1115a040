"""Fast streaming markdown for assistant messages.

Textual's ``Markdown`` widget re-parses the last block on every append and mounts one widget per
block, which is fine for prose and ruinous for a long code fence (measured: a 300-line fence took
23-40 s). Feeding it through ``Markdown.get_stream()`` helps, but every new block is still a
mounted widget with its own CSS: measured in bench/tui_stream.py, prose peaked at ~3,200 tokens/s
that way against ~9,300 tokens/s with the design below (bench/README.md). So a message is cut into
segments as it streams:

* prose goes to a ``ProseBlock``: one widget rendering Rich markdown, re-rendered (at most ~30
  times a second, by the caller's coalescing) only while it is the live tail; after
  ``SEAL_LINES`` lines, at a paragraph break, it is sealed and a fresh block starts, so the live
  part, and the cost of each update, stays small however long the answer gets;
* an open code fence goes to ``CodeView``, a line-API widget that appends plain lines in O(1)
  and renders only visible rows; when the fence closes it is highlighted once with Pygments
  (off the event loop) and the styled lines replace the plain ones in place.

Finished messages (and everything loaded from a thread) are built straight from the same
segments, one widget per segment, rendered once.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.containers import Lines
from rich.markdown import Heading, Markdown, TableElement
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Span, Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from roder_tui.theming import CodeStyle
from roder_tui.widgets.incremental_markdown import BlockCache, IncrementalMarkdown
from roder_tui.widgets.one_pass_layout import OnePassLayout

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from textual.selection import Selection

#: Lines after which a live prose segment is sealed at the next blank line...
SEAL_LINES = 16
#: ...and after which it is sealed at the next line break even without one (no quadratic tail).
HARD_SEAL_LINES = 96
#: A streaming answer's live block grows by a quarter of the screen's height at a time (at least
#: ``HEADROOM`` rows): it keeps up to that many blank rows below its text, so the transcript
#: (anchored at the bottom) scrolls once every few rows instead of once a row. A scroll moves
#: every visible row, and Textual then lays out and draws the whole transcript region again:
#: most of what a streamed answer cost (bench/README.md, "Rows 2 and 8"). Between two scrolls
#: an update repaints only the block's own rows, without a layout.
HEADROOM = 4
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")


# --------------------------------------------------------------------------- splitting


@dataclass
class Op:
    """One instruction from the splitter to the view.

    kinds: ``prose`` (append text to the live prose segment), ``seal`` (freeze it),
    ``fence`` (open a code segment, ``text`` is the language), ``code`` (append code text),
    ``close`` (the fence closed, ``text`` is the whole code)."""

    kind: str
    text: str = ""


class FenceSplitter:
    """Cuts streamed markdown into prose and code-fence segments, incrementally.

    Partial lines are passed through as soon as they arrive, except a partial line that could
    still become a fence marker, which waits for its newline.
    """

    def __init__(self, seal_lines: int = SEAL_LINES) -> None:
        self.seal_lines = seal_lines
        self._partial = ""  # current incomplete line (already partly emitted: _emitted chars)
        self._emitted = 0
        self._fence: str | None = None  # the open fence marker
        self._code: list[str] = []
        self._prose_lines = 0

    @property
    def in_fence(self) -> bool:
        return self._fence is not None

    def feed(self, text: str) -> list[Op]:
        ops: list[Op] = []
        data = self._partial + text
        lines = data.split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(line, ops)
            self._emitted = 0
        if self._partial and not self._maybe_marker(self._partial):
            rest = self._partial[self._emitted :]
            if rest:
                ops.append(Op("code" if self._fence else "prose", rest))
                self._emitted = len(self._partial)
        return ops

    def finish(self) -> list[Op]:
        """End of message: flush the last line, close an unterminated fence."""
        ops: list[Op] = []
        if self._partial:
            self._line(self._partial, ops)
            self._partial, self._emitted = "", 0
        if self._fence is not None:
            ops.append(Op("close", "\n".join(self._code)))
            self._fence, self._code = None, []
        return ops

    def _maybe_marker(self, partial: str) -> bool:
        stripped = partial.lstrip(" ")
        return self._emitted == 0 and len(partial) - len(stripped) <= 3 and (not stripped or stripped[0] in "`~")

    def _line(self, line: str, ops: list[Op]) -> None:
        done = line[: self._emitted]
        rest = line[self._emitted :]
        if self._fence is not None:
            marker = line.strip()
            if not done and marker and set(marker) == {self._fence[0]} and len(marker) >= len(self._fence):
                ops.append(Op("close", "\n".join(self._code)))
                self._fence, self._code = None, []
                return
            self._code.append(line)
            ops.append(Op("code", rest + "\n"))
            return
        match = _FENCE_OPEN.match(line) if not done else None
        if match:
            if self._prose_lines:
                ops.append(Op("seal"))
                self._prose_lines = 0
            self._fence = match.group(1)
            ops.append(Op("fence", match.group(2)))
            return
        ops.append(Op("prose", rest + "\n"))
        self._prose_lines += 1
        blank = not line.strip()
        if (blank and self._prose_lines >= self.seal_lines) or (
            self._prose_lines >= HARD_SEAL_LINES and not line.lstrip().startswith("|")
        ):
            ops.append(Op("seal"))
            self._prose_lines = 0


@dataclass
class MarkdownSegment:
    kind: str  # "prose" | "code"
    text: str
    lang: str = ""


def split_markdown(text: str, seal_lines: int = SEAL_LINES) -> list[MarkdownSegment]:
    """The static segments of a whole message (same cuts as streaming would make)."""
    splitter = FenceSplitter(seal_lines)
    segments: list[MarkdownSegment] = []
    prose: list[str] = []

    def apply(op: Op) -> None:
        if op.kind == "prose":
            prose.append(op.text)
        elif op.kind in ("seal", "fence"):
            if "".join(prose).strip():
                segments.append(MarkdownSegment("prose", "".join(prose)))
            prose.clear()
            if op.kind == "fence":
                segments.append(MarkdownSegment("code", "", op.text))
        elif op.kind == "close":
            segments[-1].text = op.text

    for op in [*splitter.feed(text), *splitter.finish()]:
        apply(op)
    if "".join(prose).strip():
        segments.append(MarkdownSegment("prose", "".join(prose)))
    return segments


# --------------------------------------------------------------------------- rendering


class _LeftHeading(Heading):
    """Rich centres h1; in a narrow transcript left-aligned headings read better."""

    LEVEL_ALIGN: ClassVar = dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6"), "left")


class _FoldingTable(TableElement):
    """A table whose cells fold a word wider than its column onto the next row. Rich cuts it with
    "…", so at 40 columns a table's names, paths and last columns could not be read anywhere on
    screen (a narrow transcript has no horizontal scroll)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.table import Table

        for renderable in super().__rich_console__(console, options):
            if isinstance(renderable, Table):
                for column in renderable.columns:
                    column.overflow = "fold"
            yield renderable


class RoderMarkdown(Markdown):
    elements: ClassVar = {**Markdown.elements, "heading_open": _LeftHeading, "table_open": _FoldingTable}


def render_markdown(text: str) -> RoderMarkdown:
    return RoderMarkdown(text, code_theme=CodeStyle.name, hyperlinks=False)


def incremental_markdown(text: str, cache: BlockCache) -> IncrementalMarkdown:
    """``render_markdown(text)``, drawn block by block: blocks ``cache`` has already drawn at
    this width are reused (a live segment re-renders only the block that grew)."""
    return IncrementalMarkdown(text, cache, render_markdown, RoderMarkdown.elements)


_HIGHLIGHTS: OrderedDict[tuple[str, str, str], Text] = OrderedDict()
_HIGHLIGHT_CACHE_SIZE = 256


def highlight_code(code: str, lang: str) -> Text:
    """Pygments-highlighted code as Rich Text, cached (a theme switch or window rebuild reuses it)."""
    key = (code, lang, CodeStyle.name)
    cached = _HIGHLIGHTS.get(key)
    if cached is not None:
        _HIGHLIGHTS.move_to_end(key)
        return cached
    syntax = Syntax(code, lang or "text", theme=CodeStyle.name, word_wrap=True)
    highlighted = syntax.highlight(code)
    highlighted.rstrip()
    # Keep the token colours, drop the theme's background: the block uses the app's surface colour.
    text = Text(highlighted.plain, spans=[Span(s.start, s.end, _foreground_only(s.style)) for s in highlighted.spans])
    _HIGHLIGHTS[key] = text
    if len(_HIGHLIGHTS) > _HIGHLIGHT_CACHE_SIZE:
        _HIGHLIGHTS.popitem(last=False)
    return text


def _foreground_only(style: str | Style) -> Style:
    style = Style.parse(style) if isinstance(style, str) else style
    return Style(color=style.color, bold=style.bold, italic=style.italic, underline=style.underline)


class ProseBlock(OnePassLayout, Static):
    """A prose segment: one Rich markdown render, cached by Textual per width. While it is the
    live tail of a streaming answer, ``append`` re-renders it, block by block (only the block
    that grew is rendered again, ``incremental_markdown``); once sealed it never changes."""

    DEFAULT_CSS = """
    ProseBlock { height: auto; }
    ProseBlock.-after-prose { margin-top: 1; }
    """

    def __init__(self, text: str, *, after_prose: bool = False, live: bool = False) -> None:
        self._blocks = BlockCache() if live else None
        #: Rows this block takes while live: its text's, rounded up by ``HEADROOM``; 0 once sealed.
        self._reserved = 0
        self._reserving = live
        #: (width, height) last given to the layout.
        self._reported: tuple[int | None, int] = (None, 0)
        super().__init__(self._markdown(text))
        self.source = text
        # A block sealed at a paragraph break is followed by a new paragraph: Rich drops the
        # trailing blank line of the first, so the gap is put back here (live and after reload).
        self.set_class(after_prose, "-after-prose")

    def _markdown(self, text: str) -> RenderableType:
        return render_markdown(text) if self._blocks is None else incremental_markdown(text, self._blocks)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """Rich draws the block, so the screen holds no character positions in it: a drag over
        it selects the whole block, and ctrl+c copies its markdown."""
        return selection.extract(self.source), "\n"

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The text's height; while live, rounded up to the rows reserved so far (when the text
        outgrows them, ``HEADROOM`` more are reserved at once)."""
        height = super().get_content_height(container, viewport, width)
        if self._reserving:
            if height > self._reserved:
                self._reserved = height + max(HEADROOM, self.app.size.height // 4) - 1
            height = self._reserved
        self._reported = (width, height)
        return height

    def append(self, text: str) -> None:
        """Grow the live block. Most streamed updates fill rows it already has (the last line
        lengthens, or the text reaches a reserved blank row): its height at the width it was
        laid out at stays the same, so only its own rows are repainted. A layout (the whole
        transcript region placed and drawn again, twice while the view is anchored) happens
        only when the text outgrows the reserved rows."""
        self.source += text
        markdown = self._markdown(self.source)
        laid_out_width, height = self._reported
        self.update(markdown, layout=False)
        if laid_out_width is None or self.get_content_height(self.size, self.size, laid_out_width) != height:
            self.refresh(layout=True)

    def seal(self) -> None:
        """The block is final: it gives back the blank rows it reserved."""
        self._reserving = False
        if self._reserved:
            self._reserved = 0
            self.refresh(layout=True)

    def rerender(self) -> None:
        if self._blocks is not None:
            self._blocks.clear()
        self.update(self._markdown(self.source))


class CodeView(ScrollView, can_focus=False):
    """A code fence on the line API: plain lines while it streams, highlighted once it closes.

    Appending a line costs O(1) and refreshes only the rows that changed; rows are rendered only
    when visible, so a 1,000-line block never renders as one big chunk. Long lines wrap at the
    current width (a resize rewraps once). Highlighting swaps the styled lines in place: same
    rows, no remount, no layout change.
    """

    DEFAULT_CSS = """
    CodeView { height: auto; background: $surface; padding: 0 1; margin: 1 0; overflow: hidden hidden; }
    """

    def __init__(self, code: str = "", lang: str = "", *, highlighted: bool = False) -> None:
        super().__init__()
        self.lang = lang
        self.lines: list[str] = code.split("\n")
        self.styled: Lines | None = None
        self._rows: list[tuple[int, int, int]] = []  # (line index, start, end)
        self._rows_done = 0  # rows belonging to complete lines (all but the last)
        self._lines_done = 0
        self._width = 0
        self._strips: dict[int, Strip] = {}
        #: Highlight on first paint: a block scrolled out of view (most of a long thread's
        #: mounted window) never pays for Pygments. Its rows wrap the same either way.
        self._highlight_pending = highlighted

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The code under a drag: the whole block (its rows are drawn line by line, without
        character positions)."""
        return selection.extract("\n".join(self.lines)), "\n"

    @property
    def code(self) -> str:
        return "\n".join(self.lines)

    def append(self, text: str) -> None:
        pieces = text.split("\n")
        self.lines[-1] += pieces[0]
        self.lines.extend(pieces[1:])
        self._rewrap()

    def set_highlighted(self, styled: Text, code: str | None = None) -> None:
        """Show the highlighted lines; ``code`` (the fence's final text) drops the streamed
        trailing newline's empty row."""
        self.styled = styled.split("\n", allow_blank=True)
        self._strips.clear()
        if code is not None and code.split("\n") != self.lines:
            self.lines = code.split("\n")
            self._width = 0
            self._rewrap()
        else:
            self.refresh()

    def rerender(self) -> None:
        if self.styled is not None and not self._highlight_pending:
            self.set_highlighted(highlight_code(self.code, self.lang))

    def _content_width(self) -> int:
        return max(self.size.width - self.styles.gutter.width, 10) if self.size.width else 80

    def _rewrap(self) -> None:
        width = self._content_width()
        if width != self._width:
            self._rows, self._rows_done, self._lines_done, self._width = [], 0, 0, width
            self._strips.clear()
        del self._rows[self._rows_done :]
        for index in range(self._lines_done, len(self.lines) - 1):
            self._rows.extend(_wrap_spans(index, self.lines[index], width))
        self._lines_done = max(len(self.lines) - 1, 0)
        self._rows_done = len(self._rows)
        self._rows.extend(_wrap_spans(len(self.lines) - 1, self.lines[-1], width))
        for row in range(self._rows_done, len(self._rows)):
            self._strips.pop(row, None)
        height = len(self._rows)
        if self.virtual_size.height != height:
            self.virtual_size = Size(width, height)
            self.refresh(layout=True)
        else:
            self.refresh()

    def on_mount(self) -> None:
        self._rewrap()

    def on_resize(self) -> None:
        if self._content_width() != self._width:
            self._rewrap()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not self._rows:
            self._rewrap()
        return max(len(self._rows), 1)

    def render_line(self, y: int) -> Strip:
        if self._highlight_pending:
            self._highlight_pending = False
            self.styled = highlight_code(self.code, self.lang).split("\n", allow_blank=True)
        strip = self._strips.get(y)
        if strip is None:
            strip = self._render_row(y)
            if y < self._rows_done or self.styled is not None:
                self._strips[y] = strip
        return strip

    def _render_row(self, y: int) -> Strip:
        base = self.rich_style
        if y >= len(self._rows):
            return Strip.blank(self._width, base)
        index, start, end = self._rows[y]
        if self.styled is not None and index < len(self.styled):
            segments = list(self.styled[index][start:end].render(self.app.console))
            strip = Strip(segments).apply_style(base)
        else:
            text = self.lines[index][start:end]
            strip = Strip([Segment(text, base)], len(text))
        return strip.extend_cell_length(self._width, base).crop(0, self._width)


def _wrap_spans(index: int, line: str, width: int) -> list[tuple[int, int, int]]:
    """Rows of one code line as (line, start, end) character spans, hard-wrapped at ``width``."""
    if len(line) <= width:
        return [(index, 0, len(line))]
    return [(index, i, min(i + width, len(line))) for i in range(0, len(line), width)]


# --------------------------------------------------------------------------- the message body


class MarkdownBody(OnePassLayout, Vertical):
    """The body of an assistant message: live while streaming, static once finished."""

    DEFAULT_CSS = """
    MarkdownBody { height: auto; layout: stream; }
    """

    def __init__(self, text: str = "", *, streaming: bool = False) -> None:
        super().__init__()
        self.streaming = streaming
        self._initial = text
        self._splitter = FenceSplitter()
        self._streamed: list[str] = []
        self._live_prose: ProseBlock | None = None
        self._live_code: CodeView | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def compose(self) -> ComposeResult:
        if not self.streaming:
            yield from _static_widgets(self._initial)

    @property
    def text(self) -> str:
        return "".join(self._streamed) if self.streaming else self._initial

    # -------------------------------------------------------------- streaming

    async def feed(self, text: str) -> None:
        """Append streamed text (already coalesced by the caller to at most ~30 calls/s)."""
        self._streamed.append(text)
        prose: list[str] = []  # consecutive prose lines become one update, not one per line
        for op in self._splitter.feed(text):
            if op.kind == "prose":
                prose.append(op.text)
                continue
            if prose:
                await self._apply(Op("prose", "".join(prose)))
                prose.clear()
            await self._apply(op)
        if prose:
            await self._apply(Op("prose", "".join(prose)))

    async def finish(self, final_text: str) -> None:
        """The message is complete: seal the live segment (its one final render). If the
        authoritative text differs from what streamed (a redaction, a dropped delta), rebuild."""
        for op in self._splitter.finish():
            await self._apply(op)
        self._seal()
        for task in list(self._tasks):
            await task
        self.streaming = False
        if final_text != "".join(self._streamed):
            await self.set_text(final_text)
        else:
            self._initial = final_text

    async def set_text(self, text: str) -> None:
        self._initial = text
        with self.app.batch_update():
            await self.remove_children()
            await self.mount_all(list(_static_widgets(text)))

    async def _apply(self, op: Op) -> None:
        if op.kind == "prose":
            if self._live_prose is None:
                # Mounted with its first text: one layout, not one for an empty block and another for the text.
                after = bool(self.children) and isinstance(self.children[-1], ProseBlock)
                self._live_prose = ProseBlock(op.text, after_prose=after, live=True)
                await self.mount(self._live_prose)
            else:
                self._live_prose.append(op.text)
        elif op.kind in ("seal", "fence"):
            self._seal()
        if op.kind == "fence":
            self._live_code = CodeView(lang=op.text)
            await self.mount(self._live_code)
        if op.kind == "code" and self._live_code is not None:
            self._live_code.append(op.text)
        elif op.kind == "close" and self._live_code is not None:
            live, code = self._live_code, op.text
            self._live_code = None
            task = asyncio.create_task(self._highlight(live, code))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _highlight(self, view: CodeView, code: str) -> None:
        # Pygments on a thread: a 1,000-line fence must not stall the event loop.
        highlighted = await asyncio.to_thread(highlight_code, code, view.lang)
        if view.is_attached:
            view.set_highlighted(highlighted, code)

    def _seal(self) -> None:
        """The live prose block is final: it keeps its last render and never changes again.
        A block that got only blank lines is dropped."""
        block, self._live_prose = self._live_prose, None
        if block is not None and not block.source.strip():
            block.remove()
        elif block is not None:
            block.seal()

    def rerender(self) -> None:
        """Theme changed: static segments re-render with the new code style and colours."""
        for child in self.children:
            if isinstance(child, ProseBlock | CodeView):
                child.rerender()


def _static_widgets(text: str) -> list[ProseBlock | CodeView]:
    widgets: list[ProseBlock | CodeView] = []
    for seg in split_markdown(text):
        after = bool(widgets) and isinstance(widgets[-1], ProseBlock)
        widgets.append(
            ProseBlock(seg.text, after_prose=after) if seg.kind == "prose" else CodeView(seg.text, seg.lang, highlighted=True)
        )
    return widgets


__all__ = [
    "CodeStyle",
    "CodeView",
    "FenceSplitter",
    "MarkdownBody",
    "Op",
    "ProseBlock",
    "highlight_code",
    "incremental_markdown",
    "render_markdown",
    "split_markdown",
]
