"""Chat Completions stream (``data: {chunk}`` ... ``data: [DONE]``) -> canonical events.

Tool calls arrive as deltas keyed by ``index`` (id and name first, then argument fragments) and
are emitted whole at the end. Reasoning comes as ``reasoning_content`` (DeepSeek, vLLM) or
``reasoning`` (OpenRouter, Ollama). Usage is the last chunk's ``usage`` when
``stream_options.include_usage`` was sent (Groq puts it under ``x_groq``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from roder_core.ir import (
    CompletedEvent,
    InferenceEvent,
    LogprobsEvent,
    MessageDelta,
    ReasoningDelta,
    StopReason,
    TokenIdsEvent,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from roder_core.providers.failures import ErrorFactory
from roder_core.providers.sse import SSEEvent
from roder_core.providers.wire import Pieces, event_json, parse_arguments, token_logprobs, truncated
from roder_ext_chat_completions.encode import DETAILS_KEY, EXTRA_CONTENT_KEY

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def chat_usage(data: dict[str, Any]) -> Usage:
    prompt_details = data.get("prompt_tokens_details") or {}
    output_details = data.get("completion_tokens_details") or {}
    cost = data.get("cost")
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cached_input_tokens=int(prompt_details.get("cached_tokens") or data.get("prompt_cache_hit_tokens") or 0),
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
        cost_usd=float(cost) if isinstance(cost, int | float) else 0.0,
    )


class _Call:
    __slots__ = ("arguments", "extra", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = Pieces()
        self.extra: dict[str, Any] | None = None


def merge_detail(details: dict[int, dict[str, Any]], fragment: dict[str, Any]) -> None:
    """Fold one streamed ``reasoning_details`` fragment into the one with its ``index``: text,
    summary and encrypted data are concatenated, other fields (type, id, format, signature) kept
    as last sent."""
    index = fragment.get("index", len(details))
    index = index if isinstance(index, int) else len(details)
    merged = details.setdefault(index, {})
    for key, value in fragment.items():
        if key in ("text", "summary", "data") and isinstance(value, str) and isinstance(merged.get(key), str):
            merged[key] += value
        elif value is not None:
            merged[key] = value


def _ids(value: Any) -> list[int] | None:
    """A list of token ids as vLLM sends them (None: absent or not a list of integers)."""
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


class ChatDecoder:
    def __init__(self, errors: ErrorFactory) -> None:
        self.errors = errors
        self.done = False
        self._calls: dict[int, _Call] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._details: dict[int, dict[str, Any]] = {}

    def feed(self, event: SSEEvent) -> list[InferenceEvent]:
        if event.data.strip() == "[DONE]":
            self.done = True
            return self._final()
        chunk = event_json(event, self.errors.provider)
        if chunk is None:
            return []
        error = chunk.get("error")
        if error:
            detail = error if isinstance(error, dict) else {"message": str(error)}
            raise self.errors.from_stream_error(
                str(detail.get("code") or detail.get("type") or ""), str(detail.get("message") or detail)
            )
        usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage")
        if isinstance(usage, dict):
            self._usage = chat_usage(usage)
        events: list[InferenceEvent] = []
        prompt_ids = _ids(chunk.get("prompt_token_ids"))
        if prompt_ids is not None:
            events.append(TokenIdsEvent(prompt=prompt_ids))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(ReasoningDelta(text=reasoning))
            for fragment in delta.get("reasoning_details") or []:
                if isinstance(fragment, dict):
                    merge_detail(self._details, fragment)
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    events.append(MessageDelta(text=text))
            tokens = token_logprobs((choice.get("logprobs") or {}).get("content"))
            if tokens:
                events.append(LogprobsEvent(tokens=tokens))
            completion_ids = _ids(choice.get("token_ids"))
            if completion_ids:
                events.append(TokenIdsEvent(completion=completion_ids))
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    self._tool_delta(call)
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        return events

    def _tool_delta(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        if not isinstance(index, int):  # servers without index send each call whole
            index = len(self._calls)
        call = self._calls.setdefault(index, _Call())
        if delta.get("id"):
            call.id = str(delta["id"])
        function = delta.get("function") or {}
        name = function.get("name")
        if name and name != call.name:
            call.name = name if not call.name else call.name + name
        arguments = function.get("arguments")
        if isinstance(delta.get("extra_content"), dict):  # Gemini 3: the call's thought signature
            call.extra = delta["extra_content"]
        if isinstance(arguments, dict):  # a few servers send the object itself
            call.arguments = Pieces(json.dumps(arguments))
        elif isinstance(arguments, str):
            call.arguments.add(arguments)

    def finish(self) -> list[InferenceEvent]:
        if self._finish is None:
            raise self.errors.stream_ended()
        self.done = True  # some servers close right after the finish_reason chunk
        return self._final()

    def _final(self) -> list[InferenceEvent]:
        events: list[InferenceEvent] = []
        if self._details:  # OpenRouter: kept whole, sent back with this assistant message
            details = [self._details[i] for i in sorted(self._details)]
            events.append(ReasoningDelta(provider_data={DETAILS_KEY: {"details": details}}))
        cut = self._finish == "length"  # the output limit stopped the response mid-call
        last = max(self._calls, default=None)
        for index in sorted(self._calls):
            call = self._calls[index]
            arguments, problem = parse_arguments(call.arguments.text())
            event = ToolCallEvent(
                call_id=call.id or f"call_{uuid.uuid4().hex[:24]}",
                name=call.name,
                arguments=arguments,
                arguments_error=problem,
                provider_data={EXTRA_CONTENT_KEY: call.extra} if call.extra else None,
            )
            events.append(truncated(event) if cut and (problem or index == last) else event)
        if self._usage is not None:
            events.append(UsageEvent(usage=self._usage))
        stop = "tool_use" if self._calls else FINISH_REASONS.get(self._finish or "stop", "other")
        events.append(CompletedEvent(stop_reason=stop))
        return events
