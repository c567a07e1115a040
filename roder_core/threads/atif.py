"""ATIF export: a thread as an Agent Trajectory Interchange Format document (Harbor's RFC 0001).

One ATIF step per user message, per model response (its text, reasoning and tool calls, with
the results of those calls as the step's observation and that call's token usage as its
metrics) and per system event (errors, compactions). When the batch recorded what the model
was sent, the first step is the system prompt and the tool schemas are in ``agent.extra``.
``validate_atif`` checks the fields the RFC requires, so an export that would be rejected by
ATIF readers fails here first.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from roder_core.ir import (
    AgentMessageItem,
    CompactionItem,
    ErrorItem,
    Item,
    ReasoningItem,
    Thread,
    ToolCallItem,
    ToolResultItem,
    UserMessageItem,
)
from roder_core.threads.events import RuntimeEvent
from roder_core.threads.trajectory import Timings, model_responses

SCHEMA_VERSION = "ATIF-v1.4"
SOURCES = ("system", "user", "agent")


def _when(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat().replace("+00:00", "Z")


def _metrics(call: dict[str, Any] | None) -> dict[str, Any] | None:
    if call is None:
        return None
    usage = call["usage"]
    metrics: dict[str, Any] = {
        "prompt_tokens": usage.get("inputTokens", 0),
        "completion_tokens": usage.get("outputTokens", 0),
        "cached_tokens": usage.get("cachedInputTokens", 0),
        "cost_usd": usage.get("costUsd", 0.0),
    }
    tokens = call.get("logprobs")
    if tokens:  # ATIF keeps the sampled tokens' logprobs as numbers; the rest goes in extra
        metrics["logprobs"] = [t["logprob"] for t in tokens]
        metrics["extra"] = {
            "tokens": [t.get("token") for t in tokens],
            "top_logprobs": [t.get("top_logprobs", []) for t in tokens],
        }
        if all("id" in t for t in tokens):
            metrics["completion_token_ids"] = [t["id"] for t in tokens]
    ids = call.get("tokenIds") or {}
    if ids.get("prompt") is not None:
        metrics["prompt_token_ids"] = ids["prompt"]
    if ids.get("completion"):  # the server's own ids win over those read from logprob tokens
        metrics["completion_token_ids"] = ids["completion"]
    return metrics


def _agent_step(
    group: list[Item], results: dict[str, ToolResultItem], model: str, call: dict[str, Any] | None, timings: Timings
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "source": "agent",
        "model_name": model or None,
        "message": "\n\n".join(i.text for i in group if isinstance(i, AgentMessageItem) and i.text),
    }
    reasoning = "\n\n".join((i.text or i.summary) for i in group if isinstance(i, ReasoningItem))
    if reasoning:
        step["reasoning_content"] = reasoning
    calls = [i for i in group if isinstance(i, ToolCallItem)]
    if calls:
        step["tool_calls"] = [{"tool_call_id": c.call_id, "function_name": c.name, "arguments": c.arguments} for c in calls]
        step["observation"] = {
            "results": [{"source_call_id": c.call_id, "content": results[c.call_id].text} for c in calls if c.call_id in results]
        }
    metrics = _metrics(call)
    if metrics is not None:
        step["metrics"] = metrics
    step["timestamp"] = _when(timings.started.get(group[0].id))
    return step


def _other_step(item: Item, timings: Timings) -> dict[str, Any] | None:
    if isinstance(item, UserMessageItem):
        step: dict[str, Any] = {"source": "user", "message": item.text}
    elif isinstance(item, ErrorItem):
        step = {"source": "system", "message": f"error ({item.kind}): {item.message}"}
    elif isinstance(item, CompactionItem):
        step = {"source": "system", "message": f"context compacted: {item.summary}"}
    else:
        return None  # tool results are observations of their call; UI-only items are left out
    step["timestamp"] = _when(timings.started.get(item.id))
    return step


def build_atif(
    thread: Thread,
    events: Iterable[RuntimeEvent] = (),
    *,
    version: str = "",
    context: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``context``: ``{"system": str, "tools": [...]}`` as the model saw them (batch rollouts)."""
    from roder_core import __version__

    timings = Timings(events)
    steps: list[dict[str, Any]] = []
    if context and context.get("system"):
        steps.append({"source": "system", "message": context["system"]})
    for turn in thread.turns:
        results = {i.call_id: i for i in turn.items if isinstance(i, ToolResultItem)}
        calls = iter(timings.calls.get(turn.id, []))
        for group in model_responses(turn.items):
            if isinstance(group, list):
                steps.append(_agent_step(group, results, thread.model, next(calls, None), timings))
            elif (step := _other_step(group, timings)) is not None:
                steps.append(step)
    for number, step in enumerate(steps, start=1):
        step["step_id"] = number
        for key in [k for k, v in step.items() if v is None]:
            del step[key]
    usage = thread.usage
    agent: dict[str, Any] = {
        "name": "roder",
        "version": version or __version__,
        "model_name": thread.model,
        "extra": {"provider": thread.provider},
    }
    if context and context.get("tools") is not None:
        agent["extra"]["tool_definitions"] = context["tools"]
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": thread.id,
        "agent": agent,
        "steps": [{"step_id": s.pop("step_id"), **s} for s in steps],
        "final_metrics": {
            "total_prompt_tokens": usage.input_tokens,
            "total_completion_tokens": usage.output_tokens,
            "total_cached_tokens": usage.cached_input_tokens,
            "total_cost_usd": usage.cost_usd,
            "total_steps": len(steps),
        },
    }
    if extra:
        document["extra"] = extra
    return document


def validate_atif(document: Any) -> list[str]:
    """What makes ``document`` invalid ATIF (empty: valid), after the RFC's required fields."""
    problems: list[str] = []
    if not isinstance(document, dict):
        return ["the trajectory is not a JSON object"]
    if not str(document.get("schema_version", "")).startswith("ATIF-v"):
        problems.append("schema_version must be 'ATIF-v<major>.<minor>'")
    if not isinstance(document.get("session_id"), str) or not document["session_id"]:
        problems.append("session_id must be a non-empty string")
    agent = document.get("agent")
    if not isinstance(agent, dict) or not all(isinstance(agent.get(k), str) for k in ("name", "version")):
        problems.append("agent must have string name and version")
    steps = document.get("steps")
    if not isinstance(steps, list) or not steps:
        return [*problems, "steps must be a non-empty list"]
    for index, step in enumerate(steps, start=1):
        where = f"steps[{index - 1}]"
        if not isinstance(step, dict):
            problems.append(f"{where} is not an object")
            continue
        if step.get("step_id") != index:
            problems.append(f"{where}.step_id must be {index} (sequential from 1)")
        if step.get("source") not in SOURCES:
            problems.append(f"{where}.source must be one of {', '.join(SOURCES)}")
        if not isinstance(step.get("message"), str):
            problems.append(f"{where}.message must be a string")
        if step.get("source") != "agent":
            problems += [
                f"{where}.{k} is only allowed on agent steps" for k in ("tool_calls", "metrics", "reasoning_content") if k in step
            ]
        for call in step.get("tool_calls", []):
            if not (
                isinstance(call.get("tool_call_id"), str)
                and isinstance(call.get("function_name"), str)
                and isinstance(call.get("arguments"), dict)
            ):
                problems.append(f"{where}.tool_calls needs tool_call_id, function_name and an arguments object")
        observation = step.get("observation")
        if observation is not None and not isinstance(observation.get("results"), list):
            problems.append(f"{where}.observation.results must be a list")
    return problems
