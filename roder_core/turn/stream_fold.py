"""Folding one model call's stream of inference events into assistant items and totals.

The engine streams canonical events (``ir.InferenceEvent``); the folder turns them into what
the turn keeps: agent message and reasoning items grown delta by delta, tool call items, the
usage, the stop reason, provider metadata and log probabilities. It does no I/O itself: it tells
a ``FoldListener`` when an item starts, grows and completes (the turn runner turns those into
runtime events), so it can be tested on a list of events alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from roder_core.errors import InferenceError
from roder_core.ir import (
    AgentMessageItem,
    CompletedEvent,
    InferenceErrorEvent,
    InferenceEvent,
    Item,
    LogprobsEvent,
    MessageDelta,
    ProviderMetadataEvent,
    ReasoningDelta,
    ReasoningItem,
    StopReason,
    StreamRestartEvent,
    TokenIdsEvent,
    ToolCallEvent,
    ToolCallItem,
    Usage,
    UsageEvent,
)

StreamedItem = AgentMessageItem | ReasoningItem
DeltaKind = Literal["text", "reasoning"]


class FoldListener(Protocol):
    """Told what the stream does to the turn's items, in stream order."""

    async def item_started(self, item: StreamedItem) -> None:
        """A message or reasoning item opened; deltas follow."""
        ...

    async def item_delta(self, item: StreamedItem, delta: str, kind: DeltaKind) -> None:
        """``item`` grew by ``delta``: its fields catch up at ``StreamFolder.settle`` (always
        before ``item_completed``)."""
        ...

    async def item_completed(self, item: Item) -> None:
        """An item is final (or, after a restart, blanked: its text void)."""
        ...

    async def item_recorded(self, item: ToolCallItem) -> None:
        """A complete tool call: started and completed at once."""
        ...

    def retrying(self, retry: dict[str, Any]) -> None:
        """The engine backs off before sending the call again (``provider_metadata.retry``)."""
        ...


class SilentListener:
    """A listener that shows nothing: model calls whose stream no client sees (a compaction summary)."""

    async def item_started(self, item: StreamedItem) -> None:
        return None

    async def item_delta(self, item: StreamedItem, delta: str, kind: DeltaKind) -> None:
        return None

    async def item_completed(self, item: Item) -> None:
        return None

    async def item_recorded(self, item: ToolCallItem) -> None:
        return None

    def retrying(self, retry: dict[str, Any]) -> None:
        return None


@dataclass
class ModelOutput:
    """What one model call produced."""

    items: list[StreamedItem | ToolCallItem] = field(default_factory=list)
    tool_calls: list[ToolCallEvent] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = "end_turn"
    metadata: dict[str, Any] = field(default_factory=dict)
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    #: ``{"prompt": [...], "completion": [...]}`` when the server returned token ids.
    token_ids: dict[str, list[int]] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The answer's text: every agent message of the call, joined."""
        return "".join(item.text for item in self.items if isinstance(item, AgentMessageItem))


class StreamFolder:
    """Folds the events of one model call, in order; ``close`` ends the item still open.

    Usage: ``await folder.feed(event)`` for each event, then ``await folder.close()`` (also
    when the stream broke or was cancelled: the partial item is kept, completed), then read
    ``folder.output``. An ``error`` event raises ``InferenceError``.
    """

    def __init__(self, listener: FoldListener) -> None:
        self.listener = listener
        self.output = ModelOutput()
        self._open: StreamedItem | None = None
        #: Deltas of the open item not yet joined into its fields, per field: appending each one
        #: to a str field copies the whole text every time, so a reply's cost would grow with the
        #: square of its size (8 MB of 64-character deltas: minutes of CPU).
        self._unsettled: dict[str, list[str]] = {}
        #: Characters of the open item's text and summary, settled or not.
        self.open_size = 0

    async def feed(self, event: InferenceEvent) -> None:
        match event:
            case MessageDelta():
                await self._message(event)
            case ReasoningDelta():
                await self._reasoning(event)
            case ToolCallEvent():
                await self._tool_call(event)
            case UsageEvent():
                self.output.usage = event.usage
            case LogprobsEvent():
                self.output.logprobs.extend(event.tokens)
            case TokenIdsEvent():
                if event.prompt is not None:
                    self.output.token_ids["prompt"] = list(event.prompt)
                self.output.token_ids.setdefault("completion", []).extend(event.completion)
            case ProviderMetadataEvent():
                self.output.metadata.update(event.data)
                retry = event.data.get("retry")
                if isinstance(retry, dict):
                    self.listener.retrying(retry)
            case CompletedEvent():
                self.output.stop_reason = event.stop_reason
            case InferenceErrorEvent():
                raise InferenceError(event.message, event.kind, retryable=event.retryable)  # type: ignore[arg-type]
            case StreamRestartEvent():
                await self._restart()

    async def close(self) -> None:
        """Complete the item still open (a partial answer is kept as a completed item)."""
        if self._open is not None:
            self.settle()
            item, self._open = self._open, None
            self.open_size = 0
            await self.listener.item_completed(item)

    def settle(self) -> None:
        """Bring the open item's fields up to date with every delta fed so far."""
        item = self._open
        if item is None or not self._unsettled:
            return
        for name, pieces in self._unsettled.items():
            setattr(item, name, getattr(item, name) + "".join(pieces))
        self._unsettled.clear()

    def _grow(self, name: str, piece: str) -> None:
        self._unsettled.setdefault(name, []).append(piece)
        self.open_size += len(piece)

    async def _opened(self, kind: type[AgentMessageItem] | type[ReasoningItem]) -> StreamedItem:
        """The open item if it is of ``kind``; else the open one is completed and a new one opened."""
        if isinstance(self._open, kind):
            return self._open
        await self.close()
        item = kind()
        self._open = item
        self.output.items.append(item)
        await self.listener.item_started(item)
        return item

    async def _message(self, event: MessageDelta) -> None:
        item = await self._opened(AgentMessageItem)
        self._grow("text", event.text)
        await self.listener.item_delta(item, event.text, "text")

    async def _reasoning(self, event: ReasoningDelta) -> None:
        item = await self._opened(ReasoningItem)
        assert isinstance(item, ReasoningItem)
        self._grow("summary" if event.summary else "text", event.text)
        if event.provider_data:
            item.provider_data = {**(item.provider_data or {}), **event.provider_data}
        if event.text:
            await self.listener.item_delta(item, event.text, "reasoning")

    async def _tool_call(self, event: ToolCallEvent) -> None:
        await self.close()
        item = ToolCallItem(call_id=event.call_id, name=event.name, arguments=event.arguments, provider_data=event.provider_data)
        self.output.tool_calls.append(event)
        self.output.items.append(item)
        await self.listener.item_recorded(item)

    async def _restart(self) -> None:
        """The engine retried a broken stream and got a different answer: blank what this call
        showed (clients replace items by id), then fold the new answer from scratch."""
        self._open, self._unsettled, self.open_size = None, {}, 0
        for item in self.output.items:
            if isinstance(item, AgentMessageItem):
                await self.listener.item_completed(item.model_copy(update={"text": ""}))
            elif isinstance(item, ReasoningItem):
                await self.listener.item_completed(item.model_copy(update={"text": "", "summary": "", "provider_data": None}))
        self.output = ModelOutput()
