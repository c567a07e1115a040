"""A model client's paced reads (``roder_core.providers.paced_reads``) and the joining of the
deltas one read brings (``engine.merge_deltas``): the first token is never held, nothing is lost
or reordered, and only deltas that differ in nothing but their text are joined."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from roder_core.ir import CompletedEvent, InferenceEvent, MessageDelta, ReasoningDelta, ToolCallEvent, UsageEvent
from roder_core.kernel.services import InferenceTurnContext
from roder_core.providers.engine import merge_deltas
from roder_core.providers.paced_reads import ReadPacer
from roder_core.testing.fake_server import RENDERERS, FakeModelServer
from tests.providers.helpers import DIALECTS, collect, make_engine, make_request, reasoning_of, text_of


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_read_of_an_answer_is_never_held() -> None:
    clock = Clock()
    pacer = ReadPacer(clock)
    assert pacer.wait() == 0.0
    pacer.read_done(200)
    pacer.written()  # the next request: its first read goes at once
    assert pacer.wait() == 0.0


def test_a_read_right_after_a_small_one_waits_the_rest_of_the_pace() -> None:
    clock = Clock()
    pacer = ReadPacer(clock)
    pacer.read_done(120)
    clock.now += 0.010
    assert abs(pacer.wait() - (ReadPacer.PACE - 0.010)) < 1e-9
    clock.now += ReadPacer.PACE
    assert pacer.wait() == 0.0  # a pause in the stream already took longer than the pace


def test_a_backlog_or_the_peers_close_is_read_on_at_once() -> None:
    clock = Clock()
    pacer = ReadPacer(clock)
    pacer.read_done(ReadPacer.BACKLOG)
    assert pacer.wait() == 0.0
    pacer.read_done(0)
    assert pacer.wait() == 0.0


def test_adjacent_deltas_of_one_kind_are_joined_and_nothing_moves() -> None:
    call = ToolCallEvent(call_id="c1", name="bash", arguments={"command": "ls"})
    usage = UsageEvent.model_validate({"usage": {"input_tokens": 3, "output_tokens": 2}})
    events: list[InferenceEvent] = [
        ReasoningDelta(text="th"),
        ReasoningDelta(text="ink"),
        ReasoningDelta(text="", provider_data={"signature": "s"}),  # a signature stays apart
        ReasoningDelta(text="sum", summary=True),
        ReasoningDelta(text="mary", summary=True),
        MessageDelta(text="Hel"),
        MessageDelta(text="lo"),
        MessageDelta(text=" world"),
        call,
        MessageDelta(text="after"),
        usage,
        MessageDelta(text="end"),
        CompletedEvent(),
    ]
    merged = merge_deltas(events)
    assert merged == [
        ReasoningDelta(text="think"),
        ReasoningDelta(text="", provider_data={"signature": "s"}),
        ReasoningDelta(text="summary", summary=True),
        MessageDelta(text="Hello world"),
        call,
        MessageDelta(text="after"),
        usage,
        MessageDelta(text="end"),
        CompletedEvent(),
    ]
    assert merge_deltas([MessageDelta(text="a")]) == [MessageDelta(text="a")]
    assert merge_deltas([]) == []


def _chat_event(content: str) -> str:
    return "data: " + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {"content": content}}]}) + "\n\n"


async def test_the_events_of_one_chunk_arrive_as_one_delta_in_order() -> None:
    """A server (or a proxy) that writes several events at once: their text is one delta."""
    words = [f"w{i} " for i in range(40)]
    body = "".join(_chat_event(w) for w in words) + (
        'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    async with FakeModelServer([{"raw": body}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        try:
            events = await collect(engine, make_request())
        finally:
            await engine.aclose()
    deltas = [e for e in events if isinstance(e, MessageDelta)]
    assert text_of(events) == "".join(words)
    assert len(deltas) == 1
    assert isinstance(events[-1], CompletedEvent)


async def test_the_first_delta_is_delivered_before_the_server_sends_the_second() -> None:
    """The server holds the rest of the answer until the client has its first delta: a reader
    that waited for more before handing the first one over would never get the rest."""
    for dialect in DIALECTS:
        step: dict[str, object] = {"text": "first second third fourth", "chunk_size": 6, "gate": "more"}
        rendered = RENDERERS[dialect](step, {}, 1)
        step["gate_after"] = 1 + next(i for i, event in enumerate(rendered) if "first" in json.dumps(event))
        steps = [step]
        async with FakeModelServer(steps, dialect=dialect) as server:
            engine = make_engine(dialect, server.base_url)
            ctx = InferenceTurnContext(thread_id="thr_test", turn_id="turn_test")
            got: list[str] = []
            try:
                async with asyncio.timeout(30):  # a deadlock guard, never reached when it works
                    async for event in engine.stream_turn(ctx, make_request()):
                        if isinstance(event, MessageDelta):
                            if not got:
                                server.open_gate("more")
                            got.append(event.text)
            finally:
                await engine.aclose()
        assert "".join(got) == "first second third fourth", dialect


async def test_a_trickle_cut_anywhere_loses_nothing_through_paced_reads() -> None:
    """Many small events written a few bytes at a time, cut mid-event and mid-character: every
    dialect gets every character of the text and the reasoning, in order."""
    text = "Streamed café text, " * 20
    for dialect in DIALECTS:
        steps = [{"text": text, "reasoning": "thinking it through", "chunk_size": 3, "byte_chunk": 7}]
        async with FakeModelServer(steps, dialect=dialect) as server:
            engine = make_engine(dialect, server.base_url)
            try:
                events = await collect(engine, make_request())
            finally:
                await engine.aclose()
        assert text_of(events) == text, dialect
        assert reasoning_of(events) == "thinking it through", dialect
        assert isinstance(events[-1], CompletedEvent), dialect


async def test_a_model_client_reads_through_the_pacer() -> None:
    """The client's connections are paced streams (an httpx or httpcore upgrade that moves the
    pool's network backend fails here, not silently in a benchmark)."""
    async with FakeModelServer([{"text": "hello"}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        try:
            client = engine.transport.client()
            backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
            assert type(backend).__name__ == "PacedBackend"
            assert text_of(await collect(engine, make_request())) == "hello"
        finally:
            await engine.aclose()


async def test_an_httpx_that_keeps_its_pool_elsewhere_still_streams_unpaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pacing reaches into httpx's private pool; an httpx whose transport has no ``_pool``
    (a later release) reads unpaced instead of failing every model call with AttributeError."""
    real = httpx.AsyncHTTPTransport

    class PoolElsewhere(httpx.AsyncBaseTransport):
        def __init__(self, **options: Any) -> None:
            self._inner = real(**options)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return await self._inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self._inner.aclose()

    monkeypatch.setattr(httpx, "AsyncHTTPTransport", PoolElsewhere)
    async with FakeModelServer([{"text": "hello"}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        try:
            assert text_of(await collect(engine, make_request())) == "hello"
        finally:
            await engine.aclose()


async def test_text_before_an_error_in_the_same_chunk_is_delivered_before_the_retry() -> None:
    """Two deltas and an in-stream error arrive in one chunk: the deltas reach the consumer
    before the retry (the replay guard counts them as shown), and the retried answer adds only
    what was not shown yet."""
    error = 'data: {"error":{"message":"Overloaded","type":"overloaded_error","code":"overloaded_error"}}\n\n'
    first = _chat_event("Hel") + _chat_event("lo") + error
    async with FakeModelServer([{"raw": first}, {"text": "Hello world"}]) as server:
        engine = make_engine("chat-completions", server.base_url)
        try:
            events = await collect(engine, make_request())
        finally:
            await engine.aclose()
    deltas = [e.text for e in events if isinstance(e, MessageDelta)]
    assert deltas[0] == "Hello"
    assert text_of(events) == "Hello world"
    assert len(server.calls) == 2
