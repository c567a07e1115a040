"""An interrupted turn tells the model so: its next request carries the partial answer, then a
note that the user interrupted it, then the new prompt; live, after a resume, and when the
interrupt came while a tool ran."""

from __future__ import annotations

from pathlib import Path

from roder_core.ir import INTERRUPTED_KIND, AgentInferenceRequest, AgentMessageItem, ErrorItem, TextPart, ToolResultPart
from roder_core.threads.events import AgentMessageDelta
from roder_core.turn.context import INTERRUPTED_NOTE
from tests.core.harness import SleepTool, TestExtension, call, first_event
from tests.sessions.harness import RecordingEngine, make_runtime

LONG = "x" * 400


def shape(request: AgentInferenceRequest) -> list[tuple[str, str]]:
    """Each message's role and its text (a tool result's text), in order."""
    out: list[tuple[str, str]] = []
    for message in request.messages:
        texts = [p.text for p in message.parts if isinstance(p, TextPart | ToolResultPart)]
        out.append((message.role, " | ".join(texts)))
    return out


async def interrupted_then_asked_again(workspace: Path) -> tuple[str, RecordingEngine, str]:
    """A thread whose first turn was cut while its answer streamed; returns the thread id, the
    engine and the partial answer."""
    runtime, engine = make_runtime(
        workspace, [{"text": LONG, "chunk_size": 4, "delay_ms": 10}, {"text": "ok"}, {"text": "ok again"}]
    )
    thread = await runtime.start_thread()
    await first_event(runtime, AgentMessageDelta, lambda: runtime.start_turn(thread.id, "write it"))
    await runtime.interrupt(thread.id)
    turn = runtime.thread(thread.id).turns[-1]
    assert turn.status == "interrupted"
    assert isinstance(turn.items[-1], ErrorItem) and turn.items[-1].kind == INTERRUPTED_KIND
    partial = next(i.text for i in turn.items if isinstance(i, AgentMessageItem))
    assert 0 < len(partial) < len(LONG)
    await runtime.run_turn(thread.id, "go on")
    await runtime.close()
    return thread.id, engine, partial


async def test_the_next_request_says_the_turn_was_interrupted(workspace: Path) -> None:
    _, engine, partial = await interrupted_then_asked_again(workspace)
    assert shape(engine.requests[-1])[-4:] == [
        ("user", "write it"),
        ("assistant", partial),
        ("user", INTERRUPTED_NOTE),
        ("user", "go on"),
    ]


async def test_a_resumed_thread_sends_the_same_note(workspace: Path) -> None:
    tid, engine, _ = await interrupted_then_asked_again(workspace)
    before = shape(engine.requests[-1])
    runtime, resumed = make_runtime(workspace, [{"text": "resumed"}])
    await runtime.resume_thread(tid)
    await runtime.run_turn(tid, "and now?")
    after = shape(resumed.requests[-1])
    assert after[: len(before) + 1] == [*before, ("assistant", "ok")]
    assert after.count(("user", INTERRUPTED_NOTE)) == 1
    await runtime.close()


async def test_an_interrupt_during_a_tool_call_ends_with_its_result_then_the_note(workspace: Path) -> None:
    sleep = SleepTool()
    script = [{"tool_calls": [call("sleep", seconds=30, label="long")]}, {"text": "fine"}]
    runtime, engine = make_runtime(workspace, script, extensions=[TestExtension([sleep])])
    thread = await runtime.start_thread()
    await runtime.start_turn(thread.id, "wait")
    await sleep.wait_started(1)
    await runtime.interrupt(thread.id)
    await runtime.run_turn(thread.id, "what happened?")
    roles = shape(engine.requests[-1])
    assert roles[-4:] == [
        ("assistant", ""),
        ("tool", "interrupted before it finished"),
        ("user", INTERRUPTED_NOTE),
        ("user", "what happened?"),
    ]
    await runtime.close()


async def test_the_markdown_export_says_the_turn_was_interrupted_not_that_it_failed(workspace: Path) -> None:
    from roder_core.threads.transcript import render_markdown

    runtime, _ = make_runtime(workspace, [{"text": LONG, "chunk_size": 4, "delay_ms": 10}])
    thread = await runtime.start_thread()
    await first_event(runtime, AgentMessageDelta, lambda: runtime.start_turn(thread.id, "write it"))
    await runtime.interrupt(thread.id)
    text = render_markdown(runtime.thread(thread.id))
    await runtime.close()
    assert "## Turn 1: interrupted" in text
    assert "*Interrupted by the user*" in text
    assert "**Error**" not in text
