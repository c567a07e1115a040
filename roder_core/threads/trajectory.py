"""Eval trajectories: one JSON document per thread with every message, tool call (arguments and
result), usage and timing.

``build_trajectory(thread, events)`` works from a thread alone (live or loaded) and adds per-item
timestamps and per-model-call usage (one entry per model response, whose tool calls are grouped
under it) when the thread's events are given (``ThreadStore.events``,
or collected live from the event bus). ``roder sessions export --format json`` writes it; batch
runs can write the same shape. The schema is versioned (``roder.trajectory/1``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from roder_core.ir import (
    AgentMessageItem,
    ApprovalItem,
    CompactionItem,
    ErrorItem,
    Item,
    ReasoningItem,
    Thread,
    ToolCallItem,
    ToolResultItem,
    Turn,
    UserMessageItem,
)
from roder_core.threads.events import ItemCompleted, ItemStarted, RuntimeEvent, TokenUsageUpdated
from roder_core.turn.context import history_to_messages

SCHEMA = "roder.trajectory/1"


class Timings:
    """When each item started and completed, and the usage of each model call, from events."""

    def __init__(self, events: Iterable[RuntimeEvent]) -> None:
        self.started: dict[str, float] = {}
        self.completed: dict[str, float] = {}
        self.calls: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            if isinstance(event, ItemStarted):
                self.started.setdefault(event.item.id, event.ts)
            elif isinstance(event, ItemCompleted):
                self.completed[event.item.id] = event.ts
            elif isinstance(event, TokenUsageUpdated):
                call = {"at": event.ts, "usage": event.usage.wire(), "contextTokens": event.context_tokens}
                if event.logprobs:
                    call["logprobs"] = event.logprobs
                if event.token_ids:
                    call["tokenIds"] = event.token_ids
                self.calls.setdefault(event.turn_id, []).append(call)

    def stamp(self, step: dict[str, Any], item: Item) -> dict[str, Any]:
        started = self.started.get(item.id)
        completed = self.completed.get(item.id)
        if started is not None:
            step["at"] = started
        if started is not None and completed is not None and "durationMs" not in step:
            step["durationMs"] = int((completed - started) * 1000)
        return step


def _step(item: Item, results: dict[str, ToolResultItem], timings: Timings) -> dict[str, Any] | None:
    if isinstance(item, UserMessageItem):
        step: dict[str, Any] = {"type": "user", "text": item.text, "steer": item.steer}
        if item.attachments:
            step["attachments"] = [a.wire() for a in item.attachments]
    elif isinstance(item, AgentMessageItem):
        step = {"type": "assistant", "text": item.text}
    elif isinstance(item, ReasoningItem):
        step = {"type": "reasoning", "text": item.text, "summary": item.summary}
    elif isinstance(item, ToolCallItem):
        step = {"type": "tool_call", "callId": item.call_id, "name": item.name, "arguments": item.arguments}
        result = results.get(item.call_id)
        if result is not None:
            step["result"] = timings.stamp(
                {
                    "text": result.text,
                    "isError": result.is_error,
                    "data": result.data,
                    **({"durationMs": result.duration_ms} if result.duration_ms is not None else {}),
                },
                result,
            )
    elif isinstance(item, ToolResultItem):
        return None  # attached to its call
    elif isinstance(item, CompactionItem):
        step = {
            "type": "compaction",
            "summary": item.summary,
            "tokensBefore": item.tokens_before,
            "tokensAfter": item.tokens_after,
        }
    elif isinstance(item, ApprovalItem):
        step = {
            "type": "approval",
            "tool": item.request.tool,
            "callId": item.request.call_id,
            "reason": item.request.reason,
            "decision": item.decision.decision if item.decision is not None else None,
        }
    elif isinstance(item, ErrorItem):
        step = {"type": "error", "message": item.message, "kind": item.kind}
    else:  # command executions, file changes, plans, custom state: kept as they are
        step = {"type": item.type, **{k: v for k, v in item.wire().items() if k not in ("type", "id")}}
    step["itemId"] = item.id
    return timings.stamp(step, item)


#: Items a model response is made of; a run of them is one response.
RESPONSE_ITEMS = (AgentMessageItem, ReasoningItem, ToolCallItem)


def model_responses(items: Iterable[Item]) -> list[list[Item] | Item]:
    """The items of a turn with each model response's items grouped: a response is a run of
    reasoning, message and tool-call items (the runtime records them before running the calls,
    so a tool result or a user message always separates two responses)."""
    out: list[list[Item] | Item] = []
    current: list[Item] | None = None
    for item in items:
        if isinstance(item, RESPONSE_ITEMS):
            if current is None:
                current = []
                out.append(current)
            current.append(item)
        else:
            current = None
            out.append(item)
    return out


def _turn(index: int, turn: Turn, timings: Timings) -> dict[str, Any]:
    results = {i.call_id: i for i in turn.items if isinstance(i, ToolResultItem)}
    steps: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    calls = timings.calls.get(turn.id, [])
    for group in model_responses(turn.items):
        if not isinstance(group, list):
            if (step := _step(group, results, timings)) is not None:
                steps.append(step)
            continue
        number = len(responses)
        response: dict[str, Any] = {
            "index": number,
            "itemIds": [i.id for i in group],
            "toolCalls": sum(1 for i in group if isinstance(i, ToolCallItem)),
        }
        if number < len(calls):
            response["usage"] = calls[number]["usage"]
            for key in ("logprobs", "tokenIds"):
                if key in calls[number]:
                    response[key] = calls[number][key]
        responses.append(response)
        for item in group:
            step = _step(item, results, timings)
            if step is not None:
                step["response"] = number
                steps.append(step)
    record: dict[str, Any] = {
        "index": index,
        "id": turn.id,
        "status": turn.status,
        "stopReason": turn.stop_reason,
        "startedAt": turn.started_at,
        "completedAt": turn.completed_at,
        "durationMs": int((turn.completed_at - turn.started_at) * 1000) if turn.completed_at else None,
        "modelCalls": turn.model_calls,
        "usage": turn.usage.wire(),
        "steps": steps,
        #: One entry per model response: its items (tool calls grouped) and its usage.
        "responses": responses,
    }
    if turn.error is not None:
        record["error"] = turn.error.wire()
    if turn.id in timings.calls:
        record["calls"] = timings.calls[turn.id]
    return record


def build_trajectory(
    thread: Thread, events: Iterable[RuntimeEvent] = (), context: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``context``: ``{"system": str, "tools": [...]}``, what the model was sent (batch rollouts
    record it), kept as ``system`` and ``tools``."""
    timings = Timings(events)
    turns = [_turn(index, turn, timings) for index, turn in enumerate(thread.turns, start=1)]
    finished = [t.completed_at for t in thread.turns if t.completed_at]
    return {
        "schema": SCHEMA,
        "thread": thread.header().wire(),
        "usage": thread.usage.wire(),
        "durationMs": int((max(finished) - thread.turns[0].started_at) * 1000) if finished else None,
        "turns": turns,
        "messages": [m.wire() for m in history_to_messages(thread.items(), compacted=False)],
        **({"system": context.get("system", ""), "tools": context.get("tools", [])} if context else {}),
    }
