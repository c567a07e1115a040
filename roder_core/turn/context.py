"""Context assembly: thread history -> canonical messages, context blocks -> system prompt.

System blocks make the system prompt, which stays byte-stable across turns; turn blocks
(environment, recall) are recorded with each turn's user message (``turn_context``), so a request
is always an earlier request plus what happened since: the prefix providers cache.

The latest compaction item stands in for everything before the item it keeps; the raw items
stay in the thread. Context providers contribute typed blocks; the planner orders and budgets
them. ``ContextAssembler`` is the single place the turn loop asks for a request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any

from roder_core.ir import (
    INTERRUPTED_KIND,
    AgentInferenceRequest,
    AgentMessageItem,
    Attachment,
    CompactionItem,
    ErrorItem,
    ImagePart,
    Item,
    Message,
    ModelProfile,
    Part,
    ReasoningItem,
    ReasoningPart,
    TextPart,
    ToolCallItem,
    ToolCallPart,
    ToolResultItem,
    ToolResultPart,
    ToolSpec,
    Turn,
    UserMessageItem,
)
from roder_core.kernel.services import ContextBlock, ContextPlanner, ContextProvider, ContextQuery
from roder_core.turn.planner import BudgetPlanner
from roder_core.turn.tokens import estimate_tokens

log = logging.getLogger(__name__)

COMPACTION_PREFIX = "Summary of the earlier conversation (older turns were compacted):\n\n"
#: A user message's turn context comes first, in its own text part, inside these tags.
CONTEXT_OPEN, CONTEXT_CLOSE = "<context>\n", "\n</context>\n\n"


def is_turn_context(part: object) -> bool:
    """Whether ``part`` is the turn context Roder put before the user's words."""
    return isinstance(part, TextPart) and part.text.startswith(CONTEXT_OPEN) and part.text.endswith(CONTEXT_CLOSE)


__all__ = [
    "COMPACTION_PREFIX",
    "CONTEXT_CLOSE",
    "CONTEXT_OPEN",
    "ContextAssembler",
    "conversation",
    "estimate_tokens",
    "history_to_messages",
    "is_turn_context",
    "recent_items",
    "shows_all_visible",
    "visible_items",
]


def visible_items(items: Sequence[Item]) -> list[Item]:
    """Items the model should see: after the latest compaction, its summary then kept items.

    Older compaction items inside the kept part are left out: the latest summary already
    carries what they said.
    """
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, CompactionItem):
            kept_at = _position_before(items, index, item.first_kept_item_id)
            start = index + 1 if kept_at is None else kept_at
            kept = [it for it in items[start:] if not isinstance(it, CompactionItem)]
            return [item, *kept]
    return list(items)


def _position_before(items: Sequence[Item], index: int, item_id: str | None) -> int | None:
    """Where ``item_id`` is among ``items[:index]``, searched backwards from ``index``: a
    compaction's first kept item sits shortly before it, so the search costs what was kept,
    not the whole thread's history (ids are unique, so the first found is the only one)."""
    if item_id is None:
        return None
    for position in range(index - 1, -1, -1):
        if items[position].id == item_id:
            return position
    return None


def recent_items(turns: Sequence[Turn]) -> list[Item]:
    """The items of ``turns`` that ``visible_items`` picks from, flattened: from the turn that
    holds the latest compaction's first kept item on (every item without a compaction). A
    model call then never flattens the compacted past, which grows with the thread."""
    for last in range(len(turns) - 1, -1, -1):
        items = turns[last].items
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if isinstance(item, CompactionItem):
                kept, start = item.first_kept_item_id, last
                if kept is not None and _position_before(items, index, kept) is None:
                    earlier = (s for s in range(last - 1, -1, -1) if any(it.id == kept for it in turns[s].items))
                    start = next(earlier, last)  # not found: the summary alone, as visible_items does
                return [it for turn in turns[start:] for it in turn.items]
    return [it for turn in turns for it in turn.items]


def shows_all_visible(items: Sequence[Item]) -> bool:
    """Whether ``items``, the last part of a thread, hold all ``visible_items`` would pick from the
    whole thread: a compaction whose kept part begins inside them. Without one (or when the kept
    part begins earlier) the older items are part of what the model sees."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, CompactionItem):
            kept = item.first_kept_item_id
            return kept is None or _position_before(items, index, kept) is not None
    return False


#: Turns an image attachment into what the model sees: the image, or a line saying why not.
ImageResolver = Callable[[Attachment], ImagePart | str]


def describe_image(att: Attachment) -> str:
    """``shot.png (image/png, 1280x800)``: how a card and a placeholder name an image."""
    size = f", {att.width}x{att.height}" if att.width and att.height else ""
    return f"{att.name} ({att.mime_type}{size})"


def inline_images(att: Attachment) -> ImagePart | str:
    """The resolver without a media store: inline images as they are, stored ones named only
    (trajectories, summaries)."""
    if att.data_base64 is not None:
        return ImagePart(mime_type=att.mime_type, data_base64=att.data_base64)
    return f"[image {describe_image(att)}]"


def _image_parts(attachments: list[Attachment], resolve: ImageResolver) -> tuple[list[ImagePart], list[str]]:
    images: list[ImagePart] = []
    notes: list[str] = []
    for att in attachments:
        if att.is_image:
            shown = resolve(att)
            if isinstance(shown, ImagePart):
                images.append(shown)
            else:
                notes.append(shown)
    return images, notes


def _user_message(item: UserMessageItem, resolve: ImageResolver) -> Message:
    parts: list[Part] = [TextPart.model_construct(text=CONTEXT_OPEN + item.context + CONTEXT_CLOSE)] if item.context else []
    parts.append(TextPart.model_construct(text=item.text))
    images, notes = _image_parts(item.attachments, resolve)
    parts.extend(TextPart.model_construct(text=note) for note in notes)
    parts.extend(images)
    for att in item.attachments:
        if not att.is_image and att.text is not None:
            parts.append(TextPart.model_construct(text=f"\n<attachment name={att.name!r}>\n{att.text}\n</attachment>"))
    return Message.model_construct(role="user", parts=parts)


def history_to_messages(
    items: Sequence[Item], *, compacted: bool = True, resolve: ImageResolver = inline_images
) -> list[Message]:
    """Group IR items into provider-neutral messages.

    Consecutive assistant output (reasoning, text, tool calls) forms one assistant message and
    consecutive tool results one tool message, which is what every dialect expects. With
    ``compacted=False`` every raw item is included (trajectories), compaction summaries left out.
    """
    if not compacted:
        items = [item for item in items if not isinstance(item, CompactionItem)]
    return conversation(items, resolve=resolve)[0]


def _copied(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """A part's own copy of an item's dict (as validating it made), so an encoder that edits a
    request's parts never edits the thread's items."""
    return None if data is None else dict(data)


def _reasoning_part(item: ReasoningItem) -> ReasoningPart:
    return ReasoningPart.model_construct(text=item.text, summary=item.summary, provider_data=_copied(item.provider_data))


def _call_part(item: ToolCallItem) -> ToolCallPart:
    return ToolCallPart.model_construct(
        call_id=item.call_id, name=item.name, arguments=dict(item.arguments), provider_data=_copied(item.provider_data)
    )


#: What the model reads where a turn was interrupted: what it said before may be unfinished, and
#: the user stopped it on purpose (so it should not simply carry on with it unasked).
INTERRUPTED_NOTE = "[Request interrupted by the user]"


def _text_part(text: str) -> TextPart:
    return TextPart.model_construct(text=text)


def _result_part(item: ToolResultItem, resolve: ImageResolver) -> ToolResultPart:
    images, notes = _image_parts(item.attachments, resolve)
    text = "\n".join([item.text, *notes]) if notes else item.text
    return ToolResultPart.model_construct(call_id=item.call_id, name=item.name, text=text, is_error=item.is_error, images=images)


class PartCache:
    """The parts made for one thread's items at its earlier model calls.

    Every model call turns the history into messages; the history only grows, so each item's
    part is made once and reused while the item is the same object with the same field objects
    (an edited or replaced item is made again). Items with attachments are always made again
    (their images depend on the model). Only what the last call used is kept. When a call's
    items begin with every item of the last call, unchanged, its messages are continued from
    where the last call left them (``_Made``): only the new items are looked at."""

    def __init__(self) -> None:
        self._parts: dict[str, tuple[tuple[object, ...], Any]] = {}
        self._used: dict[str, tuple[tuple[object, ...], Any]] = {}
        self._messages: dict[tuple[object, ...], tuple[list[Part], Message]] = {}
        self._messages_used: dict[tuple[object, ...], tuple[list[Part], Message]] = {}
        #: Assistant messages whose calls all have results in the message after them, by id:
        #: ``(message, following)`` (the objects are held, so no other object can have the id).
        self._answered: dict[int, tuple[Message, Message | None]] = {}
        self._answered_used: dict[int, tuple[Message, Message | None]] = {}
        #: The messages of the last call's items, to be continued (see ``continued``), and
        #: whether this call continued them.
        self._made: _Made | None = None
        self._continued = False

    def get(self, item: Item, fields: tuple[object, ...], make: Callable[..., Any], *args: Any) -> Any:
        """The part ``make(*args)`` made for ``item`` with these ``fields`` (made now if not).
        The keys are compared as tuples, in C: each element by identity first (the usual hit),
        by equality otherwise (an equal replacement makes the same part)."""
        key = (item, *fields)
        hit = self._parts.get(item.id)
        if hit is None or hit[0] != key:
            hit = (key, make(*args))
        self._used[item.id] = hit
        return hit[1]

    def message(self, role: str, parts: list[Part]) -> Message:
        """The message of these very parts, the one made at an earlier call when there was one
        (so what counts or encodes a message once, by identity, does it once per thread). Keyed
        by the parts' ids: the entry holds the parts, so no other object can have those ids."""
        key = (role, *map(id, parts))
        hit = self._messages.get(key)
        if hit is None:
            hit = (parts, Message.model_construct(role=role, parts=parts))
        self._messages_used[key] = hit
        return hit[1]

    def answered(self, message: Message, following: Message | None) -> bool:
        """Whether ``message`` was found, with this very ``following`` message, to need no
        interrupted results (``_close_dangling_calls``)."""
        seen = self._answered.get(id(message))
        if seen is None or seen[0] is not message or seen[1] is not following:
            return False
        self._answered_used[id(message)] = seen
        return True

    def note_answered(self, message: Message, following: Message | None) -> None:
        self._answered_used[id(message)] = (message, following)

    def continued(self, visible: list[Item]) -> _Made:
        """The last call's messages to go on from when ``visible`` begins with its items, the very
        objects with the same fields (two comparisons in C); else a fresh start."""
        made = self._made
        self._continued = made is not None and made.continues(visible)
        if made is None or not self._continued:
            self._made = made = _Made()
        return made

    def settle(self) -> None:
        """Keep only the parts of this call (a compacted or rewound history lets the rest go).
        The parts a continued call did not look at again stay: its messages still hold them."""
        if self._continued:
            self._used = {**self._parts, **self._used}
            self._messages_used = {**self._messages, **self._messages_used}
        self._parts, self._used = self._used, {}
        self._messages, self._messages_used = self._messages_used, {}
        self._answered, self._answered_used = self._answered_used, {}


class _Group:
    """An assistant or tool message while its parts are gathered (``PartCache.message`` makes it)."""

    __slots__ = ("parts", "role")

    def __init__(self, role: str) -> None:
        self.role = role
        self.parts: list[Part] = []


_FIELDS = operator.attrgetter("__dict__")


class _Made:
    """The messages ``conversation`` made of a thread's visible items at its last call: the
    finished ones, the assistant or tool message still open to the next items, and where each
    item began. A later call whose items start with these, unchanged, goes on from here, so a
    model call looks at what was added since the last one, not at the whole history."""

    __slots__ = ("fields", "items", "last_user", "messages", "open", "reusable", "starts")

    def __init__(self) -> None:
        self.items: list[Item] = []
        #: Each item's fields (``__dict__``) when it was made: an item edited in place since
        #: then is noticed, as ``PartCache.get`` notices it.
        self.fields: list[dict[str, Any]] = []
        self.messages: list[Message] = []
        self.open: _Group | None = None
        #: The index of the message each item's content begins in (the first, by item id).
        self.starts: dict[str, int] = {}
        self.last_user: int | None = None
        #: False once an item with attachments was made: its images depend on the model.
        self.reusable = True

    def continues(self, visible: list[Item]) -> bool:
        count = len(self.items)
        return (
            self.reusable
            and count <= len(visible)
            and all(map(operator.is_, self.items, visible))
            and list(map(_FIELDS, visible[:count])) == self.fields
        )

    def _group(self, role: str, cache: PartCache) -> _Group:
        if self.open is not None and self.open.role == role:
            return self.open
        self._close(cache)
        self.open = _Group(role)
        return self.open

    def _close(self, cache: PartCache) -> None:
        if self.open is not None:
            self.messages.append(cache.message(self.open.role, self.open.parts))
            self.open = None

    def _whole(self, message: Message, cache: PartCache) -> None:
        self._close(cache)
        if message.role == "user":
            self.last_user = len(self.messages)
        self.messages.append(message)

    def add(self, item: Item, cache: PartCache, resolve: ImageResolver) -> None:
        """Add one visible item's content to the messages."""
        self.items.append(item)
        self.fields.append(dict(item.__dict__))
        self.starts.setdefault(item.id, len(self.messages) + (self.open is not None))
        if isinstance(item, UserMessageItem):
            if item.attachments:
                self.reusable = False
                self._whole(_user_message(item, resolve), cache)
            else:
                self._whole(cache.get(item, (item.text, item.context), _user_message, item, resolve), cache)
        elif isinstance(item, CompactionItem):
            summary = TextPart.model_construct(text=COMPACTION_PREFIX + item.summary)
            self._whole(Message.model_construct(role="user", parts=[summary]), cache)
        elif isinstance(item, ErrorItem) and item.kind == INTERRUPTED_KIND:
            # not ``_whole``: the note is not the user's prompt, the running turn never starts at it
            self._close(cache)
            self.messages.append(cache.message("user", [cache.get(item, (), _text_part, INTERRUPTED_NOTE)]))
        elif isinstance(item, AgentMessageItem):
            if item.text:
                self._group("assistant", cache).parts.append(cache.get(item, (item.text,), _text_part, item.text))
        elif isinstance(item, ReasoningItem):
            if item.text or item.summary or item.provider_data:  # else voided by a stream restart
                fields = (item.text, item.summary, item.provider_data)
                self._group("assistant", cache).parts.append(cache.get(item, fields, _reasoning_part, item))
        elif isinstance(item, ToolCallItem):
            call = (item.call_id, item.name, item.arguments, item.provider_data)
            self._group("assistant", cache).parts.append(cache.get(item, call, _call_part, item))
        elif isinstance(item, ToolResultItem):
            if item.attachments:
                self.reusable = False
                self._group("tool", cache).parts.append(_result_part(item, resolve))
            else:
                result = (item.call_id, item.name, item.text, item.is_error)
                self._group("tool", cache).parts.append(cache.get(item, result, _result_part, item, resolve))

    def made(self, cache: PartCache) -> list[Message]:
        """Every message; the open one as a copy, since later items may still join it."""
        if self.open is None or not self.open.parts:
            return list(self.messages)
        return [*self.messages, cache.message(self.open.role, list(self.open.parts))]


def conversation(
    items: Sequence[Item],
    turn_start_item: str | None = None,
    *,
    resolve: ImageResolver = inline_images,
    parts: PartCache | None = None,
) -> tuple[list[Message], int]:
    """The messages for ``items`` and the index of the message where the running turn begins
    (the one made from ``turn_start_item``; right after the summary when compaction hid it).
    ``resolve`` loads stored images (or says why one is not sent); ``parts`` keeps the parts
    made at a thread's earlier calls, and the messages to go on from.

    The parts are made without validation (``model_construct``): their fields come from items
    that were validated when they were made."""
    cache = parts or PartCache()
    visible = visible_items(items)
    made = cache.continued(visible)
    for item in visible[len(made.items) :]:
        made.add(item, cache, resolve)
    messages = made.made(cache)
    turn_start = made.starts.get(turn_start_item) if turn_start_item is not None else None
    if turn_start is None:
        if turn_start_item is not None and visible and isinstance(visible[0], CompactionItem):
            turn_start = 1  # the turn's start was summarized: protect all that follows the summary
        else:
            turn_start = made.last_user or 0
    return _close_dangling_calls(messages, cache), turn_start


def _close_dangling_calls(messages: list[Message], cache: PartCache | None = None) -> list[Message]:
    """Every tool call needs a result (providers reject the request otherwise). A turn that was
    interrupted between call and result gets a synthetic 'interrupted' result. Messages are
    replaced, never edited: the same message objects serve the thread's later calls. ``cache``
    remembers the assistant messages found answered, so a thread's later calls skip them."""
    messages = list(messages)
    fixed: list[Message] = []
    for index, message in enumerate(messages):
        fixed.append(message)
        if message.role != "assistant":
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if cache is not None and cache.answered(message, following):
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if not calls:
            if cache is not None:
                cache.note_answered(message, following)
            continue
        answered = (
            {p.call_id for p in following.parts if isinstance(p, ToolResultPart)}
            if following is not None and following.role == "tool"
            else set()
        )
        missing: list[Part] = [
            ToolResultPart.model_construct(
                call_id=c.call_id, name=c.name, text="(no result: the turn was interrupted)", is_error=True
            )
            for c in calls
            if c.call_id not in answered
        ]
        if not missing:
            if cache is not None:
                cache.note_answered(message, following)
        elif following is not None and following.role == "tool":
            messages[index + 1] = Message.model_construct(role="tool", parts=[*following.parts, *missing])
        else:
            fixed.append(Message.model_construct(role="tool", parts=missing))
    return fixed


#: How many threads' parts ``ContextAssembler`` keeps between model calls.
PART_CACHE_THREADS = 32


class ContextAssembler:
    """Builds the canonical request for one model call of a turn."""

    def __init__(
        self,
        providers: list[ContextProvider],
        planner: ContextPlanner | None = None,
        media: Callable[[str, str], str | None] | None = None,
    ) -> None:
        """``media(thread_id, media_id)`` returns a stored item's bytes as base64 (None when
        it was deleted)."""
        self._providers = providers
        self._planner = planner or BudgetPlanner()
        self.planner = self._planner
        self._media = media
        #: Each thread's parts from its last model call (``PartCache``), for the busiest threads.
        self._part_caches: dict[str, PartCache] = {}

    def use_providers(self, providers: list[ContextProvider]) -> None:
        """The providers of the registry now in use (plugins' hooks or process extensions changed)."""
        self._providers = providers

    def image_resolver(self, thread_id: str, model: ModelProfile) -> ImageResolver:
        """How images of ``thread_id`` reach ``model``: loaded from the media store, or replaced
        by a line the model can read when it takes no images or the item was deleted."""

        def resolve(att: Attachment) -> ImagePart | str:
            if not model.images:
                return f"[image {describe_image(att)} not shown: model {model.id} does not accept images]"
            data = att.data_base64
            if data is None and att.media_id is not None and self._media is not None:
                data = self._media(thread_id, att.media_id)
            if data is None:
                return f"[image {describe_image(att)} is no longer available: it was deleted]"
            return ImagePart(mime_type=att.mime_type, data_base64=data)

        return resolve

    async def blocks(self, query: ContextQuery) -> list[ContextBlock]:
        async def load(provider: ContextProvider) -> list[ContextBlock]:
            try:
                return await provider.load_context(query)
            except Exception as exc:  # one broken provider must not stop the turn
                log.warning("context provider %s failed: %s", provider.id(), exc)
                return []

        results = await asyncio.gather(*(load(p) for p in self._providers))
        return [block for blocks in results for block in blocks]

    async def turn_context(self, query: ContextQuery) -> str:
        """The turn blocks (placement "turn"), by priority, as the text recorded with the turn's
        user message."""
        turn_query = dataclasses.replace(query, turn_start=True)
        blocks = sorted((b for b in await self.blocks(turn_query) if b.placement == "turn"), key=lambda b: b.priority)
        return "\n\n".join(b.text.strip() for b in blocks if b.text.strip())

    async def build(
        self,
        query: ContextQuery,
        items: Sequence[Item],
        tools: list[ToolSpec],
        model: ModelProfile,
        turn_start_item: str | None = None,
        *,
        shorten: bool = True,
    ) -> AgentInferenceRequest:
        """``turn_start_item`` is the first item of the running turn, which planners never shorten.
        ``shorten=False``: the planner shortens nothing (the request says the whole conversation
        is to be kept verbatim), because compaction, not shortening, will make room: a shortening
        step rewrites the history from the first output it shortens, and the compaction that
        follows soon after rewrites it again (two prompt-cache breaks for one)."""
        resolve = self.image_resolver(query.thread_id, model)
        parts = self._part_caches.pop(query.thread_id, None) or PartCache()
        messages, turn_start = conversation(items, turn_start_item, resolve=resolve, parts=parts)
        parts.settle()
        self._part_caches[query.thread_id] = parts  # the most recently used last
        while len(self._part_caches) > PART_CACHE_THREADS:
            self._part_caches.pop(next(iter(self._part_caches)))
        request = AgentInferenceRequest(
            model=model.id,
            messages=messages,
            tools=tools,
            max_output_tokens=model.max_output_tokens,
            parallel_tool_calls=model.parallel_tools,
            turn_start=turn_start if shorten else 0,
            cache_key=query.thread_id or None,
        )
        system = [b for b in await self.blocks(query) if b.placement == "system"]
        return self._planner.plan(system, request, model)
