"""Bounded, ordered notification queues: one per client connection.

Every queue is fed synchronously by the runtime's event bus (and by the server for its own
notifications), so each client sees events in emission order, which keeps per-thread order. The
queue never blocks the producer: a client that falls ``maxsize`` notifications behind loses its
backlog and gets a ``server/error`` (``CLIENT_BEHIND``) telling it to re-read its threads.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Union

from roder_core.errors import RoderError
from roder_core.server.errors import CLIENT_BEHIND
from roder_core.server.protocol import ErrorNotification, ServerNotification
from roder_core.threads.events import RuntimeEvent

Notification = Union[RuntimeEvent, ServerNotification]  # noqa: UP007 (a runtime alias of an Annotated union)
#: A JSON-RPC response, or the array of responses to a batch.
Reply = dict[str, Any] | list[dict[str, Any]]

DEFAULT_MAXSIZE = 10_000


class ClientFellBehind(RoderError):
    """The consumer did not keep up; notifications were dropped. Re-read state and resubscribe."""


class NotificationQueue:
    """FIFO of notifications for one consumer, with overflow instead of back-pressure."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE, thread_id: str | None = None) -> None:
        self.maxsize = maxsize
        self.thread_id = thread_id
        self.overflows = 0
        self._items: deque[Notification | Reply] = deque()
        self._pending_notifications = 0
        self._ready = asyncio.Event()
        #: Set the first time this consumer falls behind (transports cut such clients off).
        self.overflowed = asyncio.Event()
        self._closed = False
        self._detach: Callable[[], None] | None = None

    def attach(self, detach: Callable[[], None]) -> None:
        """Remember how to unhook this queue from its producer when it closes."""
        self._detach = detach

    def offer(self, notification: Notification) -> None:
        """Called by producers; never blocks and never raises."""
        if self._closed:
            return
        if self.thread_id is not None and getattr(notification, "thread_id", self.thread_id) != self.thread_id:
            return
        if self._pending_notifications >= self.maxsize:
            kept: deque[Notification | Reply] = deque(item for item in self._items if isinstance(item, dict | list))
            dropped = len(self._items) - len(kept)
            self._items = kept
            self.overflows += 1
            self.overflowed.set()
            self._pending_notifications = 1
            self._items.append(
                ErrorNotification(
                    code=CLIENT_BEHIND,
                    message=(f"client fell behind: {dropped} notifications were dropped; re-read open threads with thread/read"),
                )
            )
        else:
            self._items.append(notification)
            self._pending_notifications += 1
        self._ready.set()

    def put_reply(self, reply: Reply) -> bool:
        """A JSON-RPC response (or a batch's array of them) for a transport: never dropped, not
        counted against the bound (the connection bounds them by holding reading). False when
        the queue is closed and the reply will never be written."""
        if self._closed:
            return False
        self._items.append(reply)
        self._ready.set()
        return True

    def _pop(self) -> Notification | Reply:
        item = self._items.popleft()
        if not isinstance(item, dict | list):
            self._pending_notifications -= 1
        return item

    async def get(self) -> Notification | Reply | None:
        """The next notification (or transport reply), or None once closed and drained."""
        while True:
            if self._items:
                return self._pop()
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()

    def take_ready(self, limit: int) -> list[Notification | Reply]:
        """Up to ``limit`` more items that are already queued, without waiting (a writer sends
        them with the one ``get`` returned)."""
        taken: list[Notification | Reply] = []
        while self._items and len(taken) < limit:
            taken.append(self._pop())
        return taken

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._detach is not None:
            self._detach()
            self._detach = None
        self._ready.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)

    async def __aiter__(self) -> AsyncIterator[Notification]:
        """Typed notifications in order; raises ClientFellBehind where the backlog was cut."""
        while True:
            item = await self.get()
            if item is None:
                return
            if isinstance(item, ErrorNotification) and item.code == CLIENT_BEHIND:
                raise ClientFellBehind(item.message)
            if not isinstance(item, dict | list):
                yield item


class Fanout:
    """Distributes runtime events and server notifications to every connected queue."""

    def __init__(self) -> None:
        self._queues: list[NotificationQueue] = []

    def open(self, maxsize: int = DEFAULT_MAXSIZE, thread_id: str | None = None) -> NotificationQueue:
        queue = NotificationQueue(maxsize, thread_id)
        self._queues.append(queue)
        queue.attach(lambda: self._queues.remove(queue) if queue in self._queues else None)
        return queue

    def publish(self, notification: Notification) -> None:
        for queue in list(self._queues):
            queue.offer(notification)

    def __len__(self) -> int:
        return len(self._queues)
