"""Model-facing texts through the real loop: a headless denial tells the model what to do (not
only the human), and exit_plan is offered in plan mode only."""

from __future__ import annotations

from pathlib import Path

import pytest
from roder_ext_plan_mode import PlanModeExtension

from tests.sessions.harness import make_runtime
from tests.tools.harness import call, run_script


async def test_a_headless_denial_is_written_for_the_model(workspace: Path) -> None:
    steps = [{"tool_calls": [call("write", path="new.txt", content="x\n")]}, {"text": "ok"}]
    _rt, [result] = await run_script(workspace, steps, mode="ask")
    assert result.is_error
    assert result.text == (
        "denied: write needs approval (ask mode asks before edit tools) and nobody can approve in this headless "
        "run, so it was not run. Do not retry it or get around it with another tool: do what you can without it, "
        "and tell the user what was left undone and how they can allow it (rerun with --mode auto-edit, or add an "
        "allow rule to [policy])."
    )
    assert not (workspace / "new.txt").exists()


@pytest.mark.parametrize(("mode", "offered"), [("plan", True), ("ask", False), ("auto-edit", False), ("bypass", False)])
async def test_exit_plan_is_offered_in_plan_mode_only(workspace: Path, mode: str, offered: bool) -> None:
    runtime, engine = make_runtime(workspace, [{"text": "ok"}], extensions=[PlanModeExtension()], store=False, mode=mode)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan something")
    await runtime.close()
    [request] = engine.requests
    assert ("exit_plan" in [t.name for t in request.tools]) is offered
