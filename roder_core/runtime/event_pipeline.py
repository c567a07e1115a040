"""Where every runtime event goes: redact, reduce into the open thread, persist, publish.

One path for all events, in that order, so what a client sees, what the thread holds in memory
and what the store saves are the same (redacted) event. Deltas take the short way
(``publish_live``): never stored one by one, redacted as a stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from roder_core.brokers.live_redaction import LiveRedaction
from roder_core.brokers.secrets import SecretRedactor, redact_data
from roder_core.runtime.thread_table import ThreadTable
from roder_core.threads.events import (
    AgentMessageDelta,
    ErrorEvent,
    EventBus,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    RuntimeEvent,
    ToolOutputDelta,
    TurnStarted,
)
from roder_core.threads.reducer import apply_event

if TYPE_CHECKING:
    from roder_core.ir import ThreadHeader
    from roder_core.kernel.services import ThreadStore

log = logging.getLogger(__name__)


class EventPipeline:
    """The four steps every event takes. ``redactor`` None: nothing secret is known."""

    def __init__(self, threads: ThreadTable, bus: EventBus, redactor: Callable[[str], str] | None) -> None:
        self.threads = threads
        self.bus = bus
        self._redactor = redactor
        self.redact: Callable[[str], str] = redactor or (lambda text: text)
        #: Live deltas redacted as streams (a secret split across two deltas is still caught).
        self._live = LiveRedaction(self.redact) if isinstance(self.redact, SecretRedactor) else None
        #: Threads whose saving failed, with their events not saved since, in order
        #: (``_stop_saving``); written when the thread's next turn starts (``_catch_up``).
        self._unsaved: dict[str, list[RuntimeEvent]] = {}

    async def emit(self, event: RuntimeEvent) -> None:
        """Apply to live state, persist (unless a delta or an ephemeral thread), then fan out."""
        if self._live is not None:
            for rest in self._live.ending(event):  # what live streams held back, before their end
                self.bus.publish(rest)
        event = self.redacted(event)
        state = self.threads.find(event.thread_id)
        if state is not None:
            apply_event(state.thread, event)
            store = self.threads.store
            if event.persisted and store is not None and self.threads.persistent(state):
                await self._save(store, state.thread.header(), event)
        self.bus.publish(event)

    async def _save(self, store: ThreadStore, header: ThreadHeader, event: RuntimeEvent) -> None:
        pending = self._unsaved.get(event.thread_id)
        if pending is not None:
            pending.append(event)
            if isinstance(event, TurnStarted):
                await self._catch_up(store, header, event.thread_id, pending)
            return
        try:
            await store.append(header, event)
        except Exception as exc:  # a full disk must not lose the live turn silently
            self._stop_saving(event.thread_id, exc, event)

    def _stop_saving(self, thread_id: str, exc: Exception, event: RuntimeEvent) -> None:
        """The first event of a thread that could not be saved: said (a log line, and an
        ``error`` event every client shows), and the thread's later events are kept back, in
        order, until its next turn starts (``_catch_up``), so its file keeps a readable
        beginning instead of one with holes (the store takes back a partly written line)."""
        self._unsaved[thread_id] = [event]
        later = "the rest is saved when its next turn starts, if there is room then"
        message = f"could not save thread {thread_id}: {_reason(exc)}; {later}"
        log.error("%s", message)
        self.bus.publish(ErrorEvent(thread_id=thread_id, message=message, kind="persistence"))

    async def _catch_up(self, store: ThreadStore, header: ThreadHeader, thread_id: str, pending: list[RuntimeEvent]) -> None:
        """A new turn of a thread whose saving failed: write what was kept back, in order. Until
        that succeeds every turn says again that the thread is not saved, so a client that
        attached after the first failure (a host's) is told too, and nothing is lost once the
        disk has room again."""
        written = 0
        try:
            for waiting in pending:
                await store.append(header, waiting)
                written += 1
        except Exception as exc:
            del pending[:written]
            message = f"thread {thread_id} is still not saved: {_reason(exc)}; {len(pending)} events wait for its next turn"
            log.error("%s", message)
            self.bus.publish(ErrorEvent(thread_id=thread_id, message=message, kind="persistence"))
            return
        del self._unsaved[thread_id]
        log.warning("thread %s is saved again: %d events that waited were written", thread_id, written)

    def publish_live(self, event: RuntimeEvent) -> None:
        """Deltas: no persistence, no await; straight to subscribers (text redacted as a stream)."""
        if self._live is not None and isinstance(event, AgentMessageDelta | ToolOutputDelta):
            shown = self._live.feed(event)
            if shown is not None:
                self.bus.publish(shown)
            return
        self.bus.publish(self.redacted(event))

    def redacted(self, event: RuntimeEvent) -> RuntimeEvent:
        """The event as it is stored and shown: known secret values removed from every string it
        carries (a streaming item's snapshot also leaves out an end that may begin a secret), and
        an item event holding its own copy of the item, never the object a turn keeps growing in
        place: transports serialize later, and must show the item as it was when emitted."""
        snapshot = isinstance(event, ItemStarted | ItemUpdated | ItemCompleted)
        if self._redactor is None and not snapshot:
            return event
        data = event.model_dump(mode="json", by_alias=True)
        changed = False
        if self._redactor is not None:
            if isinstance(event, ItemUpdated) and isinstance(self.redact, SecretRedactor):
                for name in ("text", "summary"):
                    if isinstance(data["item"].get(name), str):
                        data["item"][name] = self.redact.releasable(data["item"][name])
            data, changed = redact_data(data, self.redact)
        # The event's own class rebuilds it: the union adapter of ``parse_event`` costs tens of
        # ms to build, and a one-shot run would otherwise build it for its first item event.
        return type(event).model_validate(data) if snapshot or changed else event


def _reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
