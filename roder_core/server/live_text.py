"""What every client has been shown of items still streaming, for clients that arrive late.

Deltas are never stored (the completed item carries the whole text), and a thread's state holds
a streaming item only as of its last checkpoint. A client that attaches in the middle of an
answer needs the text already streamed, exactly as other clients saw it (after live redaction).
``LiveText`` follows the events the dispatcher publishes and keeps, per thread, the text of each
open item and the output of each running tool call; it forgets them when they complete. Pieces
are kept as lists and joined only when a client asks, so a long answer costs no copying.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from roder_core.threads.events import AgentMessageDelta, ItemCompleted, RuntimeEvent, ToolOutputDelta, TurnCompleted

#: Live output kept per running tool call (its tail): the card shows the tail, the result has all.
MAX_TOOL_OUTPUT = 256 * 1024


@dataclass
class _Pieces:
    kind: str = "text"
    parts: list[str] = field(default_factory=list)
    size: int = 0

    def add(self, text: str, keep: int | None = None) -> None:
        self.parts.append(text)
        self.size += len(text)
        if keep is not None and self.size > 2 * keep:  # trimmed now and then, not on every piece
            tail = "".join(self.parts)[-keep:]
            self.parts, self.size = [tail], len(tail)

    def text(self, keep: int | None = None) -> str:
        joined = "".join(self.parts)
        return joined[-keep:] if keep is not None else joined


@dataclass
class ThreadLiveText:
    #: item id -> (kind, text so far), in the order the items started streaming.
    items: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: call id -> live output so far (its last MAX_TOOL_OUTPUT characters).
    tool_output: dict[str, str] = field(default_factory=dict)


@dataclass
class _ThreadPieces:
    items: dict[str, _Pieces] = field(default_factory=dict)
    tool_output: dict[str, _Pieces] = field(default_factory=dict)


class LiveText:
    """Accumulates published deltas of open items; fed synchronously with the event stream."""

    def __init__(self) -> None:
        self._threads: dict[str, _ThreadPieces] = {}

    def observe(self, event: RuntimeEvent) -> None:
        if isinstance(event, AgentMessageDelta):  # every delta: build containers only when new
            live = self._threads.get(event.thread_id) or self._threads.setdefault(event.thread_id, _ThreadPieces())
            pieces = live.items.get(event.item_id)
            if pieces is None:
                pieces = live.items[event.item_id] = _Pieces(event.kind)
            pieces.add(event.delta)
        elif isinstance(event, ToolOutputDelta):
            live = self._threads.setdefault(event.thread_id, _ThreadPieces())
            live.tool_output.setdefault(event.call_id, _Pieces()).add(event.delta, MAX_TOOL_OUTPUT)
        elif isinstance(event, ItemCompleted):
            known = self._threads.get(event.thread_id)
            if known is not None:
                known.items.pop(event.item.id, None)
                call_id = getattr(event.item, "call_id", None)
                if call_id is not None and event.item.type != "toolCall":
                    known.tool_output.pop(call_id, None)
        elif isinstance(event, TurnCompleted):
            self._threads.pop(event.thread_id, None)

    def of(self, thread_id: str) -> ThreadLiveText:
        """One thread's live text (empty when nothing streams there)."""
        live = self._threads.get(thread_id)
        if live is None:
            return ThreadLiveText()
        return ThreadLiveText(
            {item_id: (p.kind, p.text()) for item_id, p in live.items.items()},
            {call_id: p.text(MAX_TOOL_OUTPUT) for call_id, p in live.tool_output.items()},
        )
