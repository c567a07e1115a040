"""The workflow screens, driven by keys through the real app, runtime and control plane (mock
engine): the list (f3), a workflow's graph with each step's status, pause / resume / stop,
restarting a step with an instruction, opening a step's thread, approving a draft, planning one
from a goal, and a step's approval request answered in the app; wide and at 40 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList, Static

from roder_core.server.protocol_workflows import WORKFLOWS_CREATE, WorkflowsCreateParams
from roder_tui.screens.approval import ApprovalScreen
from roder_tui.screens.text_prompt import TextPromptScreen
from roder_tui.screens.workflows import WorkflowScreen, WorkflowsScreen
from tests.tui.helpers import make_app, ready, until

FOUR = {
    "name": "four",
    "steps": [
        {"id": "left", "prompt": "Look left."},
        {"id": "right", "prompt": "Look right."},
        {"id": "join", "prompt": "Join them.", "depends_on": ["left", "right"]},
        {"id": "check", "run": "sleep 60", "depends_on": ["join"], "score": ["true"]},
    ],
}


async def create(app: Any, definition: dict[str, Any]) -> str:
    result = await app._client().call(WORKFLOWS_CREATE, WorkflowsCreateParams.model_validate({"workflow": definition}))
    return str(result.workflow.id)


def rows(screen: Any) -> list[str]:
    return [str(o.prompt) for o in screen.query_one(OptionList).options]


def step_status(screen: WorkflowScreen, step_id: str) -> str:
    return str(screen.run_state.state(step_id).status)


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["wide", "narrow"])
async def test_a_workflow_is_approved_paused_resumed_restarted_and_stopped_with_keys(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    app = make_app(workspace, [{"text": "seen it"}], monkeypatch, mode="bypass")
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        workflow_id = await create(app, FOUR)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, WorkflowsScreen), what="the workflows list")
        assert any("four" in row and "draft" in row for row in rows(app.screen))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, WorkflowScreen), what="the workflow screen")
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        shown = rows(screen)
        assert shown[0].startswith("── 1") and "after left, right" in shown[3] and "after join" in shown[5]
        await pilot.press("a")
        # left and right run at once, then join; check's script runs until paused
        await until(pilot, lambda: step_status(screen, "check") == "running", timeout=30, what="the script step")
        assert [step_status(screen, s) for s in ("left", "right", "join")] == ["completed"] * 3
        await pilot.press("p")
        await until(pilot, lambda: screen.run_state.status == "paused", what="paused")
        assert step_status(screen, "check") == "interrupted"
        await pilot.press("r")
        await until(pilot, lambda: step_status(screen, "check") == "running", timeout=30, what="resumed")
        await pilot.press("s")
        await until(pilot, lambda: screen.run_state.status == "stopped", what="stopped")
        title = str(screen.query_one("#workflow-title", Static).render())
        assert "stopped" in title

        # restart "join" with an instruction: it runs again (and so does check, after it)
        await pilot.press("end", "up")  # to check, then past the level heading to join
        assert screen._selected() == "join"
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the instruction prompt")
        await pilot.press(*"be thorough", "enter")
        await until(pilot, lambda: screen.run_state.state("join").attempts == 2, timeout=30, what="join again")
        # check runs again after it; its "sleep 60" is asked about by nobody: the loop guard counts
        # the same call within one turn, and each run of a step is a turn of its own
        await until(pilot, lambda: step_status(screen, "check") == "running", timeout=30, what="check again")
        assert not isinstance(app.screen, ApprovalScreen)
        await pilot.press("s")
        await until(pilot, lambda: screen.run_state.status == "stopped", what="stopped again")

        # enter opens the highlighted step's thread in the app
        join_thread = screen.run_state.state("join").thread_id
        await pilot.press("enter")
        await until(pilot, lambda: app.thread_id == join_thread, what="the step's thread")
        assert not isinstance(app.screen, WorkflowScreen | WorkflowsScreen)
        assert workflow_id in app.workflows_view.runs


async def test_a_step_asks_for_approval_in_the_app_and_a_workflow_is_planned(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned = {"name": "planned", "steps": [{"id": "touch", "run": "touch made-by-workflow"}]}
    app = make_app(workspace, [{"text": json.dumps(planned)}], monkeypatch, mode="ask")
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, WorkflowsScreen), what="the workflows list")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the goal prompt")
        app.screen.query_one(Input).value = "make a file"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, WorkflowScreen), timeout=30, what="the planned workflow")
        screen = app.screen
        assert isinstance(screen, WorkflowScreen) and screen.run_state.status == "draft"
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=30, what="the step's approval")
        await pilot.press("y")
        await until(pilot, lambda: screen.run_state.status == "completed", timeout=30, what="the workflow's end")
        assert (workspace / "made-by-workflow").exists()
        assert screen._selected() == "touch" and app.focused is screen.query_one(OptionList)
        assert app.status_bar.state.get("activity") == "idle"  # nothing waits any more
        await pilot.press("enter")
        await until(pilot, lambda: app.thread_id == screen.run_state.state("touch").thread_id, what="the step's thread")


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["120x40", "40x20"])
def test_workflow_screen_snapshot(
    snap_compare: Any, fixed_workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A draft of four steps: two parallel, a join, a scored script step."""
    app = make_app(fixed_workspace, [{"text": "seen it"}], monkeypatch, mode="bypass")

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await create(app, FOUR)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, WorkflowsScreen), what="the workflows list")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, WorkflowScreen), what="the workflow screen")
        await pilot.press("down", "down")  # from left to join: its detail names what it waits for
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
