"""Canonical request -> OpenAI Responses request JSON (``POST /responses``).

Requests are stateless (``store: false``): the whole conversation is sent every time, and
reasoning items come back as their ``encrypted_content`` (asked for with ``include``), exactly
as the API returned them, so a reasoning model keeps its chain of thought across tool calls.
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
from roder_core.providers.wire import RESPONSES_CALL_ID_LENGTH, arguments_json, data_url, stored_items, wire_call_id
from roder_ext_openai_responses import DIALECT


def _user(message: Message) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "input_image", "image_url": data_url(part)})
    return {"role": "user", "content": content}


def _assistant(message: Message, reasoning: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            for item_id, block in stored_items(part, DIALECT) if reasoning else []:
                if block.get("encrypted_content"):  # sent with its id, which the API requires
                    items.append(
                        {
                            "type": "reasoning",
                            "id": item_id,
                            "summary": block.get("summary", []),
                            "encrypted_content": block["encrypted_content"],
                        }
                    )
        elif isinstance(part, TextPart) and part.text:
            items.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ToolCallPart):
            items.append(
                {
                    "type": "function_call",
                    "call_id": wire_call_id(part.call_id, RESPONSES_CALL_ID_LENGTH),
                    "name": part.name,
                    "arguments": arguments_json(part.arguments),
                }
            )
    # A reasoning item must be followed by the message or call it led to ("provided without its
    # required following item"); an interrupt right after the reasoning leaves it alone.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _tool_output(part: ToolResultPart) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = part.text
    if part.images:
        output = [
            {"type": "input_text", "text": part.text},
            *({"type": "input_image", "image_url": data_url(image)} for image in part.images),
        ]
    return {"type": "function_call_output", "call_id": wire_call_id(part.call_id, RESPONSES_CALL_ID_LENGTH), "output": output}


def encode_input(request: AgentInferenceRequest, *, reasoning: bool) -> list[dict[str, Any]]:
    """Input items; earlier reasoning is sent back only to a reasoning model (a thread may have
    switched models)."""
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "user":
            items.append(_user(message))
        elif message.role == "assistant":
            items.extend(_assistant(message, reasoning))
        else:
            items.extend(_tool_output(p) for p in message.parts if isinstance(p, ToolResultPart))
    return items


def encode_request(request: AgentInferenceRequest, profile: ModelProfile, *, effort: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "input": encode_input(request, reasoning=profile.reasoning),
        "stream": True,
        "store": False,
    }
    if request.system:
        body["instructions"] = request.system
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key  # one thread's requests share a cache
    if request.tools:
        body["tools"] = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}
            for t in request.tools
        ]
        body["tool_choice"] = "auto"
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_output_tokens:
        body["max_output_tokens"] = request.max_output_tokens
    if profile.reasoning:
        body["reasoning"] = {"summary": "auto", **({"effort": effort} if effort else {})}
        body["include"] = ["reasoning.encrypted_content"]
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    if request.logprobs is not None:  # per-token log probabilities of the answer's text
        body["include"] = [*body.get("include", []), "message.output_text.logprobs"]
        if request.logprobs > 0:
            body["top_logprobs"] = request.logprobs
    return body
