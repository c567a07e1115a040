"""Canonical request -> Anthropic Messages request JSON (``POST /messages``).

Tool results travel as ``tool_result`` blocks in a user message; earlier thinking blocks are sent
back exactly as received (text plus signature, or the redacted data). Three ``cache_control``
breakpoints (the system prompt, which follows the tools, and the last two user messages) make
every request read all of the previous one from the prompt cache.
"""

from __future__ import annotations

from typing import Any

from roder_core.ir import (
    AgentInferenceRequest,
    ImagePart,
    Message,
    ModelProfile,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from roder_core.providers.wire import ANTHROPIC_CALL_ID_LENGTH, stored_blocks, wire_call_id
from roder_ext_anthropic import DIALECT

EPHEMERAL = {"type": "ephemeral"}
#: Thinking budget per reasoning effort (the budget form).
THINKING_BUDGETS = {"minimal": 1_024, "low": 4_096, "medium": 10_000, "high": 32_000}
#: The API's smallest budget.
MIN_BUDGET = 1_024
#: Part of max_tokens always left for the answer (budget_tokens counts against max_tokens).
ANSWER_SHARE = 4
MIN_ANSWER_TOKENS = 4_096
#: Roder's efforts as ``output_config.effort`` values (adaptive thinking).
EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
CACHEABLE = frozenset({"text", "image", "tool_use", "tool_result"})
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": part.mime_type, "data": part.data_base64}}


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
    return blocks


def _assistant_blocks(message: Message, thinking: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if thinking:  # without thinking enabled, earlier thinking blocks may (and should) be left out
                blocks.extend(dict(block) for block in stored_blocks(part, DIALECT))
        elif isinstance(part, TextPart) and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": wire_call_id(part.call_id, ANTHROPIC_CALL_ID_LENGTH),
                    "name": part.name,
                    "input": part.arguments,
                }
            )
    return _sendable(blocks)


def _sendable(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message the API accepts: unsigned thinking left out (the API rejects it), and
    trailing thinking too ("the final block in an assistant message cannot be thinking"). An
    interrupt or crash after a signed thinking block but before any text or tool call stored such
    a message; with nothing else in it, the message is dropped (the caller merges the user
    messages that then meet)."""
    kept = [b for b in blocks if b.get("type") != "thinking" or b.get("signature")]
    while kept and kept[-1].get("type") in THINKING_TYPES:
        kept.pop()
    return kept


def _result_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if not isinstance(part, ToolResultPart):
            continue
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_call_id(part.call_id, ANTHROPIC_CALL_ID_LENGTH)}
        if part.images:
            block["content"] = [
                *([{"type": "text", "text": part.text}] if part.text else []),
                *(_image(image) for image in part.images),
            ]
        elif part.text:
            block["content"] = part.text
        if part.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks


def encode_messages(request: AgentInferenceRequest, *, thinking: bool) -> list[dict[str, Any]]:
    """Messages with strictly alternating roles (tool results are user turns, so a steer or
    follow-up right after them is merged into the same user message)."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(message, thinking)
        else:
            role, blocks = "user", (_user_blocks(message) if message.role == "user" else _result_blocks(message))
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _mark_cache_breakpoints(messages: list[dict[str, Any]]) -> None:
    """Breakpoints on the last cacheable block of the last two user messages: the newest one
    writes this request's prefix, the one before it is where the previous request ended, so the
    whole history is read from the cache (0.1x) even when a step added more blocks than the
    API looks back over (20), and only what is new is written (1.25x)."""
    users = [m for m in messages if m["role"] == "user"][-2:]
    for message in users:
        for block in reversed(message["content"]):
            if block.get("type") in CACHEABLE:
                block["cache_control"] = EPHEMERAL
                break


def thinking_budget(effort: str | None, max_tokens: int) -> int:
    """The budget form's ``budget_tokens`` for ``effort``: never more than what leaves a quarter
    of ``max_tokens`` (at least 4,096 tokens) for the answer; 0 when that is below the minimum."""
    room = max(max_tokens // ANSWER_SHARE, MIN_ANSWER_TOKENS)
    budget = min(THINKING_BUDGETS.get(effort or "", 0), max_tokens - room)
    return budget if budget >= MIN_BUDGET else 0


def thinking_config(profile: ModelProfile, effort: str | None, max_tokens: int) -> dict[str, Any]:
    """``thinking`` (and ``output_config``) fields for this model, from the model table's data."""
    if not profile.reasoning or effort not in EFFORTS:
        return {}  # no effort chosen: no thinking, as with every dialect
    if profile.thinking == "adaptive":
        return {"thinking": {"type": "adaptive"}, "output_config": {"effort": EFFORTS[effort]}}
    budget = thinking_budget(effort, max_tokens)
    return {"thinking": {"type": "enabled", "budget_tokens": budget}} if budget else {}


def encode_request(request: AgentInferenceRequest, profile: ModelProfile, *, effort: str | None) -> dict[str, Any]:
    max_tokens = request.max_output_tokens or profile.max_output_tokens
    config = thinking_config(profile, effort, max_tokens)
    thinking = bool(config)
    messages = encode_messages(request, thinking=thinking)
    _mark_cache_breakpoints(messages)
    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "messages": messages, "stream": True}
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]
        body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": not request.parallel_tool_calls}
    # No temperature: the Messages API no longer takes sampling parameters (the official SDK's
    # request type has none; Opus 4.7 answers 400 to them).
    body.update(config)
    return body
