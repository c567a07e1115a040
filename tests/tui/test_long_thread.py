"""A 2,000-message thread opens from its last turns and scrolls with a bounded number of mounted
widgets; the older turns are fetched when the view is scrolled or jumped back to them."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_tui.app_state import RECENT_TURNS
from roder_tui.widgets.transcript import MAX_MOUNTED
from tests.tui.helpers import make_app, ready, until, write_long_thread


def _mounted(app: object) -> int:
    transcript = app.transcript  # type: ignore[attr-defined]
    return sum(1 for e in transcript.model.entries if e.widget is not None and e.widget.is_attached)


async def test_two_thousand_message_thread_opens_and_scrolls(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    thread_id = await write_long_thread(workspace, 2000)
    app = make_app(workspace, None, monkeypatch, resume=thread_id)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        transcript = app.transcript
        assert len(transcript.model.entries) == 2 * RECENT_TURNS  # the last turns only, for now
        assert transcript.older is not None
        assert transcript.at_end
        assert _mounted(app) <= MAX_MOUNTED
        last = transcript.model.entries[-1]
        assert last.widget is not None
        assert "Answer 999" in last.items[0].text
        await pilot.press("ctrl+t")  # focus the last message, then walk up past the window's edge
        for _ in range(45):
            await pilot.press("k")
        assert transcript.lo < 2 * RECENT_TURNS - 45
        assert _mounted(app) <= MAX_MOUNTED
        focused = transcript.focused_entry()
        assert focused is not None
        assert transcript.model.index(focused) == 2 * RECENT_TURNS - 46
        await pilot.press("home")  # fetches the 940 older turns, then shows the first
        await until(pilot, lambda: transcript.older is None and transcript.lo == 0, what="the start of the thread")
        assert len(transcript.model.entries) == 2000
        assert transcript.model.index(focused) == 2000 - 46  # entries already there kept their place
        first = transcript.model.entries[0]
        assert first.widget is not None
        assert first.items[0].text.startswith("question 0")
        assert _mounted(app) <= MAX_MOUNTED
        await pilot.press("end")
        await until(pilot, lambda: transcript.at_end, what="the end of the thread")
        assert _mounted(app) <= MAX_MOUNTED
        await pilot.press("pageup")  # scrolling up from the end loads earlier entries on demand
        lo_before = transcript.lo
        for _ in range(15):
            await pilot.press("pageup")
        await until(pilot, lambda: transcript.lo < lo_before, what="earlier entries to mount on scroll-up")
        assert _mounted(app) <= MAX_MOUNTED


async def test_scrolling_back_past_the_last_turns_fetches_the_older_ones(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = await write_long_thread(workspace, 2 * RECENT_TURNS + 20)  # ten turns more than shown first
    app = make_app(workspace, None, monkeypatch, resume=thread_id)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        transcript = app.transcript
        assert len(transcript.model.entries) == 2 * RECENT_TURNS
        assert transcript.model.entries[0].items[0].text.startswith("question 10:")
        assert transcript.older is not None
        await pilot.press("ctrl+t")
        for _ in range(40):
            await pilot.press("pageup")
            if transcript.older is None:
                break
        await until(pilot, lambda: transcript.older is None, what="the older turns to be fetched")
        texts = [e.items[0].text for e in transcript.model.entries if e.kind == "user"]
        assert texts == [f"question {i}: what does step {i} do?" for i in range(RECENT_TURNS + 10)]
        await pilot.press("home")
        await until(pilot, lambda: transcript.lo == 0, what="the start of the thread")
        assert transcript.model.entries[0].widget is not None
