"""Where every runtime event goes: redact, reduce into the open thread, persist, publish.

One path for all events, in that order, so what a client sees, what the thread holds in memory
and what the store saves are the same (redacted) event. Deltas take the short way
(``publish_live``): never stored one by one, redacted as a stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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
)
from roder_core.threads.reducer import apply_event

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
        #: Threads whose saving failed in this process (``_stop_saving``).
        self._unsaved: set[str] = set()

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
            unsaved = event.thread_id in self._unsaved
            if event.persisted and store is not None and self.threads.persistent(state) and not unsaved:
                try:
                    await store.append(state.thread.header(), event)
                except Exception as exc:  # a full disk must not lose the live turn silently
                    self._stop_saving(event.thread_id, exc)
        self.bus.publish(event)

    def _stop_saving(self, thread_id: str, exc: Exception) -> None:
        """The first event of a thread that could not be saved: said once (a log line, and an
        ``error`` event every client shows), and the thread's later events are not appended in
        this process, so its file keeps a readable beginning instead of one with holes (the store
        takes back a partly written line)."""
        self._unsaved.add(thread_id)
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        message = f"could not save thread {thread_id}: {reason}; the rest of this session is not saved"
        log.error("%s", message)
        self.bus.publish(ErrorEvent(thread_id=thread_id, message=message, kind="persistence"))

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
