"""Plan mode refuses writes until the user approves the plan; the task ledger and its
taskLedgerRequired checkpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import roder_ext_plan_mode
import roder_ext_task_ledger

from roder_core.ir import AgentInferenceRequest, Mode, PlanItem, ToolResultItem, UserMessageItem
from roder_core.kernel.services import HookPoint
from roder_core.policy.plan_review import PlanReviewStatus
from roder_core.policy.plan_review_book import PlanReviewError
from roder_core.threads.events import ApprovalRequested
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with

PLAN = "1. add the function\n2. test it"


def plan_runtime(workspace: Path, script: list, interactive: bool = True):
    host = host_for(workspace, trusted=False)
    return runtime_with(host, [roder_ext_plan_mode.create(host)], script, mode="plan", interactive=interactive)


def answer_plans(runtime, answer: Callable[[str], Awaitable[object]]) -> list:
    """Answer every plan review as it opens (``answer(review_id)``); returns the requests seen."""
    seen: list = []
    tasks: set = set()

    def on_event(event) -> None:
        if isinstance(event, ApprovalRequested) and event.request.tool == "exit_plan":
            seen.append(event.request)
            task = asyncio.get_running_loop().create_task(answer(event.request.arguments["reviewId"]))
            tasks.add(task)

    runtime.bus.add_listener(on_event)
    return seen


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
    reviews = answer_plans(runtime, lambda rid: runtime.plan_reviews.approve(rid, Mode.AUTO_EDIT, "looks good"))
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
    assert approved.data["approved"] is True
    assert approved.data["mode"] == "auto-edit"
    assert "looks good" in approved.text
    assert runtime.mode == "auto-edit"
    assert "slept late-write" in by_label  # the write ran only after approval
    review = await runtime.plan_reviews.read(approved.data["reviewId"], None)
    assert review.status is PlanReviewStatus.APPROVED and review.next_mode is Mode.AUTO_EDIT and review.reason == "looks good"


async def test_rejected_plan_stays_in_plan_mode(workspace: Path) -> None:
    runtime = plan_runtime(
        workspace,
        [
            {"tool_calls": [call("exit_plan", plan=PLAN)]},
            {"tool_calls": [call("sleep", seconds=0)]},
            {"text": "ok, revising"},
        ],
    )
    answer_plans(runtime, lambda rid: runtime.plan_reviews.reject(rid, "add tests first"))
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan it")
    rejected, write = items(runtime, thread.id, ToolResultItem)
    assert rejected.data["approved"] is False
    assert "add tests first" in rejected.text
    assert write.is_error
    assert "plan mode" in write.text
    assert runtime.mode == "plan"


async def test_a_plain_approval_answer_approves_into_ask_mode(workspace: Path) -> None:
    """Clients that only know approvals (ACP, older ones) still answer a plan: allow is ask mode."""
    from roder_core.ir import ApprovalDecision

    runtime = plan_runtime(workspace, [{"tool_calls": [call("exit_plan", plan=PLAN)]}, {"text": "go"}])
    runtime.bus.add_listener(
        lambda ev: (
            runtime.resolve_approval(ev.request.approval_id, ApprovalDecision(decision="allow_session"))
            if isinstance(ev, ApprovalRequested)
            else None
        )
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan it")
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.data["approved"] is True and result.data["mode"] == "ask" and runtime.mode == "ask"


async def test_open_comments_go_with_an_approval_of_either_kind(workspace: Path) -> None:
    """A comment not sent back for a rewrite is never dropped by approving: the model gets it
    with the approval, whether the review method or a plain approval answer approved it."""
    from roder_core.ir import ApprovalDecision

    plan_step = {"tool_calls": [call("exit_plan", plan=PLAN)]}
    runtime = plan_runtime(workspace, [plan_step, {"text": "go"}, plan_step, {"text": "go"}])
    answers = iter(["review", "plain"])

    async def review(review_id: str) -> None:
        book = runtime.plan_reviews
        await book.comment(review_id, "name it parse_all", line=1)
        if next(answers) == "review":
            await book.approve(review_id, Mode.ASK, "fine")
        else:
            runtime.resolve_approval(book.get(review_id).approval_id or "", ApprovalDecision(decision="allow_once"))

    answer_plans(runtime, review)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan it")
    await runtime.set_mode(Mode.PLAN)
    await runtime.run_turn(thread.id, "plan it again")
    by_method, plain = items(runtime, thread.id, ToolResultItem)
    for result in (by_method, plain):
        assert result.data["approved"] is True
        assert "name it parse_all" in result.text and "> 1. add the function" in result.text
        assert "follow them while implementing" in result.text
    assert "fine" in by_method.text


async def test_comments_and_a_rewrite_make_the_next_version(workspace: Path) -> None:
    revised = "# Plan\n1. write tests\n2. add the function\n3. test it"
    runtime = plan_runtime(
        workspace,
        [
            {"tool_calls": [call("exit_plan", plan="# Plan\n1. add the function\n2. test it")]},
            {"tool_calls": [call("exit_plan", plan=revised)]},
            {"text": "done"},
        ],
    )
    rounds: list[str] = []

    async def review(review_id: str) -> None:
        book = runtime.plan_reviews
        rounds.append(review_id)
        if len(rounds) == 1:
            with pytest.raises(PlanReviewError, match="outside version 1"):
                await book.comment(review_id, "what?", line=9)
            with pytest.raises(PlanReviewError, match="no section 'Risks'"):
                await book.comment(review_id, "what?", section="Risks")
            await book.comment(review_id, "tests come first", line=2)
            await book.comment(review_id, "whole plan: keep it short", section="plan")
            await book.rewrite(review_id, "and number the steps")
        else:
            await book.approve(review_id, Mode.ASK)

    answer_plans(runtime, review)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "plan it")
    first, second = items(runtime, thread.id, ToolResultItem)
    assert first.data["outcome"] == "rewrite" and "tests come first" in first.text and "> 1. add the function" in first.text
    assert "number the steps" in first.text and "complete revised plan" in first.text
    assert second.data["approved"] is True and rounds[0] == rounds[1], "the rewrite is the same review's next version"
    review = await runtime.plan_reviews.read(rounds[0], None)
    assert [v.text for v in review.versions][1] == revised and review.versions[1].source == "rewrite"
    assert set(review.versions[1].addresses) == {c.comment_id for c in review.comments}
    assert review.comments[1].section == "Plan" and (review.comments[1].line, review.comments[1].end_line) == (1, 3)
    assert review.versions[1].instructions == "and number the steps" and review.unaddressed() == []
    # Saved in the thread: read back from the stored custom state by a fresh book.
    stored = runtime.thread(thread.id).custom["roder.plan-reviews"].data["reviews"]
    assert stored[0]["status"] == "approved" and len(stored[0]["versions"]) == 2


async def test_plan_review_errors_and_headless(workspace: Path) -> None:
    runtime = plan_runtime(workspace, [{"tool_calls": [call("exit_plan", plan=PLAN)]}, {"text": "plan above"}], interactive=False)
    with pytest.raises(PlanReviewError, match="no plan review"):
        await runtime.plan_reviews.approve("plan_nope", Mode.ASK)
    with pytest.raises(PlanReviewError, match="no plan review"):
        runtime.plan_reviews.waiting_on("appr_nope")
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
