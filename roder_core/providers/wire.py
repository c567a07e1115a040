"""Small translations every dialect needs: image data URLs, tool-argument JSON, stored reasoning.

Reasoning an engine must send back verbatim (Anthropic thinking signatures, Responses encrypted
reasoning) is kept in ``provider_data`` under ``"<dialect>/<block id>"`` keys, one per block, so
several blocks merged into one reasoning item stay separate and another dialect ignores them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from roder_core.ir import ImagePart, ReasoningPart, ToolCallEvent
from roder_core.providers.sse import SSEEvent

log = logging.getLogger(__name__)


def data_url(image: ImagePart) -> str:
    return f"data:{image.mime_type};base64,{image.data_base64}"


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from JSON text: (arguments, None) or ({}, why it is not an object)."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"{exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__}"
    return value, None


#: What the model is told about a call cut off by its output limit (it was not run).
TRUNCATED_CALL = (
    "your response hit its output token limit while this call's arguments were being written, so they "
    "are incomplete and the call was not run; send it again with less content per call (for example, "
    "write a large file in several smaller edits)"
)


def truncated(call: ToolCallEvent) -> ToolCallEvent:
    """``call`` marked as cut off by the output limit."""
    return call.model_copy(update={"truncated": True, "arguments_error": TRUNCATED_CALL})


def arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def reasoning_key(dialect: str, block: str | int) -> str:
    return f"{dialect}/{block}"


def stored_blocks(part: ReasoningPart, dialect: str) -> list[dict[str, Any]]:
    """The verbatim blocks this dialect stored in a reasoning part, in the order they came."""
    return [block for _id, block in stored_items(part, dialect)]


def stored_items(part: ReasoningPart, dialect: str) -> list[tuple[str, dict[str, Any]]]:
    """(block id, block) pairs this dialect stored in a reasoning part, in the order they came."""
    prefix = f"{dialect}/"
    data = part.provider_data or {}
    return [(key[len(prefix) :], value) for key, value in data.items() if key.startswith(prefix) and isinstance(value, dict)]


def event_json(event: SSEEvent, provider: str) -> dict[str, Any] | None:
    """The JSON object an SSE event carries, or None (logged) when its data is not one.

    A malformed event is skipped rather than failing the call: the rest of the stream is still
    good, and a stream that ends without its terminal event is retried anyway.
    """
    try:
        value = json.loads(event.data)
    except json.JSONDecodeError as exc:
        log.warning("%s: skipped a malformed stream event (%s): %.80r", provider, exc.msg, event.data)
        return None
    if not isinstance(value, dict):
        log.warning("%s: skipped a stream event that is not a JSON object: %.80r", provider, event.data)
        return None
    return value


def token_logprobs(raw: Any) -> list[dict[str, Any]]:
    """Sampled tokens' log probabilities as both OpenAI dialects send them (``token``,
    ``logprob``, ``bytes``, ``top_logprobs``), kept as plain data; anything else is dropped."""
    if not isinstance(raw, list):
        return []
    tokens = []
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("logprob"), int | float):
            keep = {k: entry[k] for k in ("token", "logprob", "bytes", "id") if k in entry}
            token = entry.get("token")
            if "id" not in keep and isinstance(token, str) and token.startswith("token_id:") and token[9:].isdigit():
                keep["id"] = int(token[9:])  # vLLM's --return-tokens-as-token-ids
            top = entry.get("top_logprobs")
            if isinstance(top, list) and top:
                keep["top_logprobs"] = [{k: t[k] for k in ("token", "logprob") if k in t} for t in top if isinstance(t, dict)]
            tokens.append(keep)
    return tokens
