"""The command palette and help as panels of the main screen: they open over it without a screen
of their own and without moving the focus, act as modals while open (every key goes to the open
panel, never to the focused widget; tab moves nothing; esc closes), list every palette source's
rows, and fit at 40x20 as at 120x40."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from textual.geometry import Region
from textual.strip import Strip

from roder_tui.main_screen import MainScreen, PanelCompositor
from tests.tui.helpers import ask, help_shown, make_app, open_palette, palette_searched, ready, until


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
        assert app.focused is before and app.screen.key_owner is palette  # the keys move, the focus does not
        # Fits the terminal, below the top rows, and lists rows of every built-in source.
        region = palette.region
        assert region.right <= size[0] and region.bottom <= size[1] - 1 and region.height >= 5
        titles = [row.title for row in palette.rows]
        assert any(t.startswith("Mode: ") for t in titles) and any(t.startswith("Theme: ") for t in titles)
        assert "New thread" in titles
        # Tab moves nothing: the palette keeps the keys, the focus stays.
        for _ in range(3):
            await pilot.press("tab")
            assert palette.is_open and app.focused is before
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
        assert palette.search == "" and len(palette.shown) == len(palette.rows)
        assert palette.highlighted == 0


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
        for close in ("escape", "q", "f1"):
            await pilot.press("f1")  # before the panels are built when idle, or after: either way
            await until(pilot, lambda: help_shown(app), what="the help panel")
            help_panel = app.panels[1]  # type: ignore[index]
            assert isinstance(app.screen, MainScreen)
            region = help_panel.region
            assert (region.x, region.width) == (10, 100)  # centred, at most 100 wide
            assert region.bottom <= 39  # clear of the status bar's row
            await pilot.press(close)
            await until(pilot, lambda panel=help_panel: not panel.is_open, what=f"help closed by {close}")
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


def _row_within(chops: Mapping[int, Strip], region: Region) -> Strip:
    """A row of an update's chops, from ``region``'s left edge to its right (a chop the update
    did not draw, outside it, stands as blanks)."""
    cuts = sorted(chops)
    ends = [*cuts[1:], cuts[-1]]
    row = Strip.join([chops[cut] or Strip.blank(end - cut) for cut, end in zip(cuts, ends, strict=True)])
    return row.crop(region.x, region.right).simplify()


def _toasts_drawn(app: Any) -> list[Region]:
    """The part of each toast the screen draws (a toast the rack cannot hold is clipped)."""
    from textual.widgets._toast import Toast

    drawn = app.screen._compositor.visible_widgets.items()
    return [visible for widget, (region, clip) in drawn if isinstance(widget, Toast) and (visible := region.intersection(clip))]


def _rows_idle(app: object) -> bool:
    """The palette is built and no reload of its rows is under way."""
    from textual.worker import WorkerState

    panels = app.panels  # type: ignore[attr-defined]
    if panels is None or not panels[0].is_mounted:
        return False
    busy = (WorkerState.PENDING, WorkerState.RUNNING)
    return not any(w.group == "palette-rows" and w.state in busy for w in panels[0].workers)


async def test_the_built_palette_lists_changes_before_it_opens(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path
) -> None:
    """The palette is built once, hidden; a change of what its rows are made from (the mode, the
    slash commands after a plugin reload) reloads them then, so the open shows them current at
    once, not the rows of the last open followed by a refresh."""
    from roder_core.server.protocol_plugins import PluginsChanged

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await until(pilot, lambda: _rows_idle(app) and bool(app.panels[0].rows), what="the palette built, its rows loaded")  # type: ignore[index]
        palette = app.panels[0]  # type: ignore[index]
        assert not palette.is_open
        before = app.status_bar.state.get("mode")
        assert f"Mode: {before} ✓" in [row.title for row in palette.rows]

        await pilot.press("shift+tab")  # the next mode
        await until(pilot, lambda: app.status_bar.state.get("mode") != before, what="the mode changed")
        mode = app.status_bar.state.get("mode")
        await until(pilot, lambda: f"Mode: {mode} ✓" in [row.title for row in palette.rows], what="the new mode marked")

        (roder_home / "commands").mkdir()
        (roder_home / "commands" / "fresh-one.md").write_text("---\ndescription: a command added while running\n---\nDo it.\n")
        app.client.dispatcher.broadcast(PluginsChanged(plugins=["a-plugin"]))  # type: ignore[union-attr]
        await until(
            pilot, lambda: any("fresh-one" in row.title for row in palette.rows), what="the new command listed, palette closed"
        )
        await until(pilot, lambda: _rows_idle(app), what="the reload done")

        app.action_command_palette()  # the rows listed by the open itself, before any refresh after it
        titles = [row.title for row in palette.shown]
        assert f"Mode: {mode} ✓" in titles and any("fresh-one" in t for t in titles)


async def test_ctrl_p_and_f1_before_the_panels_are_built(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The panels are built once the app is idle; a key pressed before that (the runtime still
    starting) builds and opens them on the spot, and the palette's rows arrive when the runtime
    is ready."""
    import asyncio

    app = make_app(workspace, None, monkeypatch)
    start_client = app._client_factory
    assert start_client is not None
    runtime_may_start = asyncio.Event()

    async def held_start() -> object:
        await runtime_may_start.wait()
        return start_client()

    app._client_factory = held_start
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.panels is None and not app.ready.is_set()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.panels is not None and app.panels[0].is_open, what="the palette built and open")
        palette = app.panels[0]  # type: ignore[index]
        assert app.screen.key_owner is palette and palette.rows == []
        runtime_may_start.set()
        await until(pilot, lambda: palette_searched(app), what="the rows, once the runtime is ready")
        assert "New thread" in [row.title for row in palette.shown]
        await pilot.press("escape")
        await until(pilot, lambda: not palette.is_open, what="the palette closed")
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")


async def test_help_scrolls_with_its_keys_and_shows_where_it_is(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Help is one widget drawing the key table from a scroll position of its own, with a thumb
    in its last column that follows it."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        help_panel = app.panels[1]  # type: ignore[index]
        width, height = help_panel.size
        lines = help_panel.lines(width - 2)
        assert len(lines) > height  # at 120x40 the table scrolls

        def rows() -> list[Strip]:  # the content rows as drawn now
            help_panel.render_lines(Region(0, 0, *help_panel.outer_size))
            return [help_panel.render_line(y) for y in range(height)]

        def thumb_column() -> list[Strip]:
            return [row.crop(width - 1, width) for row in rows()]

        at_top = thumb_column()
        assert rows()[0].text.startswith("Anywhere")
        assert at_top[0] != at_top[-1]  # the thumb at the top, the track at the bottom
        await pilot.press("end")
        assert help_panel.top == len(lines) - height
        assert any("Palette (ctrl+p)" in row.text for row in rows())
        at_end = thumb_column()
        assert at_end[-1] == at_top[0] and at_end[0] == at_top[-1]  # the thumb went down
        await pilot.press("home")
        assert help_panel.top == 0
        await pilot.press("down", "down", "up")
        assert help_panel.top == 1
        await pilot.press("pagedown")  # a page keeps one row of the last in view
        assert help_panel.top == min(height, len(lines) - height)
        await pilot.press("escape", "f1")
        await until(pilot, lambda: help_shown(app), what="help again")
        assert help_panel.top == 0  # each open starts at the top


async def test_a_panel_redraws_its_region_only_and_draws_what_textual_would(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening and closing a panel updates its own region, not the whole screen (the panels come
    first among the screen's children, so showing one renumbers no other widget); and the main
    screen's compositor, which does not render or cut what a panel covers, draws the same picture
    as Textual's, for the whole screen and for an update of the panel's region."""
    from functools import partial

    from textual._compositor import Compositor

    app = make_app(workspace, [{"text": "an answer\n" * 30}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        await until(pilot, lambda: _rows_idle(app), what="the panels built")
        compositor = app.screen._compositor
        screen = app.screen.region
        drawn: list[Region] = []  # the area of each update
        draw = compositor._render_chops

        def recorded(crop: Region, is_rendered_line: object) -> object:
            drawn.append(crop)
            return draw(crop, is_rendered_line)  # type: ignore[arg-type]

        monkeypatch.setattr(compositor, "_render_chops", recorded)
        textual_renders = partial(Compositor._get_renders, compositor)
        for key, is_open, panel in (("ctrl+p", palette_searched, app.panels[0]), ("f1", help_shown, app.panels[1])):  # type: ignore[index]
            drawn.clear()
            await pilot.press(key)
            await until(pilot, lambda shown=is_open: shown(app), what=f"the panel of {key}")
            await pilot.pause()
            shown_at = panel.region
            region = shown_at.union(app.prompt_bar.input.region)  # what the open changed
            assert any(crop.contains_region(shown_at) for crop in drawn)
            assert screen not in drawn, drawn  # (another widget may update meanwhile: a sidebar age)
            # The panel's rows are cut at its own edges only: a widget it half covers (the
            # transcript, the sidebar) is drawn beside it, its edges under the panel left out.
            inside = [[cut for cut in compositor.cuts[y] if shown_at.x <= cut <= shown_at.right] for y in shown_at.line_range]
            assert inside == [[shown_at.x, shown_at.right]] * shown_at.height, inside
            ours = [strip.simplify() for strip in compositor.render_strips()]
            our_chops = compositor._render_chops(region, lambda _y: True)
            with monkeypatch.context() as textual:  # Textual's renders and cuts
                textual.setattr(compositor, "_get_renders", textual_renders)
                textual.setattr(PanelCompositor, "cuts", Compositor.cuts)
                compositor._cuts = None
                assert [strip.simplify() for strip in compositor.render_strips()] == ours
                their_chops = compositor._render_chops(region, lambda _y: True)
            compositor._cuts = None
            for y in region.line_range:  # the update's rows as drawn, however they were cut
                assert _row_within(our_chops[y], region) == _row_within(their_chops[y], region)
            drawn.clear()
            await pilot.press("escape")
            await until(pilot, lambda p=panel: not p.is_open, what="the panel closed")
            await pilot.pause()
            assert any(crop.contains_region(shown_at) for crop in drawn) and screen not in drawn, drawn


async def test_the_palette_takes_the_keys_while_the_prompt_keeps_the_focus(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open, the palette gets every key it uses (typing, editing, the list's keys, a paste, enter)
    and the prompt none of them: its draft, its cursor and its history stay as they were, and it
    has the focus throughout. Esc gives the keys back to the prompt."""
    from textual import events

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        await pilot.press(*"a draft")
        await open_palette(pilot, "Mode: plxn")
        palette = app.panels[0]  # type: ignore[index]
        assert app.focused is prompt and prompt.text == "a draft"
        assert palette.search == "Mode: plxn"
        await pilot.press("backspace", "backspace", "a", "n")  # edits the search, not the draft
        assert palette.search == "Mode: plan" and palette.shown[0].title == "Mode: plan"
        await pilot.press("left", "left", "left", "left", "ctrl+k")  # the cursor moves in the search
        assert palette.search == "Mode: " and palette.cursor_at == 6
        app.post_message(events.Paste("plan\nmore"))  # a paste goes to the search (its first line)
        await until(pilot, lambda: palette.search == "Mode: plan", what="the paste in the search")
        await pilot.press("down", "up", "down")  # the list's keys move the highlight
        assert palette.highlighted == 1
        await pilot.press("up")
        assert app.focused is prompt and prompt.text == "a draft" and prompt.cursor_location == (0, 7)
        assert palette.is_open and app.screen.key_owner is palette
        await pilot.press("enter")  # runs the highlighted row; the draft is not sent
        await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode")
        assert not palette.is_open and app.screen.key_owner is None
        assert prompt.text == "a draft" and not app.transcript.model.entries
        await pilot.press("!")  # the keys are the prompt's again
        assert prompt.text == "a draft!"
        await open_palette(pilot, "xyz")
        await pilot.press("escape")
        await until(pilot, lambda: not palette.is_open, what="the palette closed by esc")
        assert palette.search == "xyz" and prompt.text == "a draft!"  # esc closed the palette only
        await pilot.press("?")
        assert prompt.text == "a draft!?" and app.focused is prompt


async def test_help_takes_its_keys_while_the_prompt_keeps_the_focus(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Help scrolls with its keys and closes with its own; the letters and arrows typed while it is
    open reach neither the prompt's text nor its history."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        await pilot.press(*"draft")
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        help_panel = app.panels[1]  # type: ignore[index]
        assert app.focused is prompt
        await pilot.press("down", "down", "x", "y", "backspace", "enter", "up")
        assert help_panel.top == 1 and prompt.text == "draft" and help_panel.is_open
        await pilot.press("q")
        await until(pilot, lambda: not help_panel.is_open, what="help closed by q")
        await pilot.press("s")
        assert prompt.text == "drafts" and app.focused is prompt


async def test_a_click_runs_a_row_the_wheel_scrolls_and_a_click_outside_closes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual import events

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await open_palette(pilot, "")
        palette = app.panels[0]  # type: ignore[index]
        assert len(palette.shown) > palette.size.height  # at 40x20 the list scrolls
        await pilot.mouse_down(palette, offset=(5, 5))  # a press inside keeps it open
        assert palette.is_open
        x, y = palette.region.x + 5, palette.region.y + 5
        app.post_message(events.MouseScrollDown(None, x, y, 0, 1, 0, False, False, False, screen_x=x, screen_y=y))
        await until(pilot, lambda: palette.top == 1, what="the list scrolled by the wheel")
        await pilot.click("#transcript")
        await until(pilot, lambda: not palette.is_open, what="closed by a click outside")
        await open_palette(pilot, "Mode: plan")
        row = palette.line_rows().index(0)  # the content line of the first row
        await pilot.click(palette, offset=(4, row + 1))  # below the border's row, right of the padding
        await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode, by a click on its row")
        assert not palette.is_open


async def test_an_open_and_typing_redraw_the_palettes_rows_only(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening the palette updates its own region and nothing else (no focus moved, so the prompt
    is not redrawn); typing that lists the same rows redraws the search line only, and moving the
    highlight the two rows' lines."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await until(pilot, lambda: _rows_idle(app) and bool(app.panels[0].rows), what="the palette built, its rows loaded")  # type: ignore[index]
        palette = app.panels[0]  # type: ignore[index]
        compositor = app.screen._compositor
        drawn: list[Region] = []
        draw = compositor._render_chops

        def recorded(crop: Region, is_rendered_line: object) -> object:
            drawn.append(crop)
            return draw(crop, is_rendered_line)  # type: ignore[arg-type]

        monkeypatch.setattr(compositor, "_render_chops", recorded)
        sidebar = app.sidebar.region

        def outside(region: Region) -> list[Region]:  # updates beyond ``region`` (the sidebar's ages tick)
            return [crop for crop in drawn if not region.contains_region(crop) and not sidebar.contains_region(crop)]

        await pilot.press("ctrl+p")
        await until(pilot, lambda: palette_searched(app), what="the palette")
        await pilot.pause()
        assert drawn and not outside(palette.region), drawn
        search_line = Region(palette.content_region.x, palette.content_region.y, palette.content_region.width, 1)
        await pilot.press("M")
        await pilot.pause()
        drawn.clear()
        await pilot.press("left", "right", "space")  # the same rows listed
        await pilot.pause()
        assert drawn and not outside(search_line), drawn
        drawn.clear()
        await pilot.press("down")
        await pilot.pause()
        lines = {y for y, row in enumerate(palette.line_rows()) if row in (0, 1)}
        rows = Region(palette.content_region.x, palette.content_region.y + min(lines), palette.content_region.width, len(lines))
        assert drawn and not outside(rows), drawn


async def test_the_terminal_losing_focus_leaves_the_palette_open(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching to another window and back (the terminal reports focus out and in, and Textual
    drops the focus and puts it back) leaves the palette open with its search; moving the focus
    inside the app closes it."""
    from textual import events

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await open_palette(pilot, "Mode")
        palette = app.panels[0]  # type: ignore[index]
        app.post_message(events.AppBlur())
        await until(pilot, lambda: not app.app_focus, what="the terminal's focus out")
        app.post_message(events.AppFocus())
        await until(pilot, lambda: app.app_focus and app.focused is app.prompt_bar.input, what="the focus back")
        assert palette.is_open and palette.search == "Mode"
        await pilot.press("ctrl+t")  # the app moves the focus to the transcript: the palette closes
        await until(pilot, lambda: not palette.is_open, what="closed by the focus moving")


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
async def test_a_panel_drawn_ahead_is_what_textual_draws_when_it_shows(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The palette and help are drawn while the app is idle, for the size and view their next
    open shows: that open uses the drawing, and it is what Textual draws for the shown panel."""
    from textual.widget import Widget

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await until(pilot, lambda: _rows_idle(app) and bool(app.panels[0].rows), what="the palette built, its rows loaded")  # type: ignore[index]
        for key, panel in (("ctrl+p", app.panels[0]), ("f1", app.panels[1])):  # type: ignore[index]
            placed = panel.placed_size(app.screen.size)
            ahead = panel._render_key(placed.region, placed)
            await until(pilot, lambda p=panel, k=ahead: k in p._renders, what=f"{panel.id} drawn ahead")
            drawn = panel._renders[ahead]
            await pilot.press(key)
            await until(pilot, lambda p=panel: p.is_open, what=f"{panel.id} open")
            await pilot.pause()
            assert panel.region.size == placed
            crop = placed.region
            assert panel.render_lines(crop) is drawn  # the open showed the drawing made ahead
            panel._styles_cache.clear()
            panel._content = panel.content_lines(*panel.size)
            fresh = Widget.render_lines(panel, crop)  # as Textual draws the shown panel
            assert [strip.simplify() for strip in drawn] == [strip.simplify() for strip in fresh]
            await pilot.press("escape")
            await until(pilot, lambda p=panel: not p.is_open, what=f"{panel.id} closed")


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
async def test_toasts_never_cover_an_open_panel(workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    """A toast shown while the palette is open goes in the rows it leaves free (below it, above
    the status bar); over help, which leaves no row for one, it shows where it always does (a
    toast hidden until help closes expired unseen when help stayed open past its timeout: an
    error nobody saw); closed, toasts are back at the top."""

    def toasts() -> list[Region]:
        return _toasts_drawn(app)

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot)
        await open_palette(pilot, "")
        palette = app.panels[0]  # type: ignore[index]
        app.notify("a notice over the palette", title="notice", timeout=60)
        await until(pilot, lambda: bool(toasts()), what="the toast shown")
        assert all(not toast.overlaps(palette.region) for toast in toasts()), (toasts(), palette.region)
        assert all(toast.bottom <= size[1] - 1 for toast in toasts())  # clear of the status bar
        await pilot.press("escape", "f1")
        await until(pilot, lambda: help_shown(app), what="help")
        await pilot.pause()
        help_panel = app.panels[1]  # type: ignore[index]
        app.notify("an error while help is open", title="error", severity="error", timeout=60)
        await until(pilot, lambda: len(toasts()) == 2, what="both toasts seen over help")
        await pilot.press("escape")
        await until(pilot, lambda: not help_panel.is_open and bool(toasts()), what="the toast back")
        assert min(toast.y for toast in toasts()) < 5  # at the top again


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
async def test_toasts_never_cover_a_dialog(workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    """A toast shown while a dialog is open (the tasks list here), or one carried onto a dialog
    as it opens, keeps to the rows the dialog leaves free; after it closes, toasts are at the top."""
    from textual.widgets._toast import Toast

    from roder_tui.screens.tasks import TasksScreen

    def toasts() -> list[Region]:
        return _toasts_drawn(app)

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot)
        app.notify("shown before the dialog", title="before", timeout=60)
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the tasks dialog")
        app.notify("shown over the dialog", title="over", timeout=60)
        await pilot.pause()
        await until(pilot, lambda: len(app.screen.query(Toast)) == 2, what="both toasts on the dialog's screen")
        assert toasts()  # shown, in the free rows
        await pilot.pause()
        dialog = Region.from_union([c.region for c in app.screen.children if c.region and c.id != "textual-toastrack"])
        assert all(not toast.overlaps(dialog) for toast in toasts()), (toasts(), dialog)
        await pilot.press("escape")
        await until(
            pilot, lambda: isinstance(app.screen, MainScreen) and len(toasts()) == 2, what="the toasts on the main screen"
        )
        assert min(toast.y for toast in toasts()) < 5
