"""The command palette and help as panels of the main screen: they open over it without a screen
of their own, act as modals while open (focus inside, tab kept inside, esc closes, focus goes
back where it was), list every palette source's rows, and fit at 40x20 as at 120x40."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_tui.main_screen import MainScreen
from tests.tui.helpers import ask, help_shown, make_app, open_palette, palette_searched, ready, until


def _inside(widget: object, panel: object) -> bool:
    return widget is not None and panel in widget.ancestors_with_self  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
async def test_the_palette_opens_over_the_main_screen_and_gives_focus_back(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    app = make_app(workspace, [{"text": "an answer"}], monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        await pilot.press("ctrl+t")  # focus on the transcript's last message
        before = app.focused
        assert before is not None and before is not app.prompt_bar.input
        await pilot.press("ctrl+p")
        await until(pilot, lambda: palette_searched(app), what="the command palette")
        palette = app.panels[0]  # type: ignore[index]
        assert isinstance(app.screen, MainScreen) and palette.parent is app.screen  # no screen pushed
        assert app.focused is palette.query_input
        # Fits the terminal, below the top rows, and lists rows of every built-in source.
        region = palette.region
        assert region.right <= size[0] and region.bottom <= size[1] - 1 and region.height >= 5
        titles = [row.title for row in palette.rows]
        assert any(t.startswith("Mode: ") for t in titles) and any(t.startswith("Theme: ") for t in titles)
        assert "New thread" in titles
        # Tab stays inside the palette.
        for _ in range(3):
            await pilot.press("tab")
            assert _inside(app.focused, palette)
        await pilot.press("escape")
        await until(pilot, lambda: not palette.is_open, what="the palette closed")
        assert app.focused is before


async def test_the_palette_searches_runs_and_starts_clean_on_each_open(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await open_palette(pilot, "Mode: plan")
        palette = app.panels[0]  # type: ignore[index]
        assert palette.shown[0].title == "Mode: plan"
        await pilot.press("enter")
        await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode")
        assert not palette.is_open and app.focused is app.prompt_bar.input
        await open_palette(pilot, "")
        assert palette.query_input.value == "" and len(palette.shown) == len(palette.rows)
        assert palette.row_list.highlighted == 0


async def test_focus_leaving_the_palette_closes_it(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A click elsewhere (or the app focusing another widget) closes the palette: it never stays
    open while the keys go somewhere else."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await open_palette(pilot, "")
        palette = app.panels[0]  # type: ignore[index]
        await pilot.click("#prompt")
        await until(pilot, lambda: not palette.is_open, what="the palette closed by the click")
        assert app.focused is app.prompt_bar.input
        await pilot.press(*"typed")
        assert app.prompt_bar.input.text == "typed"


async def test_help_opens_centred_fits_and_closes_with_its_keys(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        help_panel = app.panels[1]  # type: ignore[index]
        for close in ("escape", "q", "f1"):
            await pilot.press("f1")
            await until(pilot, lambda: help_shown(app), what="the help panel")
            assert isinstance(app.screen, MainScreen)
            region = help_panel.region
            assert (region.x, region.width) == (10, 100)  # centred, at most 100 wide
            assert region.bottom <= 39  # clear of the status bar's row
            await pilot.press(close)
            await until(pilot, lambda: not help_panel.is_open, what=f"help closed by {close}")
            assert app.focused is app.prompt_bar.input
        # Resized while open: placed again for the new size.
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        await pilot.resize_terminal(40, 20)
        await until(pilot, lambda: help_panel.region.width == 40, what="help laid out for 40x20")
        assert help_panel.region.x == 0 and help_panel.region.bottom <= 19
        assert not app.screen.scrollbars_enabled[0]  # the screen itself never scrolls


async def test_over_a_dialog_the_palette_says_the_dialog_comes_first(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.tasks import TasksScreen

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the tasks dialog")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: any("Close this dialog first" in n.message for n in app._notifications), what="the notice")
        assert not app.panels[0].is_open  # type: ignore[index]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), what="the dialog closed")
        await open_palette(pilot, "")
        assert palette_searched(app)
