"""Anthropic Messages stream -> canonical events.

``message_start`` -> (``content_block_start`` -> ``content_block_delta``* -> ``content_block_stop``)*
-> ``message_delta`` -> ``message_stop``, with ``ping`` and ``error`` events anywhere. Tool input
arrives as ``input_json_delta`` fragments, parsed at the block's stop; thinking blocks are kept
verbatim (with their signature) for the next request. Usage: ``input_tokens`` excludes cache
reads and writes, which Roder adds back so ``Usage.input_tokens`` is the whole prompt.
"""

from __future__ import annotations

from typing import Any

from roder_core.ir import (
    CompletedEvent,
    InferenceEvent,
    MessageDelta,
    ReasoningDelta,
    StopReason,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from roder_core.providers.failures import ErrorFactory
from roder_core.providers.sse import SSEEvent
from roder_core.providers.wire import Pieces, event_json, parse_arguments, reasoning_key, truncated
from roder_ext_anthropic import DIALECT

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class AnthropicDecoder:
    def __init__(self, errors: ErrorFactory) -> None:
        self.errors = errors
        self.done = False
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, int] = {}
        self._stop = "end_turn"
        self._stopped = False
        self._calls: list[ToolCallEvent] = []

    def feed(self, event: SSEEvent) -> list[InferenceEvent]:
        data = event_json(event, self.errors.provider)
        if data is None:
            return []
        kind = str(data.get("type") or event.event)
        if kind == "content_block_delta":
            return self._delta(int(data.get("index", 0)), data.get("delta") or {})
        if kind == "content_block_start":
            return self._start(int(data.get("index", 0)), data.get("content_block") or {})
        if kind == "content_block_stop":
            return self._stop_block(int(data.get("index", 0)))
        if kind == "message_start":
            self._add_usage((data.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self._stop = str((data.get("delta") or {}).get("stop_reason") or self._stop)
            self._stopped = True
            self._add_usage(data.get("usage"))
        elif kind == "message_stop":
            return self._complete()
        elif kind == "error":
            error = data.get("error") or {}
            raise self.errors.from_stream_error(str(error.get("type") or ""), str(error.get("message") or "error"))
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[InferenceEvent]:
        block_type = block.get("type")
        if block_type == "text":
            self._blocks[index] = {"type": "text"}
            return [MessageDelta(text=block["text"])] if block.get("text") else []
        if block_type == "thinking":
            thinking = str(block.get("thinking") or "")
            self._blocks[index] = {"type": "thinking", "thinking": Pieces(thinking), "signature": block.get("signature") or ""}
            return [ReasoningDelta(text=thinking)] if thinking else []
        if block_type == "redacted_thinking":
            stored = {"type": "redacted_thinking", "data": block.get("data", "")}
            return [ReasoningDelta(provider_data={reasoning_key(DIALECT, index): stored})]
        if block_type == "tool_use":
            self._blocks[index] = {"type": "tool_use", "id": block.get("id", ""), "name": block.get("name", ""), "json": Pieces()}
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[InferenceEvent]:
        block = self._blocks.get(index, {})
        delta_type = delta.get("type")
        if delta_type == "text_delta":
            return [MessageDelta(text=delta["text"])] if delta.get("text") else []
        if delta_type == "thinking_delta" and block:
            block["thinking"].add(delta.get("thinking", ""))
            return [ReasoningDelta(text=delta["thinking"])] if delta.get("thinking") else []
        if delta_type == "signature_delta" and block:
            block["signature"] = delta.get("signature", "")
        elif delta_type == "input_json_delta" and block:
            block["json"].add(delta.get("partial_json", ""))
        return []

    def _stop_block(self, index: int) -> list[InferenceEvent]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        if block["type"] == "thinking":
            stored = {"type": "thinking", "thinking": block["thinking"].text(), "signature": block["signature"]}
            return [ReasoningDelta(provider_data={reasoning_key(DIALECT, index): stored})]
        if block["type"] == "tool_use":
            arguments, problem = parse_arguments(block["json"].text())
            # Held until the stop reason is known: a call cut by max_tokens is never run.
            self._calls.append(
                ToolCallEvent(call_id=block["id"], name=block["name"], arguments=arguments, arguments_error=problem)
            )
        return []

    def _complete(self) -> list[InferenceEvent]:
        self.done = True
        stop = STOP_REASONS.get(self._stop, "other")
        calls = self._calls
        if stop == "max_tokens" and calls:
            calls = [truncated(c) if c.arguments_error or c is calls[-1] else c for c in calls]
        return [*calls, UsageEvent(usage=self._total()), CompletedEvent(stop_reason=stop)]

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for name in USAGE_FIELDS:
                if isinstance(usage.get(name), int):
                    self._usage[name] = usage[name]

    def _total(self) -> Usage:
        read = self._usage.get("cache_read_input_tokens", 0)
        write = self._usage.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + write,
            output_tokens=self._usage.get("output_tokens", 0),
            cached_input_tokens=read,
            cache_write_tokens=write,
        )

    def finish(self) -> list[InferenceEvent]:
        """A body that ends after ``message_delta`` (its stop reason and final usage) but without
        ``message_stop`` is complete, as the official SDK treats it; earlier ends are drops."""
        if self._stopped and not self._blocks:
            return self._complete()
        raise self.errors.stream_ended()
