"""The incremental markdown renderer draws exactly what a whole render draws, and the app's
streaming path (block-by-block renders, one layout per update) leaves the screen a fresh load
draws.

A streaming answer's live prose is rendered block by block, reusing the lines of blocks that did
not change (``roder_tui/widgets/incremental_markdown.py``). These tests grow documents piece by
piece, as deltas arrive, through one cache, and compare every step with ``render_markdown`` of
the same text: same segments (text and style), at several widths.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment

from roder_tui.widgets.incremental_markdown import BlockCache, top_level_blocks
from roder_tui.widgets.markdown_stream import RoderMarkdown, incremental_markdown, render_markdown
from tests.tui.helpers import ask, make_app, ready, until

DOCUMENTS = [
    "## Plan\n\nFirst we *read* the file.\nThen we `edit` it.\n\n- one\n- two\n  continued\n- three\n\nDone.",
    "1. first\n\n2. second, loose\n\n   more of second\n3. third\n\n---\nAfter the rule.\n***\n\n> quoted\n> lines\n\nend",
    "Setext heading\n==============\nparagraph\nlazy\n    not code (lazy continuation)\n\n    indented code\n    block\n\ntext",
    "| a | b |\n|---|---|\n| 1 | 2 |\n| **3** | ~~4~~ |\n\nAfter the table.\n\n<div>\nhtml block\n</div>\n\n# H1\n### H3",
    "- a\n  - nested\n    1. deep\n- b\n\n> - quoted list\n>\n> para in quote\n\nA [link](http://x.invalid) and ![img](y.png).",
    "A [ref link][r] before its definition.\n\n[r]: http://ref.invalid\n\nAfter.",
    "\n\n   leading blanks and indent\n\n\n\nmany blanks\n\n",
    "Line with trailing spaces  \nhard break\\\nbackslash break\n\n* star\n+ plus\n\n1) paren\n2) list",
]


def _console(width: int) -> Console:
    return Console(width=width, color_system="truecolor", force_terminal=True, legacy_windows=False)


def _whole(console: Console, text: str) -> list[Segment]:
    return list(console.render(render_markdown(text), console.options))


def _grown(console: Console, text: str, cuts: list[int]) -> list[tuple[str, list[Segment]]]:
    """Render every prefix at the cuts (and the whole text) through one shared cache."""
    cache = BlockCache()
    out = []
    for cut in [*sorted(set(cuts)), len(text)]:
        prefix = text[:cut]
        out.append((prefix, list(console.render(incremental_markdown(prefix, cache), console.options))))
    return out


@pytest.mark.parametrize("width", [20, 47, 100])
@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_every_prefix_renders_like_the_whole_text(document: str, width: int) -> None:
    console = _console(width)
    for prefix, segments in _grown(console, document, list(range(0, len(document), 3))):
        assert segments == _whole(console, prefix), prefix


def test_unchanged_blocks_are_not_rendered_again() -> None:
    console = _console(60)
    cache = BlockCache()
    text = "First paragraph.\n\nSecond paragraph.\n\n- a list"
    list(console.render(incremental_markdown(text, cache), console.options))
    assert (cache.misses, cache.hits) == (3, 0)
    list(console.render(incremental_markdown(text + "\n- more", cache), console.options))
    assert (cache.misses, cache.hits) == (4, 2)  # only the grown list is rendered


def test_the_same_document_drawn_twice_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual draws every update twice (its height, then its rows): the second draw of the same
    source at the same width reuses the first's segments, without parsing the source again."""
    import roder_tui.widgets.incremental_markdown as incremental

    parses: list[str] = []
    real_parse = incremental.top_level_blocks

    def counted(source: str, elements: dict[str, type]) -> Any:
        parses.append(source)
        return real_parse(source, elements)

    monkeypatch.setattr(incremental, "top_level_blocks", counted)
    cache = BlockCache()
    text = "First paragraph.\n\n- a list\n- of two"
    wide, narrow = _console(60), _console(30)
    first = list(wide.render(incremental_markdown(text, cache), wide.options))
    again = list(wide.render(incremental_markdown(text, cache), wide.options))
    assert again == first == _whole(wide, text)
    assert parses == [text]
    assert list(narrow.render(incremental_markdown(text, cache), narrow.options)) == _whole(narrow, text)
    grown = text + "\n- three"
    assert list(narrow.render(incremental_markdown(grown, cache), narrow.options)) == _whole(narrow, grown)
    assert parses == [text, text, grown]  # another width, another source: parsed again


def test_documents_that_cannot_be_split_are_rendered_whole() -> None:
    elements = RoderMarkdown.elements
    assert top_level_blocks("[a][r]\n\n[r]: http://x.invalid", elements) is None
    assert top_level_blocks("one\r\ntwo", elements) is None
    blocks = top_level_blocks("para\n\n---\nnext", elements)
    assert blocks is not None
    assert [(b.text, b.blank_after) for b in blocks] == [("para", True), ("---", False), ("next", True)]


_PIECES = st.sampled_from(
    [
        "word ",
        "**bold** ",
        "`code` ",
        "\n",
        "\n\n",
        "- item ",
        "1. item ",
        "> quote ",
        "## head ",
        "---",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "    indented ",
        "  ",
        "===",
        "*",
        "[x](u) ",
        "[x]: http://d.invalid\n",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(_PIECES, min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    width=st.integers(min_value=12, max_value=90),
)
def test_any_document_any_split(pieces: list[str], cuts: list[int], width: int) -> None:
    text = "".join(pieces)
    console = _console(width)
    for prefix, segments in _grown(console, text, [c for c in cuts if c <= len(text)]):
        assert segments == _whole(console, prefix), prefix


def _screen_rows(app: Any) -> list[str]:
    """The screen as styled text rows, drawn by the app's compositor (what a terminal shows)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor", record=True)
    console.print(app.screen._compositor.render_update(full=True, simplify=True))
    return console.export_text(styles=True).splitlines()


async def test_a_streamed_answer_is_drawn_like_the_same_answer_loaded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming renders prose block by block and lays out once per update; the screen it
    leaves must be the one a fresh load of the finished thread draws."""
    paragraphs = [
        f"## Part {i}\n\nThe runtime folds event {i} into *thread state*, then the transcript\n"
        f"renders `item {i}` once.\n\n- first point of {i}\n- second point, long enough to wrap at this width\n"
        for i in range(8)
    ]
    text = "\n".join(paragraphs) + "\nThe end."
    app = make_app(workspace, [{"text": text, "chunk_size": 7}], monkeypatch)
    async with app.run_test(size=(70, 30)) as pilot:
        await ready(pilot)
        await ask(pilot, "explain")
        await pilot.pause()
        transcript = app.transcript
        rows = range(transcript.region.y, transcript.region.bottom)
        streamed = _screen_rows(app)
        assert "The end." in "\n".join(streamed[r] for r in rows)
        assert app.thread_id is not None
        await app.switch_thread(app.thread_id)
        await until(pilot, lambda: transcript.last_answer() is not None and transcript.last_answer().widget is not None)
        await pilot.pause()
        loaded = _screen_rows(app)
        assert [streamed[r] for r in rows] == [loaded[r] for r in rows]
