"""A streaming answer at the bottom of the transcript scrolls the view in steps, not once a row.

Each scroll moves every visible row, so Textual lays out and draws the whole transcript region
again; that was most of what a streamed answer cost. The live prose block keeps blank rows below
its text (a quarter of the screen) and grows into them without asking for a layout; it gives them
back when the answer is sealed.
"""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region, Size
from textual.widgets import Static

from roder_tui.widgets.markdown_stream import HEADROOM, MarkdownBody, ProseBlock
from roder_tui.widgets.transcript import Transcript
from tests.tui.helpers import until

SIZE = (60, 24)
STEP = max(HEADROOM, SIZE[1] // 4)


class _Streaming(App[None]):
    """A transcript with earlier content above a streaming answer's body."""

    def compose(self) -> ComposeResult:
        self.body = MarkdownBody(streaming=True)
        with Transcript() as transcript:
            self.transcript = transcript
            yield Static("\n".join(f"earlier {n}" for n in range(40)))
            yield self.body


def _live_block(app: _Streaming) -> ProseBlock:
    blocks = [child for child in app.body.children if isinstance(child, ProseBlock)]
    return blocks[-1]


def _shown_text(block: ProseBlock) -> str:
    lines = block.render_lines(Region(0, 0, block.size.width, block.size.height))
    return "\n".join("".join(segment.text for segment in strip).rstrip() for strip in lines)


async def test_rows_within_the_reserve_need_no_layout_and_show_at_once() -> None:
    app = _Streaming()
    async with app.run_test(size=SIZE) as pilot:
        transcript = app.transcript
        transcript.anchor()
        await app.body.feed("- row 1\n")
        await pilot.pause()
        block = _live_block(app)
        assert block.size.height >= STEP  # the text's row and the blank rows reserved under it
        height, bottom = block.size.height, transcript.max_scroll_y
        for n in range(2, STEP):
            await app.body.feed(f"- row {n}\n")
            assert not block._layout_required, f"row {n} asked for a layout"
            await pilot.pause()
            assert f"row {n}" in _shown_text(block)
            assert transcript.max_scroll_y == bottom  # the view did not move
        assert block.size.height == height


async def test_outgrowing_the_reserve_takes_a_step_and_sealing_gives_it_back() -> None:
    app = _Streaming()
    async with app.run_test(size=SIZE) as pilot:
        transcript = app.transcript
        transcript.anchor()
        await app.body.feed("- row 1\n")
        await pilot.pause()
        block = _live_block(app)
        first = block.size.height
        text = "".join(f"- row {n}\n" for n in range(1, first + 2))  # one row more than reserved
        await app.body.feed(text.removeprefix("- row 1\n"))
        await until(pilot, lambda: block.size.height > first, what="the next step")
        assert block.size.height - first >= HEADROOM  # one layout for several rows to come
        await app.body.finish(text)
        last = f"row {first + 1}"
        await until(pilot, lambda: _shown_text(block).split("\n")[-1].strip().endswith(last), what="the reserve given back")
        await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y, what="the view at the end")


async def test_a_growth_is_laid_out_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual asks for a second layout of every widget a layout resized; for the anchored
    transcript and its entries that pass moves nothing but draws the whole region again."""
    app = _Streaming()
    async with app.run_test(size=SIZE) as pilot:
        app.transcript.anchor()
        await app.body.feed("- row 1\n")
        await pilot.pause()
        block = _live_block(app)
        first = block.size.height
        layouts: list[bool] = []
        screen = app.screen
        refresh_layout = screen._refresh_layout

        def counted(size: Size | None = None, scroll: bool = False) -> None:
            layouts.append(scroll)
            refresh_layout(size, scroll)

        monkeypatch.setattr(screen, "_refresh_layout", counted)
        await app.body.feed("".join(f"- row {n}\n" for n in range(2, first + 2)))
        await until(pilot, lambda: block.size.height > first, what="the next step")
        await pilot.pause()
        await pilot.pause()
        assert len(layouts) == 1
