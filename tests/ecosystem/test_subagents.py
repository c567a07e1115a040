"""Subagents end to end with the mock engine: a child thread with its own context, restricted
tools and its own policy, its trace streamed to the parent and readable afterwards."""

from __future__ import annotations

import textwrap
from pathlib import Path

import roder_ext_subagents

from roder_core.customization.subagents import child_mode, list_traces, read_trace
from roder_core.ir import ToolCallItem, ToolResultItem
from roder_core.threads.events import ToolOutputDelta
from tests.builders import until
from tests.core.harness import call
from tests.ecosystem.harness import RoutedMockExtension, host_for, items, runtime_with

MARKER = "Your task:"


def task(agent: str, prompt: str = "look around") -> dict:
    return call("task", description="inspect the code", prompt=prompt, subagent_type=agent)


def subagent_runtime(workspace: Path, parent: list, child: list, trusted: bool = False, mode: str = "bypass"):
    host = host_for(workspace, trusted=trusted)
    return runtime_with(host, [roder_ext_subagents.create(host)], mode=mode, engine=RoutedMockExtension(parent, child, MARKER))


async def test_subagent_runs_end_to_end(workspace: Path) -> None:
    runtime = subagent_runtime(
        workspace,
        parent=[{"tool_calls": [task("explore")]}, {"text": "The explorer says: fine."}],
        child=[
            {"tool_calls": [call("peek", x="src"), call("sleep", seconds=0), call("task", description="d", prompt="p")]},
            {"text": "Found one module; writing is not allowed here."},
        ],
    )
    streamed: list[str] = []
    runtime.bus.add_listener(lambda ev: streamed.append(ev.delta) if isinstance(ev, ToolOutputDelta) else None)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "review the project")
    assert turn.status == "completed"
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.name == "task"
    assert not result.is_error
    assert result.text == "Found one module; writing is not allowed here."
    trace = result.data["subagent"]
    child_results = {i["name"]: i for i in trace["items"] if i["type"] == "toolResult"}
    assert child_results["peek"]["text"] == "peeked src"
    assert "plan mode" in child_results["sleep"]["text"]  # explore runs in plan mode
    assert "unknown tool 'task'" in child_results["task"]["text"]  # no recursion
    first_prompt = next(i for i in trace["items"] if i["type"] == "userMessage")["text"]
    assert "read-only exploration subagent" in first_prompt
    assert "look around" in first_prompt
    assert "review the project" not in first_prompt  # its own context, not the parent's
    joined = "".join(streamed)
    assert "subagent explore started" in joined
    assert "→ peek" in joined
    assert "✓ peeked src" in joined
    assert trace["childThreadId"] not in [t.id for t in runtime.open_threads()]  # closed after the run
    [listed] = await list_traces(runtime, thread.id, turn.id)
    assert listed["agent"] == "explore"
    assert listed["status"] == "completed"
    assert listed["traceId"] == trace["traceId"]
    read = await read_trace(runtime, thread.id, trace["traceId"])
    assert [i["type"] for i in read["items"]][:2] == ["userMessage", "toolCall"]


async def test_project_agent_with_restricted_tools(workspace: Path) -> None:
    agents = workspace / ".roder" / "agents"
    agents.mkdir(parents=True)
    (agents / "peeker.md").write_text(
        textwrap.dedent("""\
        ---
        name: peeker
        description: Only peeks.
        tools: Peek
        model: mock/mock-large
        ---
        You only peek.
    """)
    )
    runtime = subagent_runtime(
        workspace,
        trusted=True,
        parent=[{"tool_calls": [task("peeker")]}, {"text": "ok"}],
        child=[{"tool_calls": [call("peek", x="a"), call("sleep", seconds=0)]}, {"text": "peeked"}],
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    [result] = items(runtime, thread.id, ToolResultItem)
    child = {i["name"]: i["text"] for i in result.data["subagent"]["items"] if i["type"] == "toolResult"}
    assert child["peek"] == "peeked a"
    assert "unknown tool 'sleep'" in child["sleep"]
    assert "available: peek" in child["sleep"]
    untrusted = subagent_runtime(workspace, parent=[{"tool_calls": [task("peeker")]}, {"text": "ok"}], child=[])
    thread = await untrusted.start_thread()
    await untrusted.run_turn(thread.id, "go")
    [refused] = items(untrusted, thread.id, ToolResultItem)
    assert refused.is_error  # the enum in the schema lists no such agent, and the tool refuses it too


async def test_interrupting_the_parent_interrupts_the_child(workspace: Path) -> None:
    runtime = subagent_runtime(
        workspace,
        parent=[{"tool_calls": [task("general")]}, {"text": "never"}],
        child=[{"tool_calls": [call("sleep", seconds=30, label="long")]}, {"text": "never"}],
    )
    thread = await runtime.start_thread()
    await runtime.start_turn(thread.id, "go")
    await until(lambda: any(t.parent is not None for t in runtime.open_threads()))
    child = next(t for t in runtime.open_threads() if t.parent is not None)
    running = await list_traces(runtime, thread.id)
    assert running[0]["status"] == "running"
    assert running[0]["childThreadId"] == child.id
    await until(lambda: any(isinstance(i, ToolCallItem) for i in child.items()))  # the child's tool is called
    assert await runtime.interrupt(thread.id)
    assert runtime.thread(thread.id).turns[-1].status == "interrupted"
    assert child.turns[-1].status == "interrupted"


def test_child_mode_is_never_freer_than_the_parent() -> None:
    assert child_mode("plan", "bypass") == "plan"
    assert child_mode("bypass", "plan") == "plan"
    assert child_mode("auto-edit", None) == "auto-edit"
    assert child_mode("ask", "auto-edit") == "ask"
