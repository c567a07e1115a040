"""The workflow engine on a real runtime (mock engine, JSONL store): planning with a correction,
a failed score stopping the steps after it and a restart with an instruction, a headless run
refusing a command that needs a person, and a workflow taken up by a second engine after the
first one stopped driving it."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from roder_core.customization.subagents import list_agents
from roder_core.ir import UserMessageItem
from roder_core.runtime.runtime import Runtime
from roder_core.workflows.engine import WorkflowEngine
from roder_core.workflows.journal import WorkflowJournal
from roder_core.workflows.model import StepStatus, WorkflowDefinition, WorkflowError, WorkflowRun, WorkflowSource, WorkflowStatus
from tests.builders import EVENT_TIMEOUT, build_client


def runtime_for(workspace: Path, script: list[dict[str, Any]] | None = None, **settings: Any) -> Runtime:
    """A runtime built as ``roder`` builds it (the developer profile's grants), on the mock engine."""
    if script is not None:
        path = workspace.parent / f"script-{len(list(workspace.parent.glob('script-*')))}.json"
        path.write_text(json.dumps({"steps": script}))
        settings["env"] = {**os.environ, "RODER_MOCK_SCRIPT": str(path)}
    settings.setdefault("mode", "bypass")
    return build_client(workspace, **settings).runtime


def engine_for(runtime: Runtime) -> WorkflowEngine:
    paths = runtime.options.paths
    return WorkflowEngine(runtime, WorkflowJournal(paths.data_dir / "workflows"), lambda cwd: list_agents(cwd, paths, False))


async def finished(engine: WorkflowEngine, workflow_id: str) -> WorkflowRun:
    """The workflow once it stopped changing on its own (completed, failed)."""
    done: asyncio.Future[WorkflowRun] = asyncio.get_running_loop().create_future()

    def listen(run: WorkflowRun, change: str, _step: str | None) -> None:
        if run.id == workflow_id and change in ("completed", "failed") and not done.done():
            done.set_result(run)

    remove = engine.subscribe(listen)
    try:
        async with asyncio.timeout(EVENT_TIMEOUT):
            return await done
    finally:
        remove()


async def stored_prompts(runtime: Runtime, thread_id: str) -> list[str]:
    assert runtime.store is not None
    thread = await runtime.store.load(thread_id)
    return [i.text for i in thread.items() if isinstance(i, UserMessageItem)]


async def test_an_invalid_plan_goes_back_to_the_model_with_the_problem(workspace: Path) -> None:
    plan = {"name": "fixed", "steps": [{"id": "a", "prompt": "x"}]}
    runtime = runtime_for(workspace, [{"text": "steps: a then b"}, {"text": json.dumps(plan)}])
    engine = engine_for(runtime)
    try:
        run = await engine.plan("do a thing", workspace)
        assert run.status is WorkflowStatus.DRAFT and run.definition.name == "fixed"
        assert run.source.kind == "plan" and run.source.goal == "do a thing"
        prompts = await stored_prompts(runtime, run.source.thread_id or "")
        assert "JSON Schema" in prompts[0] and "do a thing" in prompts[0]
        assert prompts[1].startswith("That answer is not a valid workflow: the answer holds no JSON object")
    finally:
        await engine.aclose()
        await runtime.close()


async def test_a_failed_score_stops_later_steps_and_a_restart_with_an_instruction_fixes_it(workspace: Path) -> None:
    runtime = runtime_for(workspace, [{"text": "made it"}, {"text": "made it again"}])
    engine = engine_for(runtime)
    definition = WorkflowDefinition.model_validate(
        {
            "name": "scored",
            "steps": [
                {"id": "make", "prompt": "Make the file.", "score": ["test -f ready && echo 2.5"]},
                {"id": "after", "run": "echo after {step.make}", "depends_on": ["make"]},
            ],
        }
    )
    try:
        run = engine.create(definition, WorkflowSource(kind="client"), workspace)
        await engine.approve(run.id)
        failed = await finished(engine, run.id)
        make = failed.state("make")
        assert failed.status is WorkflowStatus.FAILED and failed.error == "step make failed"
        assert make.status is StepStatus.FAILED and make.error.startswith("score failed: test -f ready")
        assert make.output == "made it" and failed.state("after").status is StepStatus.PENDING

        (workspace / "ready").write_text("")
        await engine.restart_step(run.id, "make", "Check the file exists.")
        done = await finished(engine, run.id)
        make = done.state("make")
        assert done.status is WorkflowStatus.COMPLETED
        assert make.attempts == 2 and make.value == 2.5
        assert done.state("after").output == "after made it again\n"
        prompts = await stored_prompts(runtime, make.thread_id or "")
        assert "Instruction for this run:\nCheck the file exists." in prompts[-2]  # then the scoring turn
        assert prompts[-1] == "Workflow step make: scoring"
    finally:
        await engine.aclose()
        await runtime.close()


async def test_a_headless_run_refuses_a_command_that_needs_a_person(workspace: Path) -> None:
    runtime = runtime_for(workspace, mode="ask", interactive=False)
    engine = engine_for(runtime)
    definition = WorkflowDefinition.model_validate({"name": "h", "steps": [{"id": "touch", "run": "touch made"}]})
    try:
        run = engine.create(definition, WorkflowSource(kind="client"), workspace)
        await engine.approve(run.id)
        done = await finished(engine, run.id)
        assert done.state("touch").status is StepStatus.FAILED
        assert "nobody can approve in this headless run" in done.state("touch").error
        assert not (workspace / "made").exists()
    finally:
        await engine.aclose()
        await runtime.close()


async def test_a_workflow_cut_off_is_taken_up_by_another_engine(workspace: Path) -> None:
    definition = WorkflowDefinition.model_validate(
        {"name": "two", "steps": [{"id": "wait", "run": "sleep 60"}, {"id": "then", "run": "echo done", "depends_on": ["wait"]}]}
    )
    runtime = runtime_for(workspace)
    first = engine_for(runtime)
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def listen(run: WorkflowRun, change: str, step: str | None) -> None:
        if change == "stepStarted" and not started.done():
            started.set_result(run.state("wait").thread_id or "")

    first.subscribe(listen)
    run = first.create(definition, WorkflowSource(kind="client"), workspace)
    await first.approve(run.id)
    async with asyncio.timeout(EVENT_TIMEOUT):
        thread_id = await started
    other = engine_for(runtime)  # another process's view: the lock is held
    assert other.get(run.id).elsewhere and not other.get(run.id).live
    with pytest.raises(WorkflowError, match="another Roder process"):
        await other.resume(run.id)
    await first.aclose()  # the app closes: the workflow stays "running" on disk
    await runtime.close()

    again = runtime_for(workspace)
    second = engine_for(again)
    try:
        cut_off = second.get(run.id)
        assert cut_off.status is WorkflowStatus.RUNNING and not cut_off.live and not cut_off.elsewhere
        assert [r.id for r in second.runs(status=WorkflowStatus.RUNNING)] == [run.id]
        resumed = await second.resume(run.id)
        assert resumed.live and resumed.state("wait").status is StepStatus.INTERRUPTED
        stopped = await second.stop(run.id)
        assert stopped.status is WorkflowStatus.STOPPED and stopped.state("wait").thread_id == thread_id
        assert second.journal.load(run.id).status is WorkflowStatus.STOPPED
    finally:
        await second.aclose()
        await again.close()
