"""A loopback model server that speaks the three wire dialects byte for byte, with faults.

It answers ``POST .../responses`` (OpenAI Responses), ``POST .../chat/completions`` (Chat
Completions) and ``POST .../messages`` (Anthropic Messages) with server-sent events shaped as the
providers document them (``event:``/``data:`` framing, chunked transfer encoding, keep-alive), and
``GET .../models`` with a model listing (a Chat Completions request without ``"stream": true``
gets the whole answer as one JSON object, as OpenAI sends it). Each POST consumes the next *step*
of a script:

    {"steps": [
      {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
      {"reasoning": "The listing shows two files.", "text": "There are two files.",
       "usage": {"input_tokens": 1200, "cached_tokens": 1000, "output_tokens": 20}}
    ]}

(the same shape as ``RODER_MOCK_SCRIPT``, so one script drives the mock and the real engines).
Step keys:

- ``text``, ``reasoning``, ``tool_calls`` [{name, arguments, id?}], ``usage`` {input_tokens
  (whole prompt), cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens},
  ``stop_reason`` (end_turn, max_tokens), ``chunk_size`` (characters per delta, default 8),
  ``reasoning_field`` (chat only: ``reasoning_content`` or ``reasoning``).
- Faults: ``status`` with optional ``error`` {message, type} and ``headers`` (an HTTP error, e.g.
  ``{"status": 429, "headers": {"retry-after": "1"}}``); ``stream_error`` {message, type} (the
  dialect's in-stream error event instead of completion); ``drop_after`` N (abort the connection
  after N events); ``end_after`` N (end the body cleanly after N events, no terminal event);
  ``malformed_after`` N (a garbage line and an unparsable data line after event N);
  ``delay_ms`` (pause before every event); ``content_type`` (of a 200 answer, with ``raw``: a
  proxy's HTML page); ``byte_chunk`` (write events in pieces of this many
  bytes, pausing ``delay_ms`` between pieces: a slow trickle); ``split_at`` K (with ``raw``:
  write the body as two HTTP chunks cut at byte K, which the client's HTTP layer hands over as
  two pieces however the network delivers them); ``stall_after`` N with
  ``stall_ms`` (go silent mid-stream); ``raw`` (send this exact SSE body); ``gate`` NAME with
  ``gate_after`` N (hold the stream before event N, default 0, until the test calls
  ``open_gate(NAME)``; ``gate_reached(NAME)`` is set once a stream waits there), so a test acts
  at an exact point of an answer without waiting for time to pass.

Steps are taken in order. A step may be reserved for some requests: ``when`` (a string, or a
list of strings that must all occur) and ``unless`` (none may occur) are matched against the
request's text (every string in its JSON body), and such a step is taken by the first matching
request. Parallel callers (the members of an agent team) are scripted this way: each request
takes the first step not yet taken that it matches.

When the script runs out, every further call answers "(fake server script finished)".

In tests: ``async with FakeModelServer(steps) as server:`` (``server.base_url``,
``server.requests``), or ``ThreadedFakeServer`` for synchronous code. From a shell (other tests
and benchmarks run the real ``roder`` against it; it ships in the package, so an installed copy
has it too)::

    roder dev fake-server --script steps.json --port 0 [--log requests.jsonl]
    python -m roder_core.testing.fake_server ...   (the same)

prints its base URL (``http://127.0.0.1:PORT/v1``) on the first line of stdout and serves until
terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DIALECTS = ("responses", "chat-completions", "anthropic-messages")
FINISHED_STEP: dict[str, Any] = {"text": "(fake server script finished)"}
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (what ``when`` and ``unless`` are matched against)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _matches(step: dict[str, Any], text: str) -> bool:
    def listed(key: str) -> list[str]:
        value = step.get(key, [])
        return [value] if isinstance(value, str) else list(value)

    return all(part in text for part in listed("when")) and not any(part in text for part in listed("unless"))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float
    #: When the server noticed the client had gone (cancellation tests).
    disconnected_at: float | None = None
    #: Which TCP connection it came on (1 for the server's first): keep-alive reuse is visible.
    connection: int = 0

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def masked(self) -> dict[str, Any]:
        headers = {k: ("***" if k in ("authorization", "x-api-key") else v) for k, v in self.headers.items()}
        return {"method": self.method, "path": self.path, "headers": headers, "json": self.json, "received_at": self.received_at}


# --------------------------------------------------------------------------- dialect rendering


@dataclass
class _Usage:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


def _usage(step: dict[str, Any], request: dict[str, Any]) -> _Usage:
    given = step.get("usage") or {}
    text_out = step.get("text", "") + step.get("reasoning", "") + _json(step.get("tool_calls", []))
    return _Usage(
        input_tokens=int(given.get("input_tokens", len(_json(request)) // 4)),
        output_tokens=int(given.get("output_tokens", len(text_out) // 4 + 1)),
        cached_tokens=int(given.get("cached_tokens", 0)),
        cache_write_tokens=int(given.get("cache_write_tokens", 0)),
        reasoning_tokens=int(given.get("reasoning_tokens", 0)),
    )


def _calls(step: dict[str, Any], prefix: str, number: int) -> list[dict[str, Any]]:
    return [
        {
            "id": call.get("id") or f"{prefix}{number}_{index}",
            "name": call["name"],
            "arguments": call["arguments"] if isinstance(call.get("arguments"), str) else _json(call.get("arguments", {})),
        }
        for index, call in enumerate(step.get("tool_calls", []))
    ]


Event = tuple[str | None, dict[str, Any] | str]


def _logprobs(pieces: list[str], top: int) -> list[dict[str, Any]]:
    """One token per text piece, as both dialects describe a token: text, logprob, UTF-8 bytes
    and the ``top`` most likely alternatives (the token itself first)."""
    out = []
    for index, piece in enumerate(pieces):
        logprob = -round(0.01 * (index + 1), 4)
        alternatives = [{"token": piece, "logprob": logprob, "bytes": list(piece.encode())}]
        alternatives += [{"token": f"alt{n}", "logprob": logprob - n, "bytes": list(f"alt{n}".encode())} for n in range(1, top)]
        out.append({**alternatives[0], "top_logprobs": alternatives[:top]})
    return out


def token_id(piece: str) -> int:
    """The fake tokenizer's id of a piece of text (stable across runs, below 50,000)."""
    return sum((i + 1) * b for i, b in enumerate(piece.encode())) % 50_000


def _add_token_ids(events: list[Event], request: dict[str, Any]) -> None:
    """vLLM's ``return_token_ids``: ``prompt_token_ids`` at the top of the first chunk (one id
    per word of the request's messages), ``token_ids`` on every choice that carries generated
    text or tool-call arguments (one id per piece)."""
    words = " ".join(str(m.get("content") or "") for m in request.get("messages", []) if isinstance(m, dict)).split()
    first = events[0][1]
    assert isinstance(first, dict)
    first["prompt_token_ids"] = [token_id(word) for word in words]
    for _, data in events:
        assert isinstance(data, dict)
        for choice in data.get("choices", []):
            delta = choice.get("delta", {})
            pieces = [delta.get("content") or ""] + [
                c.get("function", {}).get("arguments") or "" for c in delta.get("tool_calls", [])
            ]
            generated = [piece for piece in pieces if piece]
            choice["token_ids"] = [token_id(piece) for piece in generated] if generated else []


def render_chat(step: dict[str, Any], request: dict[str, Any], number: int) -> list[Event]:
    size = int(step.get("chunk_size", 8))
    base = {
        "id": f"chatcmpl-fake{number}",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000 + number,
        "model": request.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    field_name = step.get("reasoning_field", "reasoning_content")
    events += [chunk({field_name: piece}) for piece in _pieces(step.get("reasoning", ""), size)]
    pieces = _pieces(step.get("text", ""), size)
    if request.get("logprobs"):  # each content chunk carries its token's logprobs
        tokens = _logprobs(pieces, int(request.get("top_logprobs") or 0))
        events += [
            (
                None,
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": piece},
                            "finish_reason": None,
                            "logprobs": {"content": [token], "refusal": None},
                        }
                    ],
                },
            )
            for piece, token in zip(pieces, tokens, strict=True)
        ]
    else:
        events += [chunk({"content": piece}) for piece in pieces]
    calls = _calls(step, "call_fake", number)
    for index, call in enumerate(calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call["arguments"], size)
        ]
    finish = {"max_tokens": "length"}.get(step.get("stop_reason", ""), "tool_calls" if calls else "stop")
    events.append(chunk({}, finish))
    if request.get("return_token_ids"):
        _add_token_ids(events, request)
    if (request.get("stream_options") or {}).get("include_usage"):
        usage = _usage(step, request)
        events.append(
            (
                None,
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage.input_tokens,
                        "completion_tokens": usage.output_tokens,
                        "total_tokens": usage.input_tokens + usage.output_tokens,
                        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
                        "completion_tokens_details": {
                            "reasoning_tokens": usage.reasoning_tokens,
                            "audio_tokens": 0,
                            "accepted_prediction_tokens": 0,
                            "rejected_prediction_tokens": 0,
                        },
                    },
                },
            )
        )
    events.append((None, "[DONE]"))
    return events


def render_responses(step: dict[str, Any], request: dict[str, Any], number: int) -> list[Event]:
    size = int(step.get("chunk_size", 8))
    sequence = iter(range(1_000_000))
    response = {
        "id": f"resp_fake{number}",
        "object": "response",
        "created_at": 1_760_000_000 + number,
        "status": "in_progress",
        "model": request.get("model", "fake-model"),
        "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "usage": None,
    }
    events: list[Event] = []

    def emit(kind: str, **payload: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(sequence), **payload}))

    emit("response.created", response=response)
    emit("response.in_progress", response=response)
    output: list[dict[str, Any]] = []
    if step.get("reasoning"):
        index, item_id, text = len(output), f"rs_fake{number}", step["reasoning"]
        emit("response.output_item.added", output_index=index, item={"id": item_id, "type": "reasoning", "summary": []})
        part: dict[str, Any] = {"type": "summary_text", "text": ""}
        emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=0, part=part)
        for piece in _pieces(text, size):
            emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=0, delta=piece)
        emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=0, text=text)
        emit(
            "response.reasoning_summary_part.done",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            part={"type": "summary_text", "text": text},
        )
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
        if "reasoning.encrypted_content" in (request.get("include") or []):
            item["encrypted_content"] = f"gAAAA-encrypted-{number}"
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    if step.get("text"):
        index, item_id, text = len(output), f"msg_fake{number}", step["text"]
        emit(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []},
        )
        emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        pieces = _pieces(text, size)
        wanted = "message.output_text.logprobs" in (request.get("include") or [])
        tokens = _logprobs(pieces, int(request.get("top_logprobs") or 0)) if wanted else [None] * len(pieces)
        for piece, token in zip(pieces, tokens, strict=True):
            emit(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[token] if token else [],
            )
        emit(
            "response.output_text.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[t for t in tokens if t],
        )
        part = {"type": "output_text", "text": text, "annotations": []}
        emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    for call in _calls(step, "call_fake", number):
        index, item_id = len(output), f"fc_{call['id']}"
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call["id"],
            "name": call["name"],
        }
        emit("response.output_item.added", output_index=index, item=item)
        for piece in _pieces(call["arguments"], size):
            emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
        emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=call["arguments"])
        item = {**item, "status": "completed", "arguments": call["arguments"]}
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    usage = _usage(step, request)
    final = {
        **response,
        "output": output,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }
    if step.get("stop_reason") == "max_tokens":
        emit(
            "response.incomplete",
            response={**final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
        )
    else:
        emit("response.completed", response={**final, "status": "completed"})
    return events


def render_anthropic(step: dict[str, Any], request: dict[str, Any], number: int) -> list[Event]:
    size = int(step.get("chunk_size", 8))
    usage = _usage(step, request)
    events: list[Event] = []

    def emit(kind: str, **payload: Any) -> None:
        events.append((kind, {"type": kind, **payload}))

    fresh_input = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    emit(
        "message_start",
        message={
            "id": f"msg_fake{number}",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": request.get("model", "fake-model"),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": fresh_input,
                "cache_creation_input_tokens": usage.cache_write_tokens,
                "cache_read_input_tokens": usage.cached_tokens,
                "output_tokens": 1,
            },
        },
    )
    index = 0
    if step.get("reasoning"):
        emit("content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""})
        emit("ping")
        for piece in _pieces(step["reasoning"], size):
            emit("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
        emit("content_block_delta", index=index, delta={"type": "signature_delta", "signature": f"EqQBsig{number}=="})
        emit("content_block_stop", index=index)
        index += 1
    if step.get("text"):
        emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for piece in _pieces(step["text"], size):
            emit("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        emit("content_block_stop", index=index)
        index += 1
    calls = _calls(step, "toolu_fake", number)
    for call in calls:
        emit(
            "content_block_start",
            index=index,
            content_block={"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}},
        )
        emit("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": ""})
        for piece in _pieces(call["arguments"], size):
            emit("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        emit("content_block_stop", index=index)
        index += 1
    stop = step.get("stop_reason") or ("tool_use" if calls else "end_turn")
    emit("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage={"output_tokens": usage.output_tokens})
    emit("message_stop")
    return events


def chat_completion(step: dict[str, Any], request: dict[str, Any], number: int) -> dict[str, Any]:
    """A Chat Completions answer without ``stream`` (one JSON object), as clients such as
    LiteLLM ask for by default."""
    calls = _calls(step, "call_fake", number)
    usage = _usage(step, request)
    message: dict[str, Any] = {"role": "assistant", "content": step.get("text", ""), "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
        ]
    finish = {"max_tokens": "length"}.get(step.get("stop_reason", ""), "tool_calls" if calls else "stop")
    return {
        "id": f"chatcmpl-fake{number}",
        "object": "chat.completion",
        "created": 1_760_000_000 + number,
        "model": request.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


RENDERERS = {"chat-completions": render_chat, "responses": render_responses, "anthropic-messages": render_anthropic}


def stream_error_event(dialect: str, error: dict[str, Any]) -> Event:
    kind, message = error.get("type", "server_error"), error.get("message", "stream failed")
    if dialect == "anthropic-messages":
        return "error", {"type": "error", "error": {"type": kind, "message": message}}
    if dialect == "responses":
        return "error", {"type": "error", "code": kind, "message": message, "param": None, "sequence_number": 999}
    return None, {"error": {"message": message, "type": kind, "code": kind}}


def error_body(dialect: str, status: int, error: dict[str, Any]) -> bytes:
    defaults = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = error.get("type") or defaults.get(status, "invalid_request_error" if status < 500 else "api_error")
    message = error.get("message", f"fake error {status}")
    if dialect == "anthropic-messages":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": error.get("code", kind)}}
    return _json(body).encode()


def sse_bytes(event: Event) -> bytes:
    name, payload = event
    data = payload if isinstance(payload, str) else _json(payload)
    return ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()


def dialect_of(path: str) -> str | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat-completions"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "anthropic-messages"
    return None


# --------------------------------------------------------------------------- the server


class _ClientGone(Exception):
    pass


@dataclass
class FakeModelServer:
    steps: list[dict[str, Any]] = field(default_factory=list)
    dialect: str = "chat-completions"
    models: tuple[str, ...] = ("fake-model", "fake-model-large")
    host: str = "127.0.0.1"
    port: int = 0
    #: When set, requests without this key (Bearer or x-api-key) get a 401.
    api_key: str | None = None
    log_path: Path | None = None

    def __post_init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._taken: set[int] = set()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._accepted = 0
        self._gates: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reached: dict[str, threading.Event] = {}

    def open_gate(self, name: str) -> None:
        """Let the streams held at gate ``name`` go on (callable from any thread)."""

        def release() -> None:
            self._gates.setdefault(name, asyncio.Event()).set()

        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if self._loop is None or here is self._loop:
            release()
        else:
            self._loop.call_soon_threadsafe(release)

    def gate_reached(self, name: str) -> threading.Event:
        """Set once a stream waits at gate ``name`` (usable from any thread)."""
        return self._reached.setdefault(name, threading.Event())

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def calls(self) -> list[RecordedRequest]:
        """The model calls (POSTs) received so far."""
        return [r for r in self.requests if r.method == "POST"]

    async def start(self) -> str:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.base_url

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeModelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _take_step(self, record: RecordedRequest) -> dict[str, Any]:
        text: str | None = None
        for index, step in enumerate(self.steps):
            if index in self._taken:
                continue
            if "when" in step or "unless" in step:
                if text is None:
                    text = "\n".join(_strings(record.json))
                if not _matches(step, text):
                    continue
            self._taken.add(index)
            return step
        return FINISHED_STEP

    @property
    def steps_left(self) -> int:
        """Steps no request has taken yet."""
        return len(self.steps) - len(self._taken)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._accepted += 1
        connection = self._accepted
        try:
            while await self._one_request(reader, writer, connection):
                pass
        except (_ClientGone, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # close() stops idle keep-alive connections this way
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: int) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        record = RecordedRequest(method, target, headers, body, time.time(), connection=connection)
        self.requests.append(record)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(_json(record.masked()) + "\n")
        keep_alive = headers.get("connection", "").lower() != "close"
        dialect = dialect_of(target)
        if self.api_key is not None and self.api_key not in (
            headers.get("x-api-key"),
            headers.get("authorization", "").removeprefix("Bearer "),
        ):
            await self._plain(writer, 401, error_body(dialect or self.dialect, 401, {"message": "invalid api key"}))
        elif method == "GET" and target.split("?", 1)[0].rstrip("/").endswith("/models"):
            await self._plain(writer, 200, self._models_body(headers))
        elif method == "POST" and dialect is not None:
            return await self._model_call(writer, record, dialect) and keep_alive
        else:
            await self._plain(writer, 404, error_body(self.dialect, 404, {"message": f"no route {method} {target}"}))
        return keep_alive

    def _models_body(self, headers: dict[str, str]) -> bytes:
        if "anthropic-version" in headers or self.dialect == "anthropic-messages":
            rows: list[dict[str, Any]] = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"} for m in self.models
            ]
            return _json({"data": rows, "has_more": False, "first_id": self.models[0], "last_id": self.models[-1]}).encode()
        rows = [{"id": m, "object": "model", "created": 1_760_000_000, "owned_by": "fake"} for m in self.models]
        return _json({"object": "list", "data": rows}).encode()

    async def _plain(self, writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        head = [
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            "x-request-id: req_fake",
            *(f"{k}: {v}" for k, v in (extra or {}).items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

    async def _model_call(self, writer: asyncio.StreamWriter, record: RecordedRequest, dialect: str) -> bool:
        step = self._take_step(record)
        if "status" in step and int(step["status"]) >= 400:
            status = int(step["status"])
            await self._plain(writer, status, error_body(dialect, status, step.get("error") or {}), step.get("headers"))
            return True
        if dialect == "chat-completions" and not (record.json or {}).get("stream") and "raw" not in step:
            await self._plain(writer, 200, _json(chat_completion(step, record.json or {}, len(self.calls))).encode())
            return True
        content_type = step.get("content_type", "text/event-stream; charset=utf-8")
        head = [
            "HTTP/1.1 200 OK",
            f"content-type: {content_type}",
            "transfer-encoding: chunked",
            "cache-control: no-cache",
            "x-request-id: req_fake",
            *(f"{k}: {v}" for k, v in (step.get("headers") or {}).items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            complete = await self._stream(writer, step, record, dialect)
        except (ConnectionError, _ClientGone):
            record.disconnected_at = time.time()
            raise _ClientGone() from None
        return complete

    async def _stream(self, writer: asyncio.StreamWriter, step: dict[str, Any], record: RecordedRequest, dialect: str) -> bool:
        """Write the step's events; False when the connection was deliberately broken."""
        if "raw" in step:
            body = step["raw"].encode()
            if "split_at" in step:
                cut = int(step["split_at"])
                await self._chunk(writer, body[:cut], step)
                await self._chunk(writer, body[cut:], step)
            else:
                await self._chunk(writer, body, step)
            await self._end(writer)
            return True
        events = RENDERERS[dialect](step, record.json or {}, len(self.calls))
        if "stream_error" in step:
            events = [*events[: max(len(events) // 2, 1)], stream_error_event(dialect, step["stream_error"])]
        for number, event in enumerate(events):
            if "gate" in step and number == int(step.get("gate_after", 0)):
                self.gate_reached(step["gate"]).set()
                await self._gates.setdefault(step["gate"], asyncio.Event()).wait()
            if number == step.get("drop_after"):
                writer.transport.abort()
                record.disconnected_at = time.time()
                return False
            if number == step.get("end_after"):
                break
            if number == step.get("stall_after"):
                await asyncio.sleep(float(step.get("stall_ms", 1000)) / 1000)
            if number == step.get("malformed_after"):
                await self._chunk(writer, b'this line has no colon\ndata: {"not json\n\n', step)
            await self._chunk(writer, sse_bytes(event), step)
        if "hold_open" in step:  # the answer is whole but its body not ended, as a proxy may hold it
            await self._gates.setdefault(step["hold_open"], asyncio.Event()).wait()
        await self._end(writer)
        return True

    async def _chunk(self, writer: asyncio.StreamWriter, data: bytes, step: dict[str, Any]) -> None:
        delay = float(step.get("delay_ms", 0)) / 1000
        size = int(step.get("byte_chunk", 0)) or len(data)
        for start in range(0, len(data), size):
            if delay:
                await asyncio.sleep(delay)
            piece = data[start : start + size]
            if writer.transport.is_closing():
                raise _ClientGone()
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()

    async def _end(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


class ThreadedFakeServer:
    """``FakeModelServer`` on its own event loop in a background thread, for synchronous callers."""

    def __init__(self, steps: list[dict[str, Any]] | None = None, **options: Any) -> None:
        self.server = FakeModelServer(list(steps or []), **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-model-server", daemon=True)

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def load_steps(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    steps = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(steps, list):
        raise SystemExit(f'{path}: expected a list of steps or {{"steps": [...]}}')
    return steps


async def _serve_forever(server: FakeModelServer) -> None:
    await server.start()
    print(server.base_url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's flags (shared by ``roder dev fake-server`` and ``python -m``)."""
    parser.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="chat-completions",
        help="shape of GET /models answers (POSTs are answered in the dialect of their path)",
    )
    parser.add_argument("--script", type=Path, help='JSON file with {"steps": [...]}')
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", action="append", dest="models", help="model id to list (repeatable)")
    parser.add_argument("--api-key", help="answer 401 to requests without this key")
    parser.add_argument("--log", type=Path, help="append every request (keys masked) to this JSON-lines file")


def serve(args: argparse.Namespace) -> int:
    """Print the base URL on stdout's first line and serve until SIGTERM or Ctrl-C."""
    server = FakeModelServer(
        load_steps(args.script) if args.script else [],
        dialect=args.dialect,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        log_path=args.log,
        **({"models": tuple(args.models)} if args.models else {}),
    )
    asyncio.run(_serve_forever(server))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roder_core.testing.fake_server", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
