"""Canonical request -> Chat Completions request JSON (``POST /chat/completions``)."""

from __future__ import annotations

from typing import Any

from roder_core.ir import (
    AgentInferenceRequest,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from roder_core.providers.catalog import Quirks
from roder_core.providers.wire import CHAT_CALL_ID_LENGTH, arguments_json, data_url, stored_blocks, wire_call_id
from roder_ext_chat_completions import DIALECT

#: Where a tool call's ``extra_content`` (Gemini's thought signature) is kept in provider_data.
EXTRA_CONTENT_KEY = f"{DIALECT}/extra_content"
#: Where OpenRouter's ``reasoning_details`` are kept in a reasoning part's provider_data.
DETAILS_KEY = f"{DIALECT}/reasoning_details"


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(part)}}


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in message.parts):
        return message.text()
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append(_image(part))
    return content


def _tool_call(part: ToolCallPart) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": wire_call_id(part.call_id, CHAT_CALL_ID_LENGTH),
        "type": "function",
        "function": {"name": part.name, "arguments": arguments_json(part.arguments)},
    }
    extra = (part.provider_data or {}).get(EXTRA_CONTENT_KEY)
    if isinstance(extra, dict):
        call["extra_content"] = extra  # Gemini 3's thought_signature, sent back as received
    return call


def _assistant(message: Message, quirks: Quirks) -> dict[str, Any] | None:
    """The assistant message, with what its provider needs back: ``reasoning_content`` on a
    tool-call turn (DeepSeek and Kimi in thinking mode answer 400 without it; their documented
    order is content, reasoning_content, tool_calls), OpenRouter's ``reasoning_details``, and each
    call's ``extra_content``."""
    text = message.text()
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    if not text and not calls:
        return None  # reasoning only: nothing a model may be handed back alone
    reasoning = [p for p in message.parts if isinstance(p, ReasoningPart)]
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    thought = "".join(p.text for p in reasoning)
    if quirks.reasoning_replay and calls and thought:
        entry["reasoning_content"] = thought
    details = [d for p in reasoning for block in stored_blocks(p, DIALECT) for d in block.get("details", [])]
    if details:
        entry["reasoning_details"] = details
    if calls:
        entry["tool_calls"] = [_tool_call(c) for c in calls]
    return entry


def _tool_results(message: Message) -> list[dict[str, Any]]:
    """One ``tool`` message per result; images (which tool messages cannot carry) follow in a
    user message."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": wire_call_id(part.call_id, CHAT_CALL_ID_LENGTH),
                    "content": part.text or "(no output)",
                }
            )
            images.extend(_image(image) for image in part.images)
    if images:
        out.append({"role": "user", "content": [{"type": "text", "text": "Images returned by the tools above:"}, *images]})
    return out


def _as_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _add(messages: list[dict[str, Any]], entry: dict[str, Any]) -> None:
    """Append ``entry``, merging a user message into a user message right before it.

    Two user messages meet after an interrupt (the assistant message between them had nothing
    sendable), or when tool images precede a follow-up; strict chat templates (Mistral, Llama,
    Gemma) reject two user turns in a row."""
    last = messages[-1] if messages else None
    if last is None or entry["role"] != "user" or last["role"] != "user":
        messages.append(entry)
    elif isinstance(last["content"], str) and isinstance(entry["content"], str):
        last["content"] = f"{last['content']}\n\n{entry['content']}"
    else:
        last["content"] = [*_as_parts(last["content"]), *_as_parts(entry["content"])]


def encode_messages(request: AgentInferenceRequest, quirks: Quirks) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": quirks.system_role, "content": request.system})
    for message in request.messages:
        if message.role == "user":
            _add(messages, {"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            entry = _assistant(message, quirks)
            if entry is not None:
                messages.append(entry)
        else:
            for entry in _tool_results(message):
                _add(messages, entry)
    return messages


def _mark_cache_breakpoints(messages: list[dict[str, Any]]) -> None:
    """``cache_control`` on the system prompt and on the last two user or tool messages (the
    newest writes this request's prefix, the one before it is where the previous request ended),
    as Anthropic's own dialect does. Every non-assistant content is sent as text parts, so a
    message is the same bytes whether or not it carries a breakpoint in this request."""
    for message in messages:
        if message["role"] != "assistant":
            message["content"] = _as_parts(message["content"])
    marked = [m for m in messages if m["role"] in ("system", "developer")][:1]
    marked += [m for m in messages if m["role"] in ("user", "tool")][-2:]
    for message in marked:
        texts = [p for p in message["content"] if p.get("type") == "text"]
        if texts:
            texts[-1]["cache_control"] = {"type": "ephemeral"}


def encode_request(
    request: AgentInferenceRequest,
    quirks: Quirks,
    *,
    effort: str | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    messages = encode_messages(request, quirks)
    if quirks.cache_control and "claude" in request.model.lower():
        _mark_cache_breakpoints(messages)
    body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
    if quirks.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
        body["tool_choice"] = "auto"
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if max_tokens:
        body[quirks.max_tokens_field] = max_tokens
    if effort and quirks.reasoning_format == "reasoning_effort":
        body["reasoning_effort"] = effort
    elif effort and quirks.reasoning_format == "openrouter":
        body["reasoning"] = {"effort": effort}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.logprobs is not None:  # per-token log probabilities of the answer's text
        body["logprobs"] = True
        if request.logprobs > 0:
            body["top_logprobs"] = request.logprobs
    if request.token_ids:  # vLLM: the prompt's and the answer's token ids, in the stream
        body["return_token_ids"] = True
    return body
