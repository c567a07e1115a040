"""The turn loop through a real Runtime: tools, parallelism, mutation queue, steer, interrupt,
hooks that fail closed, approvals, iteration limit."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from roder_core import HookOutcome, HookPoint
from roder_core.ir import (
    AgentMessageItem,
    ApprovalDecision,
    ErrorItem,
    ToolCallItem,
    ToolResultItem,
    UserMessageItem,
)
from roder_core.settings.config import RoderConfig
from roder_core.threads.events import AgentMessageDelta, ApprovalRequested, ItemCompleted
from tests.core.harness import ReadTool, SleepTool, call, first_event, make_runtime


def items_of(runtime: Any, thread_id: str, kind: type) -> list[Any]:
    return [i for i in runtime.thread(thread_id).items() if isinstance(i, kind)]


async def test_answer_without_tools_streams_and_completes(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"text": "Hello there, friend.", "chunk_size": 5}])
    thread = await runtime.start_thread()
    deltas: list[str] = []
    runtime.bus.add_listener(lambda ev: deltas.append(ev.delta) if isinstance(ev, AgentMessageDelta) else None)
    turn = await runtime.run_turn(thread.id, "hi")
    assert turn.status == "completed"
    assert deltas == ["Hello", " ther", "e, fr", "iend."]
    assert [i.text for i in items_of(runtime, thread.id, AgentMessageItem)] == ["Hello there, friend."]
    assert runtime.thread(thread.id).title == "hi"
    assert turn.model_calls == 1


async def test_tool_call_result_goes_back_to_model(workspace: Path) -> None:
    runtime = make_runtime(
        workspace,
        [
            {"text": "Looking.", "tool_calls": [call("peek", x="a")]},
            {"text": "Done."},
        ],
    )
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "completed"
    assert turn.model_calls == 2
    results = items_of(runtime, thread.id, ToolResultItem)
    assert [r.text for r in results] == ["peeked a"]
    assert items_of(runtime, thread.id, ToolCallItem)[0].call_id == results[0].call_id


async def test_independent_calls_run_in_parallel(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [
            # Each call waits until all three run at once: run one after another, they would fail.
            {"tool_calls": [call("sleep", seconds=0, meet=3, label=str(i), path=f"f{i}") for i in range(3)]},
            {"text": "ok"},
        ],
        tools=[sleep],
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    results = items_of(runtime, thread.id, ToolResultItem)
    assert len(sleep.spans) == 3, "three independent calls should run at the same time"
    assert [r.is_error for r in results] == [False, False, False]


async def test_mutations_of_one_path_are_serialized(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [
            {
                "tool_calls": [call("sleep", seconds=0, hold=True, label=str(i), path="same.txt") for i in range(3)]
                + [call("sleep", seconds=0, hold=True, label="other", path="other.txt")]
            },
            {"text": "ok"},
        ],
        tools=[sleep],
    )
    thread = await runtime.start_thread()
    await runtime.start_turn(thread.id, "go")
    # Two calls run (and hold): one of the same path, and the other path's, which does not wait
    # for the queue. The other two of the same path wait for the first.
    await sleep.wait_started(2)
    assert "other" in sleep.started
    assert sleep.running == 2
    sleep.release()
    await runtime.wait_turn(thread.id)
    assert sorted(sleep.started) == ["0", "1", "2", "other"]
    same = sorted((s, e) for label, s, e in sleep.spans if label != "other")
    assert all(prev_end <= next_start for (_, prev_end), (next_start, _) in itertools.pairwise(same))


async def test_interrupt_cancels_stream_and_running_tools(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(workspace, [{"tool_calls": [call("sleep", seconds=30, label="long")]}], tools=[sleep])
    thread = await runtime.start_thread()
    await runtime.start_turn(thread.id, "go")
    await sleep.wait_started(1)
    assert await runtime.interrupt(thread.id)
    turn = runtime.thread(thread.id).turns[-1]
    assert turn.status == "interrupted"
    assert sleep.cancelled == ["long"]
    assert runtime.thread(thread.id).status == "idle"


async def test_interrupt_mid_stream_keeps_partial_answer(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"text": "x" * 400, "chunk_size": 4, "delay_ms": 10}])
    thread = await runtime.start_thread()
    await first_event(runtime, AgentMessageDelta, lambda: runtime.start_turn(thread.id, "go"))
    await runtime.interrupt(thread.id)
    answer = items_of(runtime, thread.id, AgentMessageItem)
    assert runtime.thread(thread.id).turns[-1].status == "interrupted"
    assert answer
    assert 0 < len(answer[0].text) < 400


async def test_steer_is_delivered_at_next_model_call(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [
            {"tool_calls": [call("sleep", seconds=0, hold=True)]},
            {"text": "steered answer"},
        ],
        tools=[sleep],
    )
    thread = await runtime.start_thread()
    turn = await runtime.start_turn(thread.id, "go")
    await sleep.wait_started(1)  # the tool runs (and holds) until the steer is in
    runtime.steer(thread.id, "focus on tests", expected_turn_id=turn.id)
    sleep.release()
    done = await runtime.wait_turn(thread.id)
    assert done.status == "completed"
    users = items_of(runtime, thread.id, UserMessageItem)
    assert [u.text for u in users] == ["go", "focus on tests"]
    assert users[1].steer
    order = [type(i).__name__ for i in runtime.thread(thread.id).items()]
    assert order.index("ToolResultItem") < [i for i, n in enumerate(order) if n == "UserMessageItem"][1]


async def test_steer_after_final_answer_triggers_another_call(workspace: Path) -> None:
    runtime = make_runtime(
        workspace,
        [
            {"text": "first " * 30, "chunk_size": 6, "delay_ms": 5},
            {"text": "second"},
        ],
    )
    thread = await runtime.start_thread()
    await first_event(runtime, AgentMessageDelta, lambda: runtime.start_turn(thread.id, "go"))
    runtime.steer(thread.id, "and also this")
    turn = await runtime.wait_turn(thread.id)
    assert turn.model_calls == 2
    assert items_of(runtime, thread.id, AgentMessageItem)[-1].text == "second"


class ScriptedHook:
    def __init__(self, point: HookPoint, behaviour: str) -> None:
        self.point, self.behaviour = point, behaviour

    def id(self) -> str:
        return f"hook-{self.behaviour}"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({self.point})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        if self.behaviour == "raise":
            raise RuntimeError("hook crashed")
        if self.behaviour == "hang":
            await asyncio.sleep(10)
        if self.behaviour == "block":
            return HookOutcome(block=True, reason="not on my watch")
        if self.behaviour == "rewrite-args":
            return HookOutcome(replace={"arguments": {"x": "rewritten"}})
        if self.behaviour == "rewrite-input":
            return HookOutcome(replace={"text": payload["text"].upper()})
        return None


async def run_with_hook(workspace: Path, hook: ScriptedHook, **kw: Any) -> tuple[Any, Any]:
    runtime = make_runtime(workspace, [{"tool_calls": [call("peek", x="a")]}, {"text": "end"}], hooks=[hook], **kw)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "please")
    return runtime, runtime.thread(thread.id), turn  # type: ignore[return-value]


async def test_tool_hook_that_raises_denies_the_call(workspace: Path) -> None:
    _, thread, turn = await run_with_hook(workspace, ScriptedHook(HookPoint.TOOL_CALL_BEFORE, "raise"))
    result = next(i for i in thread.items() if isinstance(i, ToolResultItem))
    assert result.is_error
    assert "fail closed" in result.text
    assert "hook crashed" in result.text
    assert turn.status == "completed"


async def test_tool_hook_that_times_out_denies_the_call(workspace: Path) -> None:
    _, thread, _ = await run_with_hook(
        workspace, ScriptedHook(HookPoint.TOOL_CALL_BEFORE, "hang"), config=RoderConfig(hook_timeout=0.2)
    )
    result = next(i for i in thread.items() if isinstance(i, ToolResultItem))
    assert result.is_error
    assert "timed out" in result.text


async def test_tool_hook_can_block_and_rewrite(workspace: Path) -> None:
    _, thread, _ = await run_with_hook(workspace, ScriptedHook(HookPoint.TOOL_CALL_BEFORE, "block"))
    assert "not on my watch" in next(i for i in thread.items() if isinstance(i, ToolResultItem)).text
    _, thread, _ = await run_with_hook(workspace, ScriptedHook(HookPoint.TOOL_CALL_BEFORE, "rewrite-args"))
    assert next(i for i in thread.items() if isinstance(i, ToolResultItem)).text == "peeked rewritten"


async def test_before_turn_hook_rewrites_input_and_fails_closed(workspace: Path) -> None:
    _, thread, _ = await run_with_hook(workspace, ScriptedHook(HookPoint.BEFORE_TURN, "rewrite-input"))
    assert next(i for i in thread.items() if isinstance(i, UserMessageItem)).text == "PLEASE"
    _, thread, turn = await run_with_hook(workspace, ScriptedHook(HookPoint.BEFORE_TURN, "raise"))
    assert turn.status == "failed"
    assert turn.error.kind == "hook_denied"
    assert not any(isinstance(i, ToolResultItem) for i in thread.items()), "nothing ran after the denial"


async def test_provider_request_hook_failure_fails_the_turn(workspace: Path) -> None:
    _, thread, turn = await run_with_hook(workspace, ScriptedHook(HookPoint.BEFORE_PROVIDER_REQUEST, "raise"))
    assert turn.status == "failed"
    assert "fail closed" in turn.error.message
    assert isinstance(thread.items()[-1], ErrorItem)


async def test_observer_hook_failure_does_not_stop_the_turn(workspace: Path) -> None:
    _, _, turn = await run_with_hook(workspace, ScriptedHook(HookPoint.TURN_END, "raise"))
    assert turn.status == "completed"


async def test_headless_ask_mode_denies_with_a_clear_reason(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace, [{"tool_calls": [call("sleep", seconds=0)]}, {"text": "ok"}], tools=[sleep], mode="ask", interactive=False
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    result = items_of(runtime, thread.id, ToolResultItem)[0]
    assert result.is_error
    assert "headless" in result.text
    assert "--mode auto-edit" in result.text
    assert sleep.spans == []


async def test_plan_mode_refuses_mutating_tools_but_allows_reads(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [{"tool_calls": [call("sleep", seconds=0), call("peek", x="y")]}, {"text": "ok"}],
        tools=[sleep, ReadTool()],
        mode="plan",
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    texts = sorted(r.text for r in items_of(runtime, thread.id, ToolResultItem))
    assert texts == ["denied by policy: plan mode allows read-only tools only", "peeked y"]


async def approve_with(workspace: Path, decision: str) -> tuple[Any, Any, SleepTool]:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [{"tool_calls": [call("sleep", seconds=0)]}, {"tool_calls": [call("sleep", seconds=0)]}, {"text": "ok"}],
        tools=[sleep],
        mode="ask",
    )
    thread = await runtime.start_thread()
    asked: list[str] = []

    def answer(ev: Any) -> None:
        if isinstance(ev, ApprovalRequested):
            asked.append(ev.request.approval_id)
            runtime.resolve_approval(ev.request.approval_id, ApprovalDecision(decision=decision))  # type: ignore[arg-type]

    runtime.bus.add_listener(answer)
    turn = await runtime.run_turn(thread.id, "go")
    return turn, asked, sleep


async def test_approval_allow_once_asks_every_time(workspace: Path) -> None:
    turn, asked, sleep = await approve_with(workspace, "allow_once")
    assert turn.status == "completed"
    assert len(asked) == 2
    assert len(sleep.spans) == 2


async def test_approval_allow_session_asks_once(workspace: Path) -> None:
    _, asked, sleep = await approve_with(workspace, "allow_session")
    assert len(asked) == 1
    assert len(sleep.spans) == 2


async def test_approval_deny_and_interrupt(workspace: Path) -> None:
    turn, _, sleep = await approve_with(workspace, "deny_interrupt")
    assert turn.status == "interrupted"
    assert sleep.spans == []


async def test_approval_times_out_to_deny(workspace: Path) -> None:
    sleep = SleepTool()
    runtime = make_runtime(
        workspace,
        [{"tool_calls": [call("sleep", seconds=0)]}, {"text": "ok"}],
        tools=[sleep],
        mode="ask",
        config=RoderConfig(approval_timeout=0.1),
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    result = items_of(runtime, thread.id, ToolResultItem)[0]
    assert result.is_error
    assert "approval timed out" in result.text
    assert sleep.spans == []


async def test_max_iterations_stops_the_turn(workspace: Path) -> None:
    # distinct calls: the same call three times in a row would ask (see the policy's repeat floor)
    runtime = make_runtime(workspace, [{"tool_calls": [call("peek", x=str(i))]} for i in range(10)], max_iterations=3)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "loop")
    assert turn.status == "failed"
    assert turn.error.kind == "max_iterations"
    assert turn.model_calls == 3


async def test_engine_error_fails_turn_with_error_item(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"error": {"message": "quota gone", "kind": "rate_limit"}}])
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "failed"
    assert turn.error.kind == "rate_limit"
    assert items_of(runtime, thread.id, ErrorItem)[0].message == "quota gone"


async def test_unknown_tool_and_bad_arguments_answer_the_model(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"tool_calls": [call("nope")]}, {"text": "ok"}])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    assert "unknown tool 'nope'" in items_of(runtime, thread.id, ToolResultItem)[0].text


async def test_events_are_emitted_in_lifecycle_order(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"tool_calls": [call("peek")]}, {"text": "ok"}])
    thread = await runtime.start_thread()
    sub = runtime.bus.subscribe(thread_id=thread.id)
    await runtime.run_turn(thread.id, "go")
    sub.close()
    methods = [ev.method async for ev in sub if ev.persisted]
    assert methods[0] == "turn/started"
    assert methods[-1] in ("turn/completed", "thread/status/changed")
    assert methods.index("turn/started") < methods.index("item/started") < methods.index("turn/completed")
    # user message, tool call, tool result, agent message
    assert methods.count("item/completed") == 4


async def test_item_completed_events_carry_full_items(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"text": "abc"}])
    thread = await runtime.start_thread()
    seen: list[Any] = []
    runtime.bus.add_listener(lambda ev: seen.append(ev.item) if isinstance(ev, ItemCompleted) else None)
    await runtime.run_turn(thread.id, "go")
    assert [type(i).__name__ for i in seen] == ["UserMessageItem", "AgentMessageItem"]
    assert seen[1].text == "abc"
