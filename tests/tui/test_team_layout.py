"""Agent-team panes at every size, on the mock model: they appear as soon as the team starts
(sidebar shown or not), wrap long lines at their own width and wrap again after a resize, lay
themselves out again on every resize and sidebar toggle down to 40 columns, never show through a
dialog, and the lead's briefing is shown as what it is (not as a prompt the user typed, and not
as the thread's title). Snapshots at 120x40 and 40x20."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from roder_tui.widgets.team_panes import PANE_MIN_WIDTH
from tests.tui.helpers import entries_of, make_app, ready, until

LONG = "BEGIN " + " ".join(f"word{n}" for n in range(60)) + " END"
STEPS = [{"text": LONG, "usage": {"input_tokens": 100, "output_tokens": 20}}] + [
    {"text": "Noted.", "usage": {"input_tokens": 100, "output_tokens": 5}} for _ in range(4)
]


async def slash(pilot: Any, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("escape", "enter")  # close the completion list, then send


async def start_team(pilot: Any) -> Any:
    """A team of two whose members each answered one message, one after the other (a steady
    transcript: the lead's turns come in a fixed order)."""
    app = pilot.app
    await ready(pilot)
    await slash(pilot, "/team start alice,bob")
    await until(pilot, lambda: app.team_panes.team is not None and len(app.team_panes.panes()) == 2, what="the panes")
    for turns, name in ((2, "alice"), (3, "bob")):
        await until(pilot, lambda t=turns: app.turn_id is None and len(entries_of(app, "assistant")) >= t - 1, what="the lead")
        await slash(pilot, f"/team msg {name} do your part")
        await until(pilot, lambda n=name: any("END" in e for e in app.team_panes.pane(n).entries), what=f"{name}'s answer")
        await until(
            pilot,
            lambda t=turns: app.turn_id is None and len([e for e in entries_of(app, "assistant") if not e.live]) >= t,
            what=f"the lead's answer to {name}'s report",
        )
    return app


def shown_lines(pane: Any) -> list[str]:
    return [strip.text for strip in pane.log_view.lines]


def assert_readable(app: Any) -> None:
    """Every member pane is on screen, at least PANE_MIN_WIDTH wide (or the whole work area when
    that is narrower), and its lines wrap inside it: the long answer is there, word for word."""
    work = app.work.size.width
    for pane in app.team_panes.panes():
        assert pane.display and pane.region.width > 0 and pane.region.height >= 3, pane.member.name
        assert pane.region.width >= min(PANE_MIN_WIDTH, work), (pane.member.name, pane.region.width, work)
        assert pane.region.right <= app.size.width
        inner = pane.log_view.scrollable_content_region.width
        lines = shown_lines(pane)
        assert all(len(line.rstrip()) <= inner for line in lines), (pane.member.name, inner)
        assert "word59 END" in " ".join(" ".join(lines).split())


@pytest.mark.timeout(240)
async def test_panes_appear_wrap_and_follow_every_resize_and_sidebar_toggle(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roder_tui.screens.tasks import TasksScreen

    app = make_app(workspace, STEPS, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await start_team(pilot)
        # 120 columns with the sidebar: the panes are there without ctrl+o, beside the lead.
        assert app.sidebar.display and app.transcript.display and app.team_panes.focused is None
        assert_readable(app)

        await pilot.press("ctrl+b")  # sidebar hidden: more room, laid out again
        await until(pilot, lambda: not app.sidebar.display and app.work.size.width == 120, what="the sidebar hidden")
        await pilot.pause()
        assert app.team_panes.arrangement == "side" and app.transcript.display
        assert_readable(app)
        await pilot.press("ctrl+b")  # shown again: never squeezed below the minimum
        await until(pilot, lambda: app.sidebar.display and app.work.size.width < 120, what="the sidebar shown")
        await pilot.pause()
        assert_readable(app)

        for size in ((80, 24), (50, 24), (40, 20), (120, 40)):
            await pilot.resize_terminal(*size)
            await until(pilot, lambda s=size: app.size == s, what=f"the resize to {size}")
            await pilot.pause()
            assert app.transcript.display, size
            assert_readable(app)

        # ctrl+o: the focused member fills the work area where the panes do not fit side by side.
        await pilot.resize_terminal(40, 20)
        await until(pilot, lambda: app.size == (40, 20), what="the resize")
        await pilot.press("ctrl+o")
        await until(pilot, lambda: app.team_panes.focused == "alice", what="alice focused")
        await pilot.pause()
        assert not app.transcript.display and [p.member.name for p in app.team_panes.panes() if p.display] == ["alice"]
        assert app.team_panes.pane("alice").region.width == 40
        await pilot.press("ctrl+o", "ctrl+o")
        await until(pilot, lambda: app.team_panes.focused is None, what="back to the lead")
        await pilot.pause()
        assert app.transcript.display and all(p.display for p in app.team_panes.panes())

        # A dialog: no pane shows through it.
        await pilot.resize_terminal(120, 40)
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the tasks dialog")
        assert not any(p.visible for p in [app.team_panes])
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TasksScreen), what="the tasks dialog closed")
        assert app.team_panes.visible


async def test_the_leads_briefing_is_shown_as_what_it_is(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_core.server.protocol import THREAD_READ, ThreadReadParams

    app = make_app(workspace, STEPS, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await slash(pilot, "/team start alice,bob")
        await until(pilot, lambda: len(entries_of(app, "assistant")) >= 1 and app.turn_id is None, what="the lead's turn")
        assert entries_of(app, "user") == [], "the briefing is no prompt of the user's"
        [notice] = [e for e in entries_of(app, "notice") if e.items[0].type == "userMessage"]
        assert notice.items[0].sender == 'team "team"'
        shown = "\n".join(part.plain for part in notice.widget._render_item().renderables)
        assert shown.startswith('◆ from team "team"') and "not typed by you" in shown
        thread = (await app.client.call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id))).thread
        assert thread.title == 'team "team"'
        # The rewind list offers the user's own prompts only.
        from roder_tui import rewind

        assert await rewind.rewind_points(app.client, app.thread_id) == []


SNAP_SIZES = [(120, 40), (40, 20)]


@pytest.mark.parametrize("size", SNAP_SIZES, ids=["120x40", "40x20"])
def test_team_panes_snapshot(snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: Any) -> None:
    from tests.tui.test_snapshots import _settle

    # The envelope's id is random per message: pinned, so two runs draw the same screen.
    monkeypatch.setattr("roder_core.teams.framing.secrets", types.SimpleNamespace(token_hex=lambda _n: "5eed5eed5eed"))
    app = make_app(fixed_workspace, STEPS, monkeypatch)

    async def run_before(pilot: Any) -> None:
        await start_team(pilot)
        await _settle(app)
        for pane in app.team_panes.panes():
            pane.log_view.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_status_marks_name_every_status_by_its_wire_value() -> None:
    """The panes and the sidebar key their marks by the statuses' strings (the IR loads after
    the first frame): every member status has a mark, and every thread status but idle."""
    from roder_core.ir import ThreadStatus
    from roder_core.teams.model import MemberStatus
    from roder_tui.widgets.sidebar import STATUS_MARK
    from roder_tui.widgets.team_status import STATUS_MARKS

    assert set(STATUS_MARKS) == {status.value for status in MemberStatus}
    assert set(STATUS_MARK) == {status.value for status in ThreadStatus} - {ThreadStatus.IDLE.value}
