"""Plan mode refuses writes until the user approves the plan; the task ledger and its
taskLedgerRequired checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import roder_ext_plan_mode
import roder_ext_task_ledger

from roder_core.errors import RoderError
from roder_core.ir import AgentInferenceRequest, PlanItem, ToolResultItem, UserMessageItem
from roder_core.kernel.services import HookPoint
from roder_core.policy.plan_review import pending_plans, resolve_plan
from roder_core.threads.events import ApprovalRequested
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with

PLAN = "1. add the function\n2. test it"


def plan_runtime(workspace: Path, script: list, interactive: bool = True):
    host = host_for(workspace, trusted=False)
    return runtime_with(host, [roder_ext_plan_mode.create(host)], script, mode="plan", interactive=interactive)


async def test_plan_mode_refuses_writes_until_the_plan_is_approved(workspace: Path) -> None:
    runtime = plan_runtime(
        workspace,
        [
            {"tool_calls": [call("peek", x="code"), call("sleep", seconds=0, label="early-write")]},
            {"tool_calls": [call("exit_plan", plan=PLAN)]},
            {"tool_calls": [call("sleep", seconds=0, label="late-write")]},
            {"text": "implemented"},
        ],
    )
    reviews: list = []

    def approve(event):
        if isinstance(event, ApprovalRequested) and event.request.tool == "exit_plan":
            reviews.append(event.request)
            assert [r.approval_id for r in pending_plans(runtime, event.thread_id)] == [event.request.approval_id]
            resolve_plan(runtime, event.request.approval_id, True, mode="auto-edit", feedback="looks good")

    runtime.bus.add_listener(approve)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "add a function")
    assert turn.status == "completed"
    results = items(runtime, thread.id, ToolResultItem)
    by_label = {r.text: r for r in results}  # text -> result
    early = next(r for r in results if r.name == "sleep" and r.is_error)
    assert "plan mode allows read-only tools only" in early.text
    assert "peeked code" in by_label
    assert reviews[0].arguments["plan"] == PLAN
    assert [p.text for p in items(runtime, thread.id, PlanItem)] == [PLAN]
    approved = next(r for r in results if r.name == "exit_plan")
    assert approved.data == {"approved": True, "mode": "auto-edit"}
    assert "looks good" in approved.text
    assert runtime.mode == "auto-edit"
    assert "slept late-write" in by_label  # the write ran only after approval


async def test_rejected_plan_stays_in_plan_mode(workspace: Path) -> None:
    runtime = plan_runtime(
        workspace,
        [
            {"tool_calls": [call("exit_plan", plan=PLAN)]},
            {"tool_calls": [call("sleep", seconds=0)]},
            {"text": "ok, revising"},
        ],
    )
    runtime.bus.add_listener(
        lambda ev: (
            resolve_plan(runtime, ev.request.approval_id, False, feedback="add tests first")
            if isinstance(ev, ApprovalRequested)
            else None
        )
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan it")
    rejected, write = items(runtime, thread.id, ToolResultItem)
    assert rejected.data["approved"] is False
    assert "add tests first" in rejected.text
    assert write.is_error
    assert "plan mode" in write.text
    assert runtime.mode == "plan"


async def test_plan_review_errors_and_headless(workspace: Path) -> None:
    runtime = plan_runtime(workspace, [{"tool_calls": [call("exit_plan", plan=PLAN)]}, {"text": "plan above"}], interactive=False)
    with pytest.raises(RoderError, match="no plan review"):
        resolve_plan(runtime, "appr_nope", True)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan")
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.is_error
    assert "headless" in result.text
    assert runtime.mode == "plan"


async def test_plan_instructions_only_in_plan_mode(workspace: Path) -> None:
    hook = roder_ext_plan_mode.PlanModeInstructions()
    request = AgentInferenceRequest(model="m", system="base")
    out = await hook.run(HookPoint.CONTEXT, {"mode": "plan", "request": request})
    assert out is not None
    assert "You are in plan mode" in out.replace["request"].system
    assert await hook.run(HookPoint.CONTEXT, {"mode": "ask", "request": request}) is None


# --------------------------------------------------------------------------- task ledger


def ledger_runtime(workspace: Path, script: list):
    host = host_for(workspace, trusted=False)
    extension = roder_ext_task_ledger.create(host)
    return runtime_with(host, [extension], script), extension


async def test_todo_tool_records_the_ledger(workspace: Path) -> None:
    runtime, _ = ledger_runtime(
        workspace,
        [
            {
                "tool_calls": [
                    call(
                        "todo",
                        todos=[{"content": "write code", "status": "in_progress"}, {"content": "test", "status": "pending"}],
                    )
                ]
            },
            {
                "tool_calls": [
                    call(
                        "todo",
                        todos=[{"content": "write code", "status": "completed"}, {"content": "test", "status": "completed"}],
                    )
                ]
            },
            {"tool_calls": [call("todo", todos=[{"content": "x", "status": "maybe"}])]},
            {"text": "done"},
        ],
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "work")
    first, second, bad = items(runtime, thread.id, ToolResultItem)
    assert "(0/2 completed)" in first.text
    assert "[~] write code" in first.text
    assert "(2/2 completed)" in second.text
    assert not bad.text.startswith("Ledger")
    assert bad.is_error
    [plan] = items(runtime, thread.id, PlanItem)  # one ledger item per turn, updated in place
    assert [(s.text, s.status) for s in plan.steps] == [("write code", "completed"), ("test", "completed")]
    assert roder_ext_task_ledger.ledger_of(runtime.thread(thread.id)) == plan.steps


async def test_task_ledger_required_asks_for_a_checkpoint_once(workspace: Path) -> None:
    runtime, _ = ledger_runtime(
        workspace,
        [
            {"text": "all done"},
            {"tool_calls": [call("todo", todos=[{"content": "answer saved to out.txt", "status": "completed"}])]},
            {"text": "checkpointed"},
        ],
    )
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "solve", task_ledger_required=True)
    assert turn.status == "completed"
    assert turn.model_calls == 3
    reminders = [i.text for i in items(runtime, thread.id, UserMessageItem) if i.steer]
    assert reminders == [roder_ext_task_ledger.CHECKPOINT_REMINDER]
    # without the flag, nobody is reminded
    plain = await runtime.run_turn(thread.id, "again")
    assert plain.model_calls == 1


async def test_required_ledger_instructions_reach_the_system_prompt(workspace: Path) -> None:
    hook = roder_ext_task_ledger.LedgerFinalization(roder_ext_task_ledger.LedgerState())
    request = AgentInferenceRequest(model="m", system="base")
    out = await hook.run(HookPoint.CONTEXT, {"task_ledger_required": True, "request": request})
    assert out is not None
    assert "requires a task ledger" in out.replace["request"].system
    assert await hook.run(HookPoint.CONTEXT, {"task_ledger_required": False, "request": request}) is None
