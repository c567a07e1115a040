"""Agent teams in the app, keyboard only, against the loopback model server: a team of three
started with /team, its members side by side when the terminal is wide, stacked under the lead
when it is narrow and one at a time with ctrl+o, a member's approval answered in the app under the member's name, the lead
collecting the results, and every team method reachable from the app (the pane methods
implemented by the app itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roder_core.server.errors import RpcError
from roder_core.testing.fake_server import FakeModelServer
from tests.teams.scenario import MEMBER, MODEL, SUMMARY, me, team_steps, write_config
from tests.tui.helpers import entries_of, make_app, ready, until


async def slash(pilot: Any, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("escape", "enter")  # close the completion list, then send


def pane_text(app: Any, name: str) -> str:
    pane = app.team_panes.pane(name)
    return "\n".join(pane.entries) if pane is not None else ""


def answers(app: Any) -> list[str]:
    return [e.copy_text() for e in entries_of(app, "assistant")]


@pytest.mark.timeout(400)
async def test_a_team_of_three_in_the_app(workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.approval import ApprovalScreen

    ping = {"when": [me("alice"), "[Team message from user to alice", "> ping"], "text": "PONG"}
    async with FakeModelServer([ping, *team_steps()], models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        app = make_app(workspace, None, monkeypatch, provider="local", model=MODEL)
        async with app.run_test(size=(200, 40)) as pilot:
            await ready(pilot)
            await slash(pilot, "/team start alice,bob,carol Do your part of the work.")
            await until(
                pilot, lambda: app.team_panes.team is not None and len(app.team_panes.panes()) == 3, what="the team panes"
            )
            team = app.team_panes.team
            assert [m.name for m in team.members] == ["alice", "bob", "carol"]

            # carol's command needs the user's approval, which names her.
            await until(
                pilot,
                lambda: isinstance(app.screen, ApprovalScreen) and app.screen.query("#approval-title"),
                timeout=150,
                what="carol's approval",
            )
            title = str(app.screen.query_one("#approval-title").render())
            assert title.startswith("carol asks: Allow bash?")
            await pilot.press("y")

            # The lead collects the three results.
            await until(pilot, lambda: SUMMARY in answers(app), timeout=150, what="the lead's summary")
            await until(pilot, lambda: "ALICE-RESULT" in pane_text(app, "alice"), what="alice's result in her pane")
            assert "team_message" in pane_text(app, "alice") and "MAGIC=42" in pane_text(app, "bob")
            assert "carol-was-here" in pane_text(app, "carol")

            # Wide: the lead's transcript and every member side by side.
            assert app.transcript.display and all(p.display for p in app.team_panes.panes())
            assert len({p.region.x for p in app.team_panes.panes()}) == 3
            bar = str(app.team_bar.render())
            assert bar.startswith("team team") and "$" in bar and "alice" in bar
            carol = app.team_panes.pane("carol")
            assert "$" in str(carol.border_subtitle) and "tok" in str(carol.border_subtitle)

            # Narrow: the members stacked under the lead; ctrl+o gives one member the whole work
            # area, and the prompt goes to the focused member.
            await pilot.resize_terminal(60, 30)
            await pilot.pause()
            assert app.transcript.display and app.team_panes.display and app.team_panes.arrangement == "stack"
            await pilot.press("ctrl+o")
            await until(pilot, lambda: app.team_panes.focused == "alice", what="alice's pane")
            assert not app.transcript.display and [p.member.name for p in app.team_panes.panes() if p.display] == ["alice"]
            assert "prompt to alice" in str(app.team_bar.render())
            await pilot.press(*"ping", "enter")
            await until(pilot, lambda: "PONG" in pane_text(app, "alice"), timeout=150, what="alice's answer to the prompt")
            await pilot.press("ctrl+o")
            await until(pilot, lambda: app.team_panes.focused == "bob", what="bob's pane")
            assert [p.member.name for p in app.team_panes.panes() if p.display] == ["bob"]
            await pilot.press("ctrl+o", "ctrl+o")
            await until(pilot, lambda: app.team_panes.focused is None, what="back to the lead")
            assert app.transcript.display
    assert server.calls


@pytest.mark.timeout(400)
async def test_every_team_method_from_the_app(workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.info import InfoScreen

    steps = [
        {"when": [me("dave"), "a long story"], "text": "Once upon a time " * 400, "chunk_size": 4, "delay_ms": 25},
        {"when": [me("erin"), "hello erin"], "text": "HI-FROM-ERIN"},
        *({"when": ["[Team "], "unless": [MEMBER], "text": "Noted."} for _ in range(10)),
        *({"when": [MEMBER], "text": "ready"} for _ in range(10)),
    ]
    async with FakeModelServer(steps, models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        app = make_app(workspace, None, monkeypatch, provider="local", model=MODEL)
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot)
            await slash(pilot, "/team start dave=explore stand by")
            await until(pilot, lambda: app.team_panes.team is not None, what="the team")
            team_id = app.team_panes.team.team_id
            assert app.team_panes.team.members[0].agent == "explore"

            await slash(pilot, "/team add erin")  # team/member/start
            await until(pilot, lambda: app.team_panes.pane("erin") is not None, what="erin's pane")
            await slash(pilot, "/team msg erin hello erin")  # team/member/message
            await until(pilot, lambda: "HI-FROM-ERIN" in pane_text(app, "erin"), timeout=150, what="erin's answer")

            await until(pilot, lambda: app.team_panes.team.member("dave").status == "idle", timeout=150, what="dave's first turn")
            await slash(pilot, "/team msg dave tell a long story")
            runtime = app.client.runtime
            dave = app.team_panes.team.member("dave")
            await until(pilot, lambda: runtime.active_turn_id(dave.thread_id) is not None, what="dave's story")
            await slash(pilot, "/team stop dave")  # team/member/interrupt
            await until(
                pilot, lambda: app.team_panes.team.member("dave").status == "interrupted", timeout=150, what="dave stopped"
            )

            await slash(pilot, "/team focus erin")  # team/pane/focus (the app) and team/member/focus (the server)
            await until(pilot, lambda: app.team_panes.focused == "erin", what="erin focused")
            assert runtime.teams.read(team_id).focused == "erin"
            assert app.team_panes.pane("erin").has_class("-focused")

            await slash(pilot, "/team")  # team/read
            await until(pilot, lambda: isinstance(app.screen, InfoScreen), what="the team")
            text = str(app.screen.query_one("Static").render())
            assert "dave (explore): interrupted, plan mode" in text and "erin: " in text and "$" in text
            await pilot.press("escape")
            await slash(pilot, "/team list")  # team/list
            await until(pilot, lambda: isinstance(app.screen, InfoScreen), what="the list")
            assert team_id in str(app.screen.query_one("Static").render())
            await pilot.press("escape")

            # The pane methods are the app's own: through its client they reach the app, not the server.
            result = await app.client.request("team/pane/focus", {"teamId": team_id, "name": "dave"})
            assert result.team.focused == "dave" and app.team_panes.focused == "dave"
            with pytest.raises(RpcError, match="no pane"):
                await app.client.request("team/pane/focus", {"teamId": team_id, "name": "nobody"})
            await slash(pilot, "/team hide")  # team/pane/cleanup: the panes close, the team keeps running
            await until(pilot, lambda: app.team_panes.team is None, what="the panes closed")
            assert not app.team_bar.display and runtime.teams.read(team_id).status == "active"

            await app.teams.show_team_of(app.thread_id)  # the panes come back with the thread
            await until(pilot, lambda: app.team_panes.team is not None, what="the panes again")
            await slash(pilot, "/team cleanup")  # team/cleanup, then team/pane/cleanup
            await until(pilot, lambda: app.team_panes.team is None, what="the team cleaned up")
            assert runtime.teams.read(team_id).status == "cleanedUp"
