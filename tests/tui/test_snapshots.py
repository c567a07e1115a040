"""Snapshot tests of the main screen, the approval modal, the palette and the narrow layout, at
120x40 and 50x24. Regenerate after an intended visual change with
``pytest tests/tui/test_snapshots.py --snapshot-update`` and review the SVGs in the diff.

Everything that varies between runs is pinned: the workspace path, token counts (the mock script
gives usage), ages, tool durations and the turn's elapsed seconds.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from roder_tui.screens.approval import ApprovalScreen
from tests.tui.helpers import entries_of, help_shown, make_app, palette_searched, ready, shown, turn_done, until

SIZES = [(120, 40), (50, 24)]
USAGE = {"input_tokens": 1200, "output_tokens": 80}
ANSWER = (
    "Here is the plan:\n\n1. Read `app.py`\n2. Add the **status** segment\n\n"
    "```python\ndef segment(state):\n    return state.get('mode')\n```\n\nThat is all."
)


async def _settle(app: Any) -> None:
    """Pin what moves on its own: the elapsed counter, and the sidebar's background refresh."""
    if app._elapsed_timer is not None:
        app._elapsed_timer.stop()
    app.status_bar.update_state(elapsed=None)
    await app.refresh_sidebar().wait()
    await _scrolled_to_end(app)


async def _scrolled_to_end(app: Any) -> None:
    """Pin the transcript at its end. Under load it can still change for a few frames after the
    awaited event (a card or an empty answer segment mounts after the approval modal opens), so
    scroll until its entries, height and offset stay the same over several frames: a transcript
    caught mid-change makes two snapshots differ."""
    last, steady = None, 0
    for _ in range(200):
        app.transcript.scroll_end(animate=False, immediate=True)
        await asyncio.sleep(0.05)  # a frame's time: this polls for a steady state, it waits for no event
        now = (len(app.transcript.children), app.transcript.virtual_size.height, app.transcript.scroll_y)
        steady = steady + 1 if now == last else 0
        if steady >= 4:
            return
        last = now


@pytest.mark.parametrize("size", SIZES, ids=["120x40", "50x24"])
def test_main_screen(snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    steps = [
        {"text": "Checking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo one; echo two"}}], "usage": USAGE},
        {"text": ANSWER, "usage": USAGE},
    ]
    app = make_app(fixed_workspace, steps, monkeypatch, mode="bypass")

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press(*"add a status segment", "enter")
        await turn_done(pilot, 2)
        await _settle(app)
        await pilot.pause(0.3)
        app.prompt_bar.input.focus()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=["120x40", "50x24"])
def test_approval_modal(snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    steps = [
        {
            "text": "",
            "usage": USAGE,
            "tool_calls": [{"name": "bash", "arguments": {"command": "python -m pytest -q tests/test_status.py"}}],
        }
    ]
    app = make_app(fixed_workspace, steps, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press(*"run the tests", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        # no answer text before the call: when it is drawn relative to the modal varies with load
        await until(pilot, lambda: bool(entries_of(app, "tool")), what="the call's card")
        await _settle(app)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
def test_approval_modal_with_a_long_diff(
    snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A 60-line diff: the key legend and the rule 'always' saves stay visible; the diff scrolls."""
    content = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(60))
    steps = [
        {"text": "", "usage": USAGE, "tool_calls": [{"name": "write", "arguments": {"path": "notes.txt", "content": content}}]}
    ]
    app = make_app(fixed_workspace, steps, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press(*"write the notes", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        # no answer text before the call: when it is drawn relative to the modal varies with load
        await until(pilot, lambda: bool(entries_of(app, "tool")), what="the call's card")
        await _settle(app)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=["120x40", "50x24"])
def test_command_palette(
    snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    app = make_app(fixed_workspace, None, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: palette_searched(app), what="the command palette")
        await pilot.press(*"Mode:")
        await until(pilot, lambda: palette_searched(app), what="every source's hits")
        await pilot.pause()  # the list drawn with them

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_narrow_layout_with_help(snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(fixed_workspace, None, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        await pilot.pause()  # drawn

    assert snap_compare(app, terminal_size=(50, 24), run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
def test_toasts(snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    """Toasts in the upper half, clear of the prompt; a second retry notice replaces the first."""
    app = make_app(fixed_workspace, None, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await _settle(app)
        reason = "HTTP 503 from the provider: overloaded, try again later"
        app.notify(f"{reason}; retry 1 of 4 in 2.0 s", title="retrying", severity="warning", timeout=300)
        app.notify(f"{reason}; retry 2 of 4 in 4.0 s", title="retrying", severity="warning", timeout=300)
        app.notify("copied 120 characters to the clipboard", timeout=300)
        await until(pilot, lambda: len([t for t in app.screen.query("Toast") if t.region.height > 0]) == 2, what="two toasts")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
def test_first_run_screen(
    snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    from roder_tui.screens.first_run import FirstRunScreen

    monkeypatch.setenv("RODER_HOME", str(fixed_workspace.parent / "home"))  # the config path it names is fixed
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(key)
    app = make_app(fixed_workspace, None, monkeypatch, provider=None)

    async def run_before(pilot: Any) -> None:
        await until(pilot, lambda: shown(app, FirstRunScreen), what="the first-run screen")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
