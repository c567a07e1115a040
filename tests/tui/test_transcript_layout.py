"""A transcript entry whose inner text grows in the same frame as a later entry asks for a layout
is laid out at its new height. With Textual's stream layout the transcript reused the entry's old
placement: under load the answer before a tool card was drawn blank and the screen above it one
row off (seen in the main-screen snapshot); the transcript's layout is vertical since."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from roder_tui.widgets.messages import AssistantMessageView, ToolCardView
from roder_tui.widgets.transcript import Transcript
from tests.tui.helpers import make_app, ready, turn_done, until


class _Entry(Vertical):
    DEFAULT_CSS = "_Entry { height: auto; layout: stream; }"


class _Body(Vertical):
    DEFAULT_CSS = "_Body { height: auto; layout: stream; }"


class _Nested(App[None]):
    """Three entries in a transcript; the middle one holds its text two containers deep, as an
    answer does (entry, body, prose)."""

    def compose(self) -> ComposeResult:
        self.text = Static("")
        self.entry = _Entry(_Body(self.text))
        self.last = Static("last")
        with Transcript():
            yield Static("first")
            yield self.entry
            yield self.last


async def test_a_grown_nested_entry_is_laid_out_when_a_later_entry_changes_in_the_same_frame() -> None:
    app = _Nested()
    async with app.run_test(size=(40, 20)) as pilot:
        await pilot.pause()
        assert app.entry.region.height == 1  # an empty Static takes a row
        app.text.update("one\ntwo\nthree")
        app.last.update("last\nbut longer")
        await until(pilot, lambda: app.last.region.height == 2, what="the later entry's new layout")
        assert app.entry.region.height == 3
        assert app.last.region.y == app.entry.region.bottom


async def test_an_answer_before_a_tool_card_keeps_its_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow that showed it: an answer's first line, then the tool card mounting after it."""
    steps = [
        {"text": "Checking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
        {"text": "Done."},
    ]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(50, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"check", "enter")
        await turn_done(pilot, 2)
        view = next(v for v in app.transcript.query(AssistantMessageView) if v.body.text.startswith("Checking."))
        card = next(iter(app.transcript.query(ToolCardView)))
        assert view.size.height == 1
        assert card.region.y == view.region.bottom + 1  # the card's top margin, nothing stale between
