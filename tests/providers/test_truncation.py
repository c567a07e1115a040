"""Output-limit truncation of tool calls, and streams that end in unusual but valid ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.ir import ToolResultItem
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import DIALECTS, calls_of, collect, make_engine, make_request
from tests.providers.test_runtime_turns import items, runtime_for

CUT = {"text": "Writing it.", "tool_calls": [{"name": "peek", "arguments": '{"x": "a very long fi'}], "stop_reason": "max_tokens"}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_call_cut_by_the_output_limit_is_not_run_and_the_model_is_told(workspace: Path, dialect: str) -> None:
    async with FakeModelServer([CUT, {"text": "I will write it in parts."}]) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "write the big file")
        await runtime.close()
    assert turn.status == "completed", turn.error
    (result,) = items(thread, ToolResultItem)
    assert result.is_error
    assert result.text.startswith("peek was not run: your response hit its output token limit")
    assert "peeked" not in result.text  # the tool never ran
    assert len(server.calls) == 2  # and the model was asked again, with that result


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_complete_call_before_the_cut_one_still_runs(dialect: str) -> None:
    step = {
        "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}, {"name": "bash", "arguments": '{"command": "cat '}],
        "stop_reason": "max_tokens",
    }
    async with FakeModelServer([step]) as server:
        engine = make_engine(dialect, server.base_url)
        events = await collect(engine, make_request())
        await engine.aclose()
    first, second = calls_of(events)
    assert (first.truncated, first.arguments) == (False, {"command": "ls"})
    assert second.truncated
    assert "output token limit" in (second.arguments_error or "")


async def test_anthropic_stream_ending_after_message_delta_is_complete() -> None:
    raw = "".join(
        f"event: {kind}\ndata: {data}\n\n"
        for kind, data in [
            (
                "message_start",
                '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
                '"content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":1}}}',
            ),
            ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
            ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi."}}'),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}'),
        ]
    )
    async with FakeModelServer([{"raw": raw}, {"raw": raw.rsplit("event: message_delta", 1)[0]}]) as server:
        engine = make_engine("anthropic-messages", server.base_url)
        events = await collect(engine, make_request(model="claude-sonnet-4-5"))
        assert len(server.calls) == 1  # accepted without a retry
        assert events[-1].stop_reason == "end_turn"  # type: ignore[union-attr]
        assert events[-2].usage.output_tokens == 3  # type: ignore[union-attr]
        # Ending before message_delta is still a dropped stream (retried).
        from roder_core.errors import InferenceError
        from roder_core.providers.retry import RetryPolicy

        strict = make_engine("anthropic-messages", server.base_url, retry=RetryPolicy(max_retries=0))
        with pytest.raises(InferenceError) as caught:
            await collect(strict, make_request(model="claude-sonnet-4-5"))
        assert caught.value.kind == "stream_dropped"
        await engine.aclose()
        await strict.aclose()


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_200_web_page_is_one_line_naming_the_content_type(dialect: str) -> None:
    from roder_core.errors import InferenceError

    page = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body>" + "<p>x</p>\n" * 200 + "</body></html>"
    async with FakeModelServer([{"raw": page, "content_type": "text/html; charset=utf-8"}]) as server:
        engine = make_engine(dialect, server.base_url)
        with pytest.raises(InferenceError) as caught:
            await collect(engine, make_request())
        await engine.aclose()
    message = str(caught.value)
    assert "\n" not in message
    assert "<" not in message
    assert "expected an event stream, got text/html (HTTP 200)" in message
    assert "base_url" in message
    assert caught.value.kind == "bad_request"
    assert len(server.calls) == 1  # not retried
