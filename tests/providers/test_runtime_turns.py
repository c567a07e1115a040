"""Whole turns through the real Runtime: engine + tool loop + re-encoding on the next request."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roder_core.ir import AgentMessageItem, ReasoningItem, Thread, ToolResultItem
from roder_core.providers.extension import ProviderExtension
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.runtime.runtime import Runtime
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads.events import AgentMessageDelta
from tests.builders import build_runtime, until
from tests.core.harness import ReadTool, TestExtension
from tests.providers.helpers import DIALECTS, make_engine

MODELS = {"chat-completions": "gpt-4.1", "responses": "gpt-5", "anthropic-messages": "claude-sonnet-4-6"}


def runtime_for(workspace: Path, dialect: str, base_url: str) -> Runtime:
    engine = ProviderExtension(make_engine(dialect, base_url, reasoning_effort="medium"))
    return build_runtime(
        workspace, engine=engine, extensions=[TestExtension([ReadTool()])], provider="fake", model=MODELS[dialect]
    )


def items(thread: Thread, kind: type) -> list:
    """Items of a live thread object (it stays readable after the runtime closed)."""
    return [item for item in thread.items() if isinstance(item, kind)]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_tool_turn_reencodes_calls_results_and_reasoning(workspace: Path, dialect: str) -> None:
    steps = [
        {
            "reasoning": "Peek at both.",
            "text": "Let me peek.",
            "tool_calls": [{"name": "peek", "arguments": {"x": "a"}}, {"name": "peek", "arguments": {"x": "b"}}],
            "usage": {"input_tokens": 900, "cached_tokens": 512, "output_tokens": 40},
        },
        {"text": "Both peeked.", "usage": {"input_tokens": 1000, "cached_tokens": 896, "output_tokens": 5}},
    ]
    async with FakeModelServer(steps) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "peek at a and b")
        await runtime.close()
    assert turn.status == "completed", turn.error
    assert [i.text for i in items(thread, AgentMessageItem)] == ["Let me peek.", "Both peeked."]
    assert sorted(r.text for r in items(thread, ToolResultItem)) == ["peeked a", "peeked b"]
    assert turn.usage.input_tokens == 1900
    assert turn.usage.cached_input_tokens == 1408
    assert not turn.usage.estimated
    assert turn.usage.cost_usd > 0  # priced from the capability table

    second = server.calls[1].json
    first_calls = {c.call_id for c in items(thread, ToolResultItem)}
    if dialect == "chat-completions":
        _user, assistant, *results = [m for m in second["messages"] if m["role"] != "system"]
        assert assistant["content"] == "Let me peek."
        assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"x":"a"}', '{"x":"b"}']
        assert {r["tool_call_id"]: r["content"] for r in results} == {
            c["id"]: f"peeked {x}" for c, x in zip(assistant["tool_calls"], "ab", strict=True)
        }
    elif dialect == "responses":
        kinds = [item.get("type", item.get("role")) for item in second["input"]]
        assert kinds == [
            "user",
            "reasoning",
            "assistant",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        assert second["input"][1]["encrypted_content"] == "gAAAA-encrypted-1"
        outputs = {i["call_id"]: i["output"] for i in second["input"] if i.get("type") == "function_call_output"}
        assert set(outputs) == first_calls
        assert sorted(outputs.values()) == ["peeked a", "peeked b"]
    else:
        _user, assistant, results = second["messages"]
        assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use", "tool_use"]
        assert assistant["content"][0] == {"type": "thinking", "thinking": "Peek at both.", "signature": "EqQBsig1=="}
        assert results["role"] == "user"
        assert {b["tool_use_id"] for b in results["content"]} == first_calls
        assert sorted(b["content"] for b in results["content"]) == ["peeked a", "peeked b"]
    reasoning = items(thread, ReasoningItem)[0]
    assert (reasoning.summary or reasoning.text) == "Peek at both."


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_restarted_stream_leaves_only_the_new_answer(workspace: Path, dialect: str) -> None:
    steps = [
        {"reasoning": "First idea", "text": "Going with the first idea because", "drop_after": 8},
        {"text": "Second answer."},
    ]
    async with FakeModelServer(steps) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "decide")
        await runtime.close()
    assert turn.status == "completed"
    assert [i.text for i in items(thread, AgentMessageItem) if i.text] == ["Second answer."]
    assert all(not (r.text or r.summary) for r in items(thread, ReasoningItem))


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_interrupt_closes_the_stream(workspace: Path, dialect: str) -> None:
    async with FakeModelServer([{"text": "slow " * 500, "chunk_size": 5, "delay_ms": 20}]) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        streaming = asyncio.Event()
        runtime.bus.add_listener(lambda ev: streaming.set() if isinstance(ev, AgentMessageDelta) else None)
        await runtime.start_turn(thread.id, "talk")
        async with asyncio.timeout(5):
            await streaming.wait()
        assert await runtime.interrupt(thread.id)
        turn = await runtime.wait_turn(thread.id)
        await until(lambda: server.calls[0].disconnected_at is not None)
        await runtime.close()
    assert turn.status == "interrupted"
    assert server.calls[0].disconnected_at is not None
    partial = items(thread, AgentMessageItem)[0].text
    assert partial.startswith("slow")
    assert len(partial) < 2500  # the partial answer is kept


async def test_configured_provider_table_through_bootstrap(workspace: Path, roder_home: Path) -> None:
    async with FakeModelServer([{"text": "hello from local"}], models=("my-model",)) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
        )
        started = start_runtime(
            StartSettings(
                cwd=workspace,
                provider="local",
                interactive=False,
                trust=False,
                env={"RODER_HOME": str(roder_home), "LOCAL_API_KEY": "sk-local-xyz12345"},
            )
        )
        runtime = started.runtime
        assert (runtime.provider, runtime.model, started.fell_back_to_mock) == ("local", "my-model", False)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "hi")
        await runtime.close()
    assert turn.status == "completed"
    assert items(thread, AgentMessageItem)[-1].text == "hello from local"
    assert server.calls[0].headers["authorization"] == "Bearer sk-local-xyz12345"
    assert server.calls[0].json["model"] == "my-model"
