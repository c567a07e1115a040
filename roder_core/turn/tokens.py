"""Fast token estimates, used wherever a provider has not reported real counts.

About four characters make a token in English prose and code for the tokenizers in use; an
image costs a flat amount rather than the length of its base64. The estimate only has to be good
enough to decide when to shorten or compact; displayed usage prefers provider-reported counts.
"""

from __future__ import annotations

import copy
import json
import weakref
from collections.abc import Iterable
from typing import Any

from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    CompactionItem,
    ImagePart,
    Item,
    Message,
    ReasoningItem,
    ReasoningPart,
    TextPart,
    ToolCallItem,
    ToolCallPart,
    ToolResultItem,
    ToolResultPart,
    ToolSpec,
    UserMessageItem,
)

CHARS_PER_TOKEN = 4
#: What one image costs in the prompt (providers charge roughly 1-2k tokens for a screenshot).
IMAGE_TOKENS = 1_500
#: Role markers and separators each message adds.
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """Fast token estimate (~4 characters a token) used when the provider reports nothing."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _json_tokens(value: object) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


#: Token counts of the parts and messages counted, by identity, each entry with a weak reference
#: to its object (the entry goes when the object does, and an id reused by a newer object is
#: told apart). Every model call counts its whole conversation, and the parts and messages of
#: the earlier turns are the same objects from call to call (``context.PartCache``): counting
#: each once keeps a call's count from costing more as the thread grows. Parts and messages are
#: never edited in place (a planner that shortens one makes a copy), so a count stays right.
_COUNTED: dict[int, tuple[weakref.ref[Any], int]] = {}


def _remembered(obj: object) -> int | None:
    hit = _COUNTED.get(id(obj))
    return hit[1] if hit is not None and hit[0]() is obj else None


def _remember(obj: object, tokens: int) -> int:
    key = id(obj)
    try:
        _COUNTED[key] = (weakref.ref(obj, lambda _gone: _COUNTED.pop(key, None)), tokens)
    except TypeError:  # an object without weak references (not a part): counted each time
        pass
    return tokens


def part_tokens(part: object) -> int:
    known = _remembered(part)
    return known if known is not None else _remember(part, _count_part(part))


def _count_part(part: object) -> int:
    if isinstance(part, TextPart):
        return estimate_tokens(part.text)
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    if isinstance(part, ReasoningPart):
        return estimate_tokens(part.text) + estimate_tokens(part.summary)
    if isinstance(part, ToolCallPart):
        return estimate_tokens(part.name) + _json_tokens(part.arguments)
    if isinstance(part, ToolResultPart):
        return estimate_tokens(part.text) + IMAGE_TOKENS * len(part.images)
    return 0


def message_tokens(message: Message) -> int:
    """Counted once per message object, as parts are: the context assembler reuses the messages
    of unchanged parts and makes a new message for any change (``context.PartCache.message``)."""
    known = _remembered(message)
    return known if known is not None else _remember(message, MESSAGE_OVERHEAD + sum(map(part_tokens, message.parts)))


def messages_tokens(messages: Iterable[Message]) -> int:
    return sum(map(message_tokens, messages))


class _LastCount:
    """The last request counted, by the identity of its parts: one model call asks for the
    same request's count four or five times (the planner, compaction's check and its record,
    the call, usage accounting), and each count walks the whole conversation. The parts are
    held, so their identities cannot be reused; requests are copied on change (``model_copy``),
    never edited in place."""

    key: tuple[object, ...] = ()
    tokens = 0


#: Token counts of tool specs, by name, with the description and schema they were counted from.
#: The registry gives every model call new specs holding fresh copies of the schemas, so
#: identity cannot tell a spec seen before, but comparing the schema as data can, at a fraction
#: of the cost of serializing it again (the tools are most of a short request's size).
_TOOL_COUNTS: dict[str, tuple[str, dict[str, Any], int]] = {}
#: More distinct tool names than any registry holds: past it the counts start over.
_TOOL_COUNTS_MAX = 1024


def tool_tokens(tool: ToolSpec) -> int:
    """What a tool's name, description and schema cost in the prompt."""
    known = _TOOL_COUNTS.get(tool.name)
    if known is not None and known[0] == tool.description and known[1] == tool.parameters:
        return known[2]
    tokens = estimate_tokens(tool.name) + estimate_tokens(tool.description) + _json_tokens(tool.parameters)
    if len(_TOOL_COUNTS) >= _TOOL_COUNTS_MAX:
        _TOOL_COUNTS.clear()
    # A copy: the schema counted stays as it was, whatever becomes of the request's.
    _TOOL_COUNTS[tool.name] = (tool.description, copy.deepcopy(tool.parameters), tokens)
    return tokens


def request_tokens(request: AgentInferenceRequest) -> int:
    """The prompt side of a request: system text, every message and the tool schemas."""
    key = (request.messages, request.system, request.tools, len(request.messages), len(request.tools))
    last = _LastCount.key
    if last and all(a is b for a, b in zip(key[:3], last[:3], strict=True)) and key[3:] == last[3:]:
        return _LastCount.tokens
    tools = sum(map(tool_tokens, request.tools))
    tokens = estimate_tokens(request.system) + messages_tokens(request.messages) + tools
    _LastCount.key, _LastCount.tokens = key, tokens
    return tokens


def item_tokens(item: Item) -> int:
    """What an item costs once it is sent to the model (0 for items the model never sees)."""
    if isinstance(item, UserMessageItem):
        images = sum(1 for a in item.attachments if a.is_image)
        texts = sum(estimate_tokens(a.text) for a in item.attachments if a.text)
        return MESSAGE_OVERHEAD + estimate_tokens(item.text) + texts + IMAGE_TOKENS * images
    if isinstance(item, AgentMessageItem):
        return estimate_tokens(item.text)
    if isinstance(item, ReasoningItem):
        return estimate_tokens(item.text) + estimate_tokens(item.summary)
    if isinstance(item, ToolCallItem):
        return estimate_tokens(item.name) + _json_tokens(item.arguments)
    if isinstance(item, ToolResultItem):
        images = sum(1 for a in item.attachments if a.is_image)
        return MESSAGE_OVERHEAD + estimate_tokens(item.text) + IMAGE_TOKENS * images
    if isinstance(item, CompactionItem):
        return MESSAGE_OVERHEAD + estimate_tokens(item.summary)
    return 0
