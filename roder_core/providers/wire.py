"""Small translations every dialect needs: image data URLs, tool-argument JSON, stored reasoning.

Reasoning an engine must send back verbatim (Anthropic thinking signatures, Responses encrypted
reasoning) is kept in ``provider_data`` under ``"<dialect>/<block id>"`` keys, one per block, so
several blocks merged into one reasoning item stay separate and another dialect ignores them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from typing import Any

from roder_core import bounded_json
from roder_core.ir import ImagePart, ReasoningPart, ToolCallEvent
from roder_core.providers.sse import SSEEvent

log = logging.getLogger(__name__)


class Pieces:
    """Text that arrives in pieces (a tool call's arguments, a thinking block), joined when read.

    ``text += piece`` on an attribute or a dict value copies everything received so far at each
    piece: a reply's cost would grow with the square of its size.
    """

    __slots__ = ("_parts",)

    def __init__(self, text: str = "") -> None:
        self._parts = [text] if text else []

    def add(self, piece: str) -> None:
        self._parts.append(piece)

    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""


def data_url(image: ImagePart) -> str:
    return f"data:{image.mime_type};base64,{image.data_base64}"


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from JSON text: (arguments, None) or ({}, why it is not an object). An
    object sent as a JSON string holding it (encoded twice) is that object."""
    if not text.strip():
        return {}, None
    try:
        value = bounded_json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"{exc.msg} at position {exc.pos}"
    if isinstance(value, str):  # the object encoded twice, a habit of some models: one reading
        with contextlib.suppress(json.JSONDecodeError):
            value = bounded_json.loads(value)
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


#: Characters no dialect's tool-call id may hold (Anthropic documents ``^[a-zA-Z0-9_-]+$``; the
#: OpenAI dialects accept it too).
_NOT_IN_CALL_IDS = re.compile(r"[^A-Za-z0-9_-]")
#: Longest ids each dialect accepts (Chat Completions refuses ids over 40 characters).
ANTHROPIC_CALL_ID_LENGTH = 64
RESPONSES_CALL_ID_LENGTH = 64
CHAT_CALL_ID_LENGTH = 40


def wire_call_id(call_id: str, max_length: int) -> str:
    """``call_id`` in the form every dialect accepts, for a call and its result alike.

    A thread keeps the ids its first provider gave (``functions.bash:0`` from some
    chat-completions hosts, 70-character ids from others); a dialect that refuses them gets a
    stand-in: the id with other characters as ``_``, cut to fit, and a hash of the whole id, so
    the mapping is stable across requests (the prompt cache) and two ids never share a stand-in.
    Valid ids go through unchanged."""
    if call_id and len(call_id) <= max_length and not _NOT_IN_CALL_IDS.search(call_id):
        return call_id
    suffix = "_" + hashlib.sha256(call_id.encode()).hexdigest()[:12]
    return (_NOT_IN_CALL_IDS.sub("_", call_id)[: max_length - len(suffix)] or "call") + suffix


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
        value = bounded_json.loads(event.data)
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
