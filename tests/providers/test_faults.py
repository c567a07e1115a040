"""What real endpoints do wrong, over real sockets, for every dialect."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import pytest

from roder_core.errors import InferenceError
from roder_core.ir import MessageDelta, ProviderMetadataEvent, StreamRestartEvent
from roder_core.kernel.services import InferenceTurnContext
from roder_core.providers.retry import RetryPolicy
from roder_core.testing.fake_server import FakeModelServer
from tests.builders import until
from tests.providers.helpers import DIALECTS, calls_of, collect, make_engine, make_request, text_of

pytestmark = pytest.mark.parametrize("dialect", DIALECTS)

ANSWER = {"text": "The answer is forty-two, as computed.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}
KEY = "sk-test-VERYSECRETVALUE123456"


def retries(events: list) -> list[dict]:
    return [e.data["retry"] for e in events if isinstance(e, ProviderMetadataEvent) and "retry" in e.data]


async def run(dialect: str, steps: list[dict], **engine_options) -> tuple[list, FakeModelServer]:
    async with FakeModelServer(steps) as server:
        engine = make_engine(dialect, server.base_url, **engine_options)
        try:
            return await collect(engine), server
        finally:
            await engine.aclose()


async def test_429_with_retry_after_is_honoured_then_succeeds(dialect: str) -> None:
    events, server = await run(dialect, [{"status": 429, "headers": {"retry-after": "1"}}, ANSWER])
    assert text_of(events) == ANSWER["text"]
    assert len(calls_of(events)) == 1
    assert len(server.calls) == 2
    assert server.calls[1].received_at - server.calls[0].received_at >= 0.95
    assert [(r["kind"], r["wait"]) for r in retries(events)] == [("rate_limit", 1.0)]


async def test_500_twice_then_success(dialect: str) -> None:
    events, server = await run(dialect, [{"status": 500}, {"status": 503}, ANSWER])
    assert text_of(events) == ANSWER["text"]
    assert len(server.calls) == 3
    assert [r["kind"] for r in retries(events)] == ["server", "server"]


async def test_connection_dropped_mid_stream_resumes_without_duplicates(dialect: str) -> None:
    events, server = await run(dialect, [{**ANSWER, "drop_after": 5}, ANSWER])
    assert len(server.calls) == 2
    assert server.calls[0].disconnected_at is not None
    assert text_of(events) == ANSWER["text"]  # what was shown before the drop is not repeated
    assert len(calls_of(events)) == 1  # the tool call was held back until the response completed
    assert [r["kind"] for r in retries(events)] == ["stream_dropped"]
    assert not any(isinstance(e, StreamRestartEvent) for e in events)


async def test_a_retry_that_answers_differently_restarts_the_stream(dialect: str) -> None:
    first = {"text": "I will start by reading every file in", "drop_after": 6}
    events, _ = await run(dialect, [first, {"text": "Different plan: ask first."}])
    restart = next(i for i, e in enumerate(events) if isinstance(e, StreamRestartEvent))
    assert text_of(events[:restart]).startswith("I will")
    assert text_of(events[restart:]) == "Different plan: ask first."


async def test_clean_end_without_terminal_event_is_a_dropped_stream(dialect: str) -> None:
    events, server = await run(dialect, [{**ANSWER, "end_after": 4}, ANSWER])
    assert text_of(events) == ANSWER["text"]
    assert len(server.calls) == 2


async def test_malformed_sse_line_is_skipped(dialect: str) -> None:
    events, server = await run(dialect, [{**ANSWER, "malformed_after": 3}])
    assert text_of(events) == ANSWER["text"]
    assert len(calls_of(events)) == 1
    assert len(server.calls) == 1


async def test_slow_trickle_of_tiny_chunks(dialect: str) -> None:
    events, _ = await run(dialect, [{**ANSWER, "byte_chunk": 5, "delay_ms": 1, "chunk_size": 3}])
    assert text_of(events) == ANSWER["text"]
    assert calls_of(events)[0].arguments == {"command": "ls"}


async def test_401_is_a_typed_auth_error_without_the_key(dialect: str) -> None:
    error = {"message": f"Incorrect API key provided: {KEY}", "type": "authentication_error"}
    with pytest.raises(InferenceError) as caught:
        await run(dialect, [{"status": 401, "error": error}, ANSWER], api_key=KEY)
    assert caught.value.kind == "auth"
    assert not caught.value.retryable
    message = str(caught.value)
    assert KEY not in message
    assert "VERYSECRET" not in message
    assert "FAKE_PROVIDER_KEY" in message


async def test_missing_key_fails_before_any_request(dialect: str) -> None:
    """A provider whose key is required (a built-in's); a user table's api_key_env is optional."""
    async with FakeModelServer([ANSWER]) as server:
        engine = make_engine(dialect, server.base_url, api_key="")
        engine.spec = dataclasses.replace(engine.spec, key_optional=False)
        with pytest.raises(InferenceError, match="FAKE_PROVIDER_KEY is not set") as caught:
            await collect(engine)
        await engine.aclose()
    assert caught.value.kind == "auth"
    assert str(caught.value).count("FAKE_PROVIDER_KEY") == 1  # named once, with what to do
    assert server.calls == []


async def test_error_event_inside_the_stream_is_retried(dialect: str) -> None:
    overloaded = {**ANSWER, "stream_error": {"type": "overloaded_error", "message": "Overloaded"}}
    events, server = await run(dialect, [overloaded, ANSWER])
    assert text_of(events) == ANSWER["text"]
    assert len(server.calls) == 2


async def test_retries_are_bounded(dialect: str) -> None:
    with pytest.raises(InferenceError) as caught:
        await run(dialect, [{"status": 500}] * 10, retry=RetryPolicy(max_retries=2, base_delay=0.01))
    assert caught.value.kind == "server"
    assert caught.value.status == 500


async def test_context_overflow_is_typed_and_not_retried(dialect: str) -> None:
    error = {"message": "prompt is too long: 250000 tokens > 200000 maximum", "type": "invalid_request_error"}
    with pytest.raises(InferenceError) as caught:
        await run(dialect, [{"status": 400, "error": error}, ANSWER])
    assert caught.value.kind == "context_overflow"


async def test_idle_stream_times_out_and_is_retried(dialect: str) -> None:
    stalled = {**ANSWER, "stall_after": 2, "stall_ms": 1500}
    events, _server = await run(dialect, [stalled, ANSWER], timeout=0.3)
    assert text_of(events) == ANSWER["text"]
    assert [r["kind"] for r in retries(events)] == ["timeout"]


async def test_unreachable_endpoint_is_a_network_error(dialect: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = make_engine(dialect, f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_retries=1, base_delay=0.01))
    with pytest.raises(InferenceError, match="cannot reach") as caught:
        await collect(engine)
    assert caught.value.kind == "network"


async def test_cancelling_the_consumer_closes_the_http_stream_at_once(dialect: str) -> None:
    slow = {"text": "word " * 400, "chunk_size": 5, "delay_ms": 20}
    async with FakeModelServer([slow]) as server:
        engine = make_engine(dialect, server.base_url)
        first_delta = asyncio.Event()

        async def consume() -> None:
            ctx = InferenceTurnContext(thread_id="t", turn_id="u")
            async for event in engine.stream_turn(ctx, make_request()):
                if isinstance(event, MessageDelta):
                    first_delta.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(5):
            await first_delta.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: server.calls[0].disconnected_at is not None)
        await engine.aclose()
    assert server.calls[0].disconnected_at is not None  # the server saw the client go


async def test_answers_one_after_another_come_on_one_connection(dialect: str) -> None:
    """The rest of a finished answer's body is read, so its connection serves the next call
    instead of being closed and opened again for every model call."""
    async with FakeModelServer([ANSWER, ANSWER, ANSWER]) as server:
        engine = make_engine(dialect, server.base_url)
        try:
            for _ in range(3):
                assert text_of(await collect(engine)) == ANSWER["text"]
        finally:
            await engine.aclose()
    assert [c.connection for c in server.calls] == [1, 1, 1]


async def test_a_body_held_open_after_the_answer_does_not_hold_the_next_call(dialect: str) -> None:
    """A server (or proxy) that keeps the body open after the answer's last event: the answer
    is taken as it is, that connection is given up, and the next call gets a new one."""
    async with FakeModelServer([{**ANSWER, "hold_open": "held"}, ANSWER]) as server:
        engine = make_engine(dialect, server.base_url)
        try:
            assert text_of(await collect(engine)) == ANSWER["text"]
            assert text_of(await collect(engine)) == ANSWER["text"]
        finally:
            server.open_gate("held")
            await engine.aclose()
    assert [c.connection for c in server.calls] == [1, 2]
