"""Markdown rendered block by block, so a growing answer re-renders only the block that grew.

A live prose segment of a streaming answer (``ProseBlock``) is re-rendered at every coalesced
flush. Rendering the whole segment each time re-parses and re-wraps every paragraph already on
screen; over SSH, where the app should burn a few percent of a core, that was a fifth of its
streaming CPU. Rich's ``Markdown`` renders a document as its top-level blocks (paragraphs,
headings, lists, quotes, tables, rules) one after the other, carrying one piece of state from a
block to the next: whether the element that ended last asked for a blank line before the next
thing drawn (``new_line``; every top-level element does but a rule). So a block renders the
same in the document as it does after a one-word paragraph (state "blank line wanted") or alone
(state "none"), minus that paragraph's lines; joining the blocks rendered that way gives the
document's lines, and a block whose source did not change since the last flush reuses them.

``IncrementalMarkdown`` does that: a block-level-only parse of the source (cheap: no inline
parsing) gives the top-level blocks and their line ranges; each block's lines come from a
``BlockCache`` keyed by the block's text and the width, rendered by ``render_markdown`` on a
miss. A document whose blocks cannot be rendered apart (link reference definitions, which
resolve links anywhere in the document; carriage returns or NULs, which the parser rewrites) is
rendered whole. ``tests/tui/test_incremental_markdown.py`` checks that the result equals the
whole render, segment for segment, for many documents cut into many pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from rich.markdown import UnknownElement
from rich.segment import Segment

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from rich.console import Console, ConsoleOptions
    from rich.markdown import Markdown


@cache
def _block_parser() -> MarkdownIt:
    """The parser Rich uses (strikethrough and tables on), without the inline pass: only the
    top-level blocks' kinds and line ranges are needed here."""
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table").disable("inline")


@dataclass(frozen=True)
class Block:
    """One top-level block: its source lines and whether a blank line follows it."""

    text: str
    blank_after: bool


def top_level_blocks(source: str, elements: dict[str, type]) -> list[Block] | None:
    """The top-level blocks of ``source``, or None when they cannot be rendered one by one.

    ``elements`` maps token types to Rich's element classes (``Markdown.elements``): a block is
    followed by a blank line when its element's ``new_line`` says so, as in ``Markdown``."""
    if "\r" in source or "\0" in source:
        return None
    env: dict[str, object] = {}
    tokens = _block_parser().parse(source, env)
    if env.get("references"):
        return None
    lines = source.split("\n")
    blocks: list[Block] = []
    for token in tokens:
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        start, end = token.map
        element = elements.get(token.type) or UnknownElement
        blocks.append(Block("\n".join(lines[start:end]), bool(getattr(element, "new_line", True))))
    return blocks


class BlockCache:
    """Rendered lines of top-level blocks at one width. Only the blocks of the latest render are
    kept, so a cache never outgrows the segment it belongs to."""

    def __init__(self) -> None:
        self._width = -1
        self._segments: dict[tuple[str, bool], list[Segment]] = {}
        self._lead: list[Segment] | None = None
        #: The last document drawn, (source, width, segments): Textual draws each update twice,
        #: once to measure its height and once for its rows, so the second costs no parse.
        self._last: tuple[str, int, list[Segment]] | None = None
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self._segments.clear()
        self._lead = None
        self._last = None

    def last(self, source: str, width: int) -> list[Segment] | None:
        """The segments of ``source`` at ``width`` if it was the last document drawn."""
        last = self._last
        return last[2] if last is not None and last[1] == width and last[0] == source else None

    def remember(self, source: str, width: int, segments: list[Segment]) -> None:
        self._last = (source, width, segments)

    def render(
        self,
        blocks: list[Block],
        render_block: Callable[[str], Markdown],
        console: Console,
        options: ConsoleOptions,
    ) -> list[Segment] | None:
        """The blocks' segments, or None if one cannot be rendered apart (never seen)."""
        if options.max_width != self._width:
            self._width = options.max_width
            self._segments.clear()
            self._lead = None
        kept: dict[tuple[str, bool], list[Segment]] = {}
        out: list[Segment] = []
        for index, block in enumerate(blocks):
            key = (block.text, index > 0 and blocks[index - 1].blank_after)
            segments = kept.get(key) or self._segments.get(key)
            if segments is None:
                self.misses += 1
                if key[1] and self._lead is None:
                    self._lead = list(console.render(render_block(_LEAD), options))
                segments = _render_block(block.text, self._lead if key[1] else None, render_block, console, options)
                if segments is None:
                    return None
            else:
                self.hits += 1
            kept[key] = segments
            out.extend(segments)
        self._segments = kept
        return out


#: A paragraph put before a block to render it in the state "blank line wanted".
_LEAD = "x"


def _render_block(
    text: str,
    lead: list[Segment] | None,
    render_block: Callable[[str], Markdown],
    console: Console,
    options: ConsoleOptions,
) -> list[Segment] | None:
    """A top-level block's segments as the document draws them: after an element that wants a
    blank line (``lead``: the segments of ``_LEAD`` alone) or at the start or after a rule. None
    if the leading paragraph did not render as it does alone (Rich's renderer never does that)."""
    if lead is None:
        return list(console.render(render_block(text), options))
    segments = list(console.render(render_block(f"{_LEAD}\n\n{text}"), options))
    return segments[len(lead) :] if segments[: len(lead)] == lead else None


class IncrementalMarkdown:
    """A Rich renderable drawing ``source`` as ``render_block(source)`` would, block by block
    through ``cache``. ``render_block`` must be a ``rich.markdown.Markdown`` factory whose
    ``elements`` are ``elements``."""

    def __init__(
        self,
        source: str,
        cache: BlockCache,
        render_block: Callable[[str], Markdown],
        elements: dict[str, type],
    ) -> None:
        self.source = source
        self._cache = cache
        self._render_block = render_block
        self._elements = elements

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        segments = self._cache.last(self.source, options.max_width)
        if segments is None:
            blocks = top_level_blocks(self.source, self._elements)
            segments = None if blocks is None else self._cache.render(blocks, self._render_block, console, options)
            if segments is None:
                segments = list(console.render(self._render_block(self.source), options))
            else:
                self._cache.remember(self.source, options.max_width, segments)
        yield from segments


__all__ = ["Block", "BlockCache", "IncrementalMarkdown", "top_level_blocks"]
