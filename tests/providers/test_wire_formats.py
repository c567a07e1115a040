"""Each engine against the loopback server: the exact request it sends, the events it reads back."""

from __future__ import annotations

import pytest

from roder_core.ir import (
    CompletedEvent,
    ImagePart,
    Message,
    ReasoningDelta,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UsageEvent,
)
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import DIALECTS, calls_of, collect, make_engine, make_request, reasoning_of, text_of

PARALLEL_STEP = {
    "reasoning": "Two files to check, both at once.",
    "text": "Checking both.",
    "tool_calls": [
        {"name": "bash", "arguments": {"command": "cat a.txt"}},
        {"name": "bash", "arguments": {"command": "cat b.txt", "timeout": 5}},
    ],
    "usage": {"input_tokens": 5000, "cached_tokens": 4096, "output_tokens": 120, "reasoning_tokens": 64},
}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_text_reasoning_parallel_calls_and_usage(dialect: str) -> None:
    async with FakeModelServer([PARALLEL_STEP]) as server:
        engine = make_engine(dialect, server.base_url)
        events = await collect(engine, make_request(model="claude-sonnet-4-6" if "anthropic" in dialect else "gpt-5"))
        await engine.aclose()
    assert text_of(events) == "Checking both."
    assert reasoning_of(events) == "Two files to check, both at once."
    calls = calls_of(events)
    assert [c.arguments for c in calls] == [{"command": "cat a.txt"}, {"command": "cat b.txt", "timeout": 5}]
    assert len({c.call_id for c in calls}) == 2
    assert all(c.name == "bash" for c in calls)
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage) == 1
    expected_reasoning = 0 if dialect == "anthropic-messages" else 64  # Anthropic does not count it apart
    assert (
        usage[0].usage.input_tokens,
        usage[0].usage.cached_input_tokens,
        usage[0].usage.output_tokens,
        usage[0].usage.reasoning_tokens,
    ) == (5000, 4096, 120, expected_reasoning)
    assert events[-1] == CompletedEvent(stop_reason="tool_use")


async def test_chat_completions_request_shape_and_quirks() -> None:
    async with FakeModelServer([{"text": "ok"}]) as server:
        engine = make_engine(
            "chat-completions",
            server.base_url,
            api_key="sk-local-1234567890",
            system_role="developer",
            max_tokens_field="max_completion_tokens",
            reasoning_format="reasoning_effort",
            headers={"x-team": "roder"},
        )
        await collect(engine, make_request(model="gpt-5", reasoning_effort="high", max_output_tokens=4096))
        await engine.aclose()
    sent = server.calls[0]
    body = sent.json
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-local-1234567890"
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.headers["x-team"] == "roder"
    assert body["messages"][0] == {"role": "developer", "content": "You are terse."}
    assert body["messages"][1] == {"role": "user", "content": "hi"}
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body
    assert body["reasoning_effort"] == "high"
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is True


async def test_chat_completions_defaults_for_an_unknown_local_model() -> None:
    async with FakeModelServer([{"reasoning": "hmm", "reasoning_field": "reasoning", "text": "ok"}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        events = await collect(
            engine, make_request(model="my-model", tools=False, reasoning_effort="high", max_output_tokens=4096)
        )
        await engine.aclose()
    body = server.calls[0].json
    assert body["messages"][0]["role"] == "system"
    assert "authorization" not in server.calls[0].headers
    assert "max_tokens" not in body
    assert "max_completion_tokens" not in body  # limits of unknown models are guesses
    assert "reasoning_effort" not in body
    assert "tools" not in body
    assert "parallel_tool_calls" not in body
    assert reasoning_of(events) == "hmm"
    assert text_of(events) == "ok"  # OpenRouter/Ollama "reasoning" field


async def test_responses_request_shape() -> None:
    async with FakeModelServer([{"text": "ok"}]) as server:
        engine = make_engine("responses", server.base_url, api_key="sk-test-abcdefghij", reasoning_effort="low")
        await collect(engine, make_request(model="gpt-5.4", max_output_tokens=4096))
        await engine.aclose()
    sent = server.calls[0]
    body = sent.json
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test-abcdefghij"
    assert body["instructions"] == "You are terse."
    assert body["store"] is False
    assert body["stream"] is True
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert body["reasoning"] == {"summary": "auto", "effort": "low"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["name"] == "bash"
    assert body["max_output_tokens"] == 4096


async def test_anthropic_request_shape() -> None:
    async with FakeModelServer([{"text": "ok"}]) as server:
        engine = make_engine("anthropic-messages", server.base_url, api_key="sk-ant-api03-secretsecret")
        await collect(engine, make_request(model="claude-sonnet-4-6", reasoning_effort="medium"))
        await engine.aclose()
    sent = server.calls[0]
    body = sent.json
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-api03-secretsecret"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert body["max_tokens"] == 64_000
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}
    assert "anthropic-beta" not in sent.headers  # adaptive thinking interleaves without a beta
    assert body["tools"][0] == {
        "name": "bash",
        "description": "run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": False}


def _history(dialect: str) -> list[Message]:
    """A conversation with a prior assistant turn (reasoning kept verbatim, text, two tool calls)
    and its tool results, one with an image."""
    stored = {
        "responses": {"responses/rs_1": {"summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "ENC1"}},
        "anthropic-messages": {"anthropic-messages/0": {"type": "thinking", "thinking": "plan", "signature": "SIG1"}},
        "chat-completions": None,
    }[dialect]
    image = ImagePart(mime_type="image/png", data_base64="iVBORw0KGgo=")
    return [
        Message(role="user", parts=[TextPart(text="look at a and b")]),
        Message(
            role="assistant",
            parts=[
                ReasoningPart(summary="plan", provider_data=stored),
                TextPart(text="Looking."),
                ToolCallPart(call_id="call_a", name="bash", arguments={"command": "cat a"}),
                ToolCallPart(call_id="call_b", name="bash", arguments={"command": "cat b"}),
            ],
        ),
        Message(
            role="tool",
            parts=[
                ToolResultPart(call_id="call_a", name="bash", text="A!"),
                ToolResultPart(call_id="call_b", name="bash", text="no such file", is_error=True, images=[image]),
            ],
        ),
    ]


async def test_history_is_reencoded_for_chat_completions() -> None:
    async with FakeModelServer([{"text": "ok"}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        await collect(engine, make_request().model_copy(update={"messages": _history("chat-completions")}))
        await engine.aclose()
    messages = server.calls[0].json["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": '{"command":"cat a"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": '{"command":"cat b"}'}},
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_a", "content": "A!"}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_b", "content": "no such file"}
    assert messages[5]["role"] == "user" and messages[5]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }


async def test_history_is_reencoded_for_responses() -> None:
    async with FakeModelServer([{"text": "ok"}, {"text": "ok"}]) as server:
        engine = make_engine("responses", server.base_url)
        await collect(engine, make_request(model="gpt-5").model_copy(update={"messages": _history("responses")}))
        await collect(engine, make_request(model="gpt-4.1").model_copy(update={"messages": _history("responses")}))
        await engine.aclose()
    assert all(i.get("type") != "reasoning" for i in server.calls[1].json["input"])  # not to a non-reasoning model
    items = server.calls[0].json["input"]
    assert items[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "ENC1",
    }
    assert items[2] == {"role": "assistant", "content": "Looking."}
    assert items[3] == {"type": "function_call", "call_id": "call_a", "name": "bash", "arguments": '{"command":"cat a"}'}
    assert items[5] == {"type": "function_call_output", "call_id": "call_a", "output": "A!"}
    assert items[6]["call_id"] == "call_b" and items[6]["output"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,iVBORw0KGgo=",
    }


async def test_history_is_reencoded_for_anthropic() -> None:
    async with FakeModelServer([{"text": "ok"}, {"text": "ok"}]) as server:
        engine = make_engine("anthropic-messages", server.base_url)
        request = make_request(model="claude-sonnet-4-6", reasoning_effort="low").model_copy(
            update={"messages": [*_history("anthropic-messages"), Message(role="user", parts=[TextPart(text="and?")])]}
        )
        await collect(engine, request)
        await collect(engine, request.model_copy(update={"reasoning_effort": None}))
        await engine.aclose()
    without_thinking = server.calls[1].json["messages"][1]["content"]
    assert "thinking" not in server.calls[1].json
    assert without_thinking[0] == {"type": "text", "text": "Looking."}
    messages = server.calls[0].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "SIG1"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "call_a", "name": "bash", "input": {"command": "cat a"}},
        {"type": "tool_use", "id": "call_b", "name": "bash", "input": {"command": "cat b"}},
    ]
    results = messages[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "call_a", "content": "A!"}
    assert results[1]["is_error"] is True
    assert results[1]["content"][1]["source"]["media_type"] == "image/png"
    assert results[2] == {"type": "text", "text": "and?", "cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_reasoning_comes_back_with_what_the_next_request_needs(dialect: str) -> None:
    async with FakeModelServer([{"reasoning": "think", "text": "done"}]) as server:
        engine = make_engine(dialect, server.base_url)
        events = await collect(engine, make_request(model="claude-opus-4-7" if "anthropic" in dialect else "o3"))
        await engine.aclose()
    stored = {k: v for e in events if isinstance(e, ReasoningDelta) and e.provider_data for k, v in e.provider_data.items()}
    if dialect == "responses":
        assert stored == {
            "responses/rs_fake1": {
                "summary": [{"type": "summary_text", "text": "think"}],
                "encrypted_content": "gAAAA-encrypted-1",
            }
        }
    elif dialect == "anthropic-messages":
        assert stored == {"anthropic-messages/0": {"type": "thinking", "thinking": "think", "signature": "EqQBsig1=="}}
    else:
        assert stored == {}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_max_tokens_stop_reason(dialect: str) -> None:
    async with FakeModelServer([{"text": "cut sh", "stop_reason": "max_tokens"}]) as server:
        engine = make_engine(dialect, server.base_url)
        events = await collect(engine)
        await engine.aclose()
    assert events[-1] == CompletedEvent(stop_reason="max_tokens")
    assert text_of(events) == "cut sh"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_models_listing(dialect: str) -> None:
    async with FakeModelServer(models=("alpha", "claude-haiku-4-5")) as server:
        engine = make_engine(dialect, server.base_url)
        profiles = await engine.list_models()
        await engine.aclose()
    assert [p.id for p in profiles] == ["alpha", "claude-haiku-4-5"]
    assert profiles[1].context_window == 200_000
    assert profiles[0].context_window == 128_000
