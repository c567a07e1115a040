"""Recorded stream shapes (tests/providers/fixtures, see its README) through the real engines:
what each decodes to under any chunking, and what the next request sends back."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ReasoningItem, Thread, ToolCallItem, ToolResultItem
from roder_core.providers.extension import ProviderExtension
from roder_core.testing.fake_server import FakeModelServer
from tests.builders import build_runtime
from tests.providers.helpers import calls_of, collect, make_engine, make_request, reasoning_of, text_of

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


async def turn_then_next_request(workspace: Path, raw: str, model: str, **table: Any) -> tuple[Thread, dict[str, Any]]:
    """Run one turn whose first model call streams ``raw``; return the thread and the body of
    the second model call (the one that re-encodes the first answer)."""
    async with FakeModelServer([{"raw": raw, "byte_chunk": random.randint(1, 64)}, {"text": "Done."}]) as server:
        engine = ProviderExtension(make_engine("chat-completions", server.base_url, **table))
        runtime = build_runtime(workspace, engine=engine, provider="fake", model=model)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "go")
        await runtime.close()
    assert turn.status == "completed", turn.error
    assert len(server.calls) == 2
    return thread, server.calls[1].json


def assistant_of(body: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in body["messages"] if m["role"] == "assistant")


async def test_deepseek_reasoning_content_goes_back_with_the_tool_call_turn(workspace: Path) -> None:
    thread, body = await turn_then_next_request(
        workspace, fixture("deepseek_thinking_tool_call.sse"), "deepseek-reasoner", reasoning_replay=True
    )
    assistant = assistant_of(body)
    assert list(assistant) == ["role", "content", "reasoning_content", "tool_calls"]  # DeepSeek's documented order
    assert assistant["reasoning_content"] == "The user wants the weather in Hangzhou; I need the date first."
    assert assistant["tool_calls"][0]["id"] == "call_00_pLrVcFq1"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool"]  # no context providers here
    assert thread.usage.cached_input_tokens >= 1152  # prompt_cache_hit_tokens counted as cache reads


async def test_reasoning_content_is_not_sent_where_the_quirk_is_off(workspace: Path) -> None:
    _thread, body = await turn_then_next_request(workspace, fixture("deepseek_thinking_tool_call.sse"), "my-model")
    assert "reasoning_content" not in assistant_of(body)


async def test_openrouter_reasoning_details_round_trip(workspace: Path) -> None:
    thread, body = await turn_then_next_request(
        workspace, fixture("openrouter_reasoning_details.sse"), "anthropic/claude-sonnet-4.5"
    )
    assistant = assistant_of(body)
    assert assistant["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "List the folder first.",
            "format": "anthropic-claude-v1",
            "index": 0,
            "signature": "EqMBCkYIBxgCKkB3sig==",
        }
    ]
    assert assistant["content"] == "Listing it."
    assert assistant["tool_calls"][0]["function"]["name"] == "bash"
    assert "reasoning_content" not in assistant
    reasoning = "".join(i.text for i in thread.items() if isinstance(i, ReasoningItem))
    assert reasoning == "List the folder first."


async def test_gemini_thought_signature_round_trip(workspace: Path) -> None:
    thread, body = await turn_then_next_request(workspace, fixture("gemini3_thought_signature.sse"), "gemini-3-pro-preview")
    first, second = assistant_of(body)["tool_calls"]
    assert first["extra_content"]["google"]["thought_signature"].startswith("CpcCAdHtim9")
    assert "extra_content" not in second  # Gemini signs only the first of parallel calls
    assert [c.arguments for c in thread.items() if isinstance(c, ToolCallItem)] == [{"location": "Paris"}, {"location": "London"}]


async def test_recorded_length_cut_call_is_not_run(workspace: Path) -> None:
    thread, body = await turn_then_next_request(workspace, fixture("chat_length_truncated_call.sse"), "gpt-4.1")
    (result,) = [i for i in thread.items() if isinstance(i, ToolResultItem)]
    assert result.is_error
    assert "output token limit" in result.text
    tool_message = next(m for m in body["messages"] if m["role"] == "tool")
    assert "output token limit" in tool_message["content"]


@pytest.mark.parametrize("chunk", [1, 7, 4096])
async def test_recorded_anthropic_stream_without_message_stop(chunk: int) -> None:
    async with FakeModelServer([{"raw": fixture("anthropic_no_message_stop.sse"), "byte_chunk": chunk}]) as server:
        engine = make_engine("anthropic-messages", server.base_url)
        events = await collect(engine, make_request(model="claude-sonnet-4-5"))
        await engine.aclose()
    assert text_of(events) == "Hello!"
    assert len(server.calls) == 1
    usage = events[-2].usage  # type: ignore[union-attr]
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (2073, 2048, 15)


@pytest.mark.parametrize(
    "name", ["deepseek_thinking_tool_call.sse", "openrouter_reasoning_details.sse", "gemini3_thought_signature.sse"]
)
async def test_recorded_chat_streams_decode_the_same_under_any_chunking(name: str) -> None:
    results = []
    for chunk in (1, 3, 17, 100_000):
        async with FakeModelServer([{"raw": fixture(name), "byte_chunk": chunk}]) as server:
            engine = make_engine("chat-completions", server.base_url)
            events = await collect(engine, make_request())
            await engine.aclose()
        results.append((text_of(events), reasoning_of(events), [(c.name, c.arguments) for c in calls_of(events)]))
    assert all(result == results[0] for result in results)
    assert results[0][2]


async def test_recorded_responses_call_cut_before_it_finished_is_truncated() -> None:
    async with FakeModelServer([{"raw": fixture("responses_incomplete_call.sse"), "byte_chunk": 9}]) as server:
        engine = make_engine("responses", server.base_url)
        events = await collect(engine, make_request(model="gpt-5.4"))
        await engine.aclose()
    (call,) = calls_of(events)
    assert call.truncated
    assert call.name == "write"
    assert call.call_id == "call_Kx7pQ2mV9"
    assert events[-1].stop_reason == "max_tokens"  # type: ignore[union-attr]
