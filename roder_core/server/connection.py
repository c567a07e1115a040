"""One client connection of a JSON transport (stdio or WebSocket).

Incoming text messages are decoded and dispatched concurrently (a long ``turn/interrupt`` never
holds up the next request); responses and notifications leave through one writer task in the
order they were produced. Notifications wait in a bounded queue, so a client that stops reading
never blocks the runtime or other clients: it gets a ``server/error`` (``CLIENT_BEHIND``) instead.
Responses are never dropped, so they are bounded the other way: a request holds one of
``MAX_IN_FLIGHT`` slots until its response has been handed to the transport, and reading pauses
while every slot is taken. A client that sends requests but never reads the answers therefore
stops being read (its own writes block) instead of growing the server's memory.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from roder_core import bounded_json
from roder_core.server.dispatcher import CallContext, Dispatcher, error_response, parse_error
from roder_core.server.errors import CLIENT_BEHIND, INVALID_REQUEST, RpcError
from roder_core.server.fanout import NotificationQueue, Reply
from roder_core.server.protocol import ErrorNotification, RemoteInfo

log = logging.getLogger(__name__)

#: Requests of one connection handled, or answered but not yet written, at the same time;
#: reading pauses beyond this.
MAX_IN_FLIGHT = 64
#: Most requests in one JSON-RPC batch array: a batch runs its requests at once and answers in
#: one array, so a larger one would take memory and time in proportion to one line's size.
MAX_BATCH = 1000
#: Queued messages a newline-framed transport writes at once (see ``Connection.lines``).
MAX_WRITE_BATCH = 256

_ids = itertools.count(1)


def encode(message: Reply) -> str:
    """One JSON line; falls back to ASCII escapes when a client sent lone surrogates."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":"))


def notification_message(notification: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": notification.method, "params": notification.params()}


def decode(raw: str | bytes) -> tuple[Any, dict[str, Any] | None]:
    """(message, None) or (None, parse-error response)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return bounded_json.loads(text, parse_constant=_reject_constant), None
    except UnicodeDecodeError as exc:
        return None, parse_error(f"not UTF-8 ({exc.reason} at byte {exc.start})")
    except json.JSONDecodeError as exc:
        return None, parse_error(f"{exc.msg} at line {exc.lineno} column {exc.colno}")
    except (RecursionError, ValueError) as exc:
        return None, parse_error(str(exc) or "nesting too deep")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


class Connection:
    """Drives one client: reads messages, dispatches them, writes replies and notifications."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        send: Callable[[str], Awaitable[None]],
        *,
        remote: RemoteInfo | None = None,
        close_when_behind: bool = False,
        queue_size: int | None = None,
        lines: bool = False,
    ) -> None:
        self.dispatcher = dispatcher
        self._send = send
        #: The transport ends each message with a newline (stdio, the unix socket), so the
        #: messages already queued go out in one write: one system call and one wake-up of the
        #: client for a burst (an item's completion, the usage, the next item's start), not one each.
        self.lines = lines
        self.close_when_behind = close_when_behind
        self.id = f"conn-{next(_ids)}"
        self.queue: NotificationQueue = dispatcher.connect(queue_size)
        self.context = CallContext(connection_id=self.id, notify=self.queue.offer, remote=remote)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        #: ``id()`` of the queued responses that hold a request's slot (a transport's own
        #: replies, such as the one to an over-long line, hold none).
        self._holding: set[int] = set()
        self._writer: asyncio.Task[None] | None = None
        self.fell_behind = asyncio.Event()

    # ------------------------------------------------------------------ reading

    async def serve(self, messages: AsyncIterator[str | bytes]) -> None:
        """Handle every message until the client stops sending; in-flight requests finish."""
        self._writer = asyncio.create_task(self._write_loop(), name=f"{self.id} writer")
        try:
            async for raw in messages:
                if isinstance(raw, bytes | str) and not raw.strip():
                    continue
                await self._slots.acquire()
                task = asyncio.create_task(self._handle(raw))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
        finally:
            if self._in_flight:
                await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def _handle(self, raw: str | bytes) -> None:
        """Decode and dispatch one message; its slot passes to the response, which frees it
        once written (``_write_loop``), or is freed here when there is nothing to write."""
        queued = False
        try:
            message, error = decode(raw)
            reply: Reply | None = error
            if error is None:
                reply = await self._dispatch(message)
            if reply is not None:
                self._holding.add(id(reply))
                queued = self.queue.put_reply(reply)
                if not queued:
                    self._holding.discard(id(reply))
        except Exception:  # the dispatcher maps errors itself; this is a last line of defence
            log.exception("request handling failed")
        finally:
            if not queued:
                self._slots.release()

    async def _dispatch(self, message: Any) -> Reply | None:
        """One message or a JSON-RPC 2.0 batch: an array gets an array of the responses of its
        requests (run concurrently), a batch of notifications only gets nothing, and an empty
        array gets one ``INVALID_REQUEST`` error, as the specification says."""
        if not isinstance(message, list):
            return await self.dispatcher.handle_message(message, self.context)
        if not message:
            return error_response(None, RpcError(INVALID_REQUEST, "invalid request: empty batch"))
        if len(message) > MAX_BATCH:
            return error_response(
                None,
                RpcError(
                    INVALID_REQUEST,
                    f"invalid request: a batch of {len(message)} messages (at most {MAX_BATCH}); none was run",
                ),
            )
        replies = await asyncio.gather(*(self.dispatcher.handle_message(m, self.context) for m in message))
        answered = [r for r in replies if r is not None]
        return answered or None

    # ------------------------------------------------------------------ writing

    async def _write_loop(self) -> None:
        try:
            await self._write_queued()
        finally:
            # Nothing more is written: free the slots of responses still queued, so reading
            # (which may wait for a slot) goes on to see the client's end.
            self.queue.close()
            self._release_written(self.queue.take_ready(len(self.queue)))

    async def _write_queued(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            batch = [item, *self.queue.take_ready(MAX_WRITE_BATCH - 1)] if self.lines else [item]
            texts = [encode(m if isinstance(m, dict | list) else notification_message(m)) for m in batch]
            try:
                await self._send("\n".join(texts))
            except Exception as exc:
                log.info("%s: client went away (%s)", self.id, exc)
                return
            finally:
                self._release_written(batch)
            if any(isinstance(m, ErrorNotification) and m.code == CLIENT_BEHIND for m in batch):
                self.fell_behind.set()
                if self.close_when_behind:
                    return

    def _release_written(self, items: list[Any]) -> None:
        """Each response (or batch array) held its request's slot until now."""
        for item in items:
            if id(item) in self._holding:
                self._holding.discard(id(item))
                self._slots.release()

    async def close(self, flush_timeout: float = 5.0) -> None:
        """Stop receiving notifications, send what is queued, then stop the writer."""
        self.queue.close()
        for task in list(self._in_flight):
            task.cancel()
        if self._writer is not None:
            try:
                async with asyncio.timeout(flush_timeout):
                    await self._writer
            except (TimeoutError, asyncio.CancelledError):
                self._writer.cancel()
                current = asyncio.current_task()
                if current is not None and current.cancelling():  # close() itself was cancelled: pass it on
                    raise
