"""OpenAI Responses stream (typed ``event:``/``data:`` pairs) -> canonical events.

Text comes from ``response.output_text.delta``; reasoning summaries from
``response.reasoning_summary_text.delta`` (raw reasoning from ``response.reasoning_text.delta``);
function calls from ``response.output_item.done`` (arguments streamed before as
``response.function_call_arguments.delta``); the stream ends with ``response.completed``,
``response.incomplete`` or ``response.failed`` (there is no ``[DONE]``).
"""

from __future__ import annotations

from typing import Any

from roder_core.ir import (
    CompletedEvent,
    InferenceEvent,
    LogprobsEvent,
    MessageDelta,
    ReasoningDelta,
    StopReason,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from roder_core.providers.failures import ErrorFactory
from roder_core.providers.sse import SSEEvent
from roder_core.providers.wire import Pieces, event_json, parse_arguments, reasoning_key, token_logprobs, truncated
from roder_ext_openai_responses import DIALECT

INCOMPLETE_REASONS: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


def responses_usage(data: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        cached_input_tokens=int((data.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        reasoning_tokens=int((data.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
    )


class ResponsesDecoder:
    def __init__(self, errors: ErrorFactory) -> None:
        self.errors = errors
        self.done = False
        self._streamed: set[str] = set()  # items whose text or summary came as deltas
        self._summary_parts: dict[str, int] = {}
        self._arguments: dict[str, Pieces] = {}
        self._calls: list[ToolCallEvent] = []
        #: Function calls begun but not finished (a response cut by its output limit).
        self._open_calls: dict[str, dict[str, Any]] = {}

    def feed(self, event: SSEEvent) -> list[InferenceEvent]:
        data = event_json(event, self.errors.provider)
        if data is None:
            return []
        kind = str(data.get("type") or event.event)
        item_id = str(data.get("item_id", ""))
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._streamed.add(item_id)
            events: list[InferenceEvent] = [MessageDelta(text=data["delta"])] if data.get("delta") else []
            tokens = token_logprobs(data.get("logprobs"))
            return [*events, LogprobsEvent(tokens=tokens)] if tokens else events
        if kind == "response.reasoning_summary_text.delta":
            return self._summary_delta(item_id, int(data.get("summary_index") or 0), data.get("delta", ""))
        if kind == "response.reasoning_text.delta":
            self._streamed.add(item_id)
            return [ReasoningDelta(text=data["delta"])] if data.get("delta") else []
        if kind == "response.function_call_arguments.delta":
            self._arguments.setdefault(item_id, Pieces()).add(str(data.get("delta", "")))
            return []
        if kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call":
                self._open_calls[str(item.get("id", ""))] = item
            return []
        if kind == "response.output_item.done":
            return self._item_done(data.get("item") or {})
        if kind in ("response.completed", "response.incomplete"):
            return self._completed(data.get("response") or {})
        if kind == "response.failed":
            failed = (data.get("response") or {}).get("error") or {}
            raise self.errors.from_stream_error(str(failed.get("code") or ""), str(failed.get("message") or "failed"))
        if kind == "error":
            error: dict[str, Any] = data["error"] if isinstance(data.get("error"), dict) else data
            raise self.errors.from_stream_error(
                str(error.get("code") or error.get("type") or ""), str(error.get("message") or "error")
            )
        return []

    def _summary_delta(self, item_id: str, index: int, text: str) -> list[InferenceEvent]:
        self._streamed.add(item_id)
        previous = self._summary_parts.get(item_id)
        self._summary_parts[item_id] = index
        if previous is not None and index != previous:
            text = "\n\n" + text  # summary parts are separate paragraphs
        return [ReasoningDelta(text=text, summary=True)] if text else []

    def _item_done(self, item: dict[str, Any]) -> list[InferenceEvent]:
        item_type, item_id = item.get("type"), str(item.get("id", ""))
        if item_type == "function_call":
            self._open_calls.pop(item_id, None)
            self._calls.append(self._call(item))
            return []
        events: list[InferenceEvent] = []
        if item_type == "reasoning":
            summary = [s for s in item.get("summary") or [] if isinstance(s, dict)]
            if item_id not in self._streamed:
                text = "\n\n".join(str(s.get("text", "")) for s in summary if s.get("text"))
                if text:
                    events.append(ReasoningDelta(text=text, summary=True))
            if item.get("encrypted_content"):
                block = {"summary": summary, "encrypted_content": item["encrypted_content"]}
                events.append(ReasoningDelta(provider_data={reasoning_key(DIALECT, item_id): block}))
        elif item_type == "message" and item_id not in self._streamed:
            text = "".join(str(c.get("text") or c.get("refusal") or "") for c in item.get("content") or [] if isinstance(c, dict))
            if text:
                events.append(MessageDelta(text=text))
        return events

    def _call(self, item: dict[str, Any]) -> ToolCallEvent:
        item_id = str(item.get("id", ""))
        arguments, problem = parse_arguments(item.get("arguments") or self._arguments.get(item_id, Pieces()).text())
        return ToolCallEvent(
            call_id=str(item.get("call_id") or item_id),
            name=str(item.get("name", "")),
            arguments=arguments,
            arguments_error=problem,
        )

    def _completed(self, response: dict[str, Any]) -> list[InferenceEvent]:
        """Calls are held to here: one the output limit cut off (never finished, or unparsable)
        is marked truncated and never run."""
        self.done = True
        calls = self._calls
        reason = (response.get("incomplete_details") or {}).get("reason")
        if response.get("status") == "incomplete" and reason == "max_output_tokens":
            unfinished = [truncated(self._call(item)) for item in self._open_calls.values()]
            last = None if unfinished or not calls else calls[-1]
            calls = [*(truncated(c) if c.arguments_error or c is last else c for c in calls), *unfinished]
        events: list[InferenceEvent] = list(calls)
        if isinstance(response.get("usage"), dict):
            events.append(UsageEvent(usage=responses_usage(response["usage"])))
        if response.get("status") == "incomplete":
            stop: StopReason = INCOMPLETE_REASONS.get(str(reason), "other")
        else:
            stop = "tool_use" if calls else "end_turn"
        events.append(CompletedEvent(stop_reason=stop))
        return events

    def finish(self) -> list[InferenceEvent]:
        raise self.errors.stream_ended()
