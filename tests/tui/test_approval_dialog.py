"""The approval dialog as a daily user meets it: an edit as line-numbered changes, a reason read
in full at 40 columns, a background command said to be one, a repeated call's content readable,
an edit that cannot apply failing without asking, and the loop guard counting within a turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roder_tui.screens.approval import ApprovalScreen
from tests.tui.helpers import ask, entries_of, make_app, ready, turn_done, until


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def open_approval(pilot: Any, prompt: str = "go") -> ApprovalScreen:
    app = pilot.app
    await pilot.press(*prompt, "enter")
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
    screen = app.screen
    await until(pilot, lambda: screen.query("#approval-keys") and screen.query_one("#approval-keys").region.height > 0)
    return screen


def preview_text(screen: ApprovalScreen) -> str:
    from rich.console import Group

    shown = screen._preview()
    return "\n".join(part.plain for part in (shown.renderables if isinstance(shown, Group) else [shown]))


async def test_an_edit_shows_line_numbered_changes(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    app = make_app(workspace, [call("edit", path="a.txt", old_string="two", new_string="TWO"), {"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot)
        shown = preview_text(screen)
        assert shown.splitlines()[0] == "a.txt"
        assert "   2 - two" in shown and "   2 + TWO" in shown and "   1   one" in shown
        assert not any(line.startswith(("---", "+++", "@@")) for line in shown.splitlines())


async def test_a_long_reason_is_read_in_full_at_40_columns(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [call("bash", command="echo $(date) > /dev/null"), {"text": "ok"}], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot)
        reason = screen.query_one("#approval-reason")
        text = screen.request.reason
        assert len(text) > 3 * 36, text  # more than three lines at this width
        rendered = [strip.text.rstrip() for strip in reason.render_lines(reason.region.reset_offset)]  # type: ignore[attr-defined]
        assert " ".join(" ".join(rendered).split()) == " ".join(text.split())


async def test_a_background_command_says_so(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [call("bash", command="python -m http.server 8123", run_in_background=True), {"text": "ok"}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot)
        assert "runs in the background" in preview_text(screen)
        await pilot.press("n")


async def test_an_edit_that_cannot_apply_fails_without_asking(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "a.txt").write_text("one\n")
    steps = [call("edit", path="a.txt", old_string="missing", new_string="x"), {"text": "I see."}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"edit it", "enter")
        await turn_done(pilot)
        assert not isinstance(app.screen, ApprovalScreen)
        [card] = entries_of(app, "tool")
        assert card.status == "error" and "old_string was not found" in card.copy_text()


async def test_the_loop_guard_counts_within_a_turn_and_shows_readable_content(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = call("write", path="n.txt", content="alpha\nbeta\n")
    # Two prompts that each write the same file twice: four calls, never three in one turn.
    steps = [write, write, {"text": "done"}, write, write, {"text": "done again"}, write, write, write, {"text": "x"}]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "write it")
        await ask(pilot, "write it again", answers=2)
        assert not isinstance(app.screen, ApprovalScreen)
        screen = await open_approval(pilot, "and once more")  # three in one turn: the guard asks
        assert "3 times in a row" in screen.request.reason
        shown = preview_text(screen)
        assert "\\n" not in shown
        assert "no change" in shown or "alpha\nbeta" in shown
        await pilot.press("y")
