"""``RemoteAppClient``: the ``AppClient`` interface over JSON-RPC to a running host.

It connects to a background host's private unix socket (``roder serve``) or to a remote app
server's WebSocket (``roder app-server --remote`` or ``roder serve --remote``, with its bearer
token), and gives back the same typed results and typed notifications ``LocalAppClient`` gives,
so the app and one-shot mode run unchanged on either. Requests, replies and notification
parsing are ``RpcClient``'s (``roder_core.server.rpc_client``); this class adds the transports,
``subscribe`` with bounded per-consumer queues, and what an attached app needs.

When the connection ends, every waiting call fails, every notification stream ends, and
``disconnected`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.server.app_client import AppClient
from roder_core.server.errors import RUNTIME_ERROR, RpcError
from roder_core.server.fanout import DEFAULT_MAXSIZE, Notification, NotificationQueue
from roder_core.server.protocol import METHODS
from roder_core.server.rpc_client import MAX_MESSAGE, REMOTE_SUBPROTOCOL, RpcClient, load_protocol

if TYPE_CHECKING:
    from roder_core.kernel.services import StatusSegment

log = logging.getLogger(__name__)


class HostUnreachable(RpcError):
    """No host answers at that address (not running, wrong token, refused)."""

    def __init__(self, message: str) -> None:
        super().__init__(RUNTIME_ERROR, message)


@dataclass
class Transport:
    """A message channel: send one JSON text, iterate received ones, close."""

    send: Callable[[str], Awaitable[None]]
    messages: AsyncIterator[str | bytes]
    close: Callable[[], Awaitable[None]]
    #: What the client is connected to, for messages ("unix:/path", "ws://host:port").
    address: str


async def unix_transport(path: Path) -> Transport:
    from roder_core.server.line_stream import read_lines
    from roder_core.server.wire import MAX_LINE

    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_LINE)
    except OSError as exc:
        raise HostUnreachable(f"no Roder host answers on {path}: {exc.strerror or exc}") from None

    async def send(text: str) -> None:
        writer.write(text.encode("utf-8") + b"\n")
        await writer.drain()

    async def close() -> None:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()

    def too_long() -> None:
        log.warning("a message from the host was longer than %d bytes and was skipped", MAX_LINE)

    return Transport(send, read_lines(reader, too_long), close, f"unix:{path}")


async def websocket_transport(url: str, token: str) -> Transport:
    """The app server's WebSocket with its bearer token (header) and ``roder.remote.v1``; a
    refusal says what the server answered (401 for a wrong token, 403 for Host or Origin)."""
    try:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus
    except ImportError:
        from roder_core.kernel.install_hints import extra_install_hint

        raise HostUnreachable(f"attaching over a WebSocket needs the 'remote' extra: {extra_install_hint('remote')}") from None
    try:
        socket = await connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            subprotocols=[REMOTE_SUBPROTOCOL],  # type: ignore[list-item]
            max_size=MAX_MESSAGE,
            open_timeout=15,
        )
    except InvalidStatus as exc:
        body = exc.response.body.decode("utf-8", "replace").strip() if exc.response.body else ""
        raise HostUnreachable(f"{url} refused the connection: HTTP {exc.response.status_code} {body}".rstrip()) from None
    except (OSError, TimeoutError) as exc:
        raise HostUnreachable(f"cannot reach {url}: {exc}") from None

    async def messages() -> AsyncIterator[str | bytes]:
        with contextlib.suppress(ConnectionClosed):
            async for message in socket:
                yield message

    async def close() -> None:
        await socket.close()

    return Transport(socket.send, messages(), close, url)


class RemoteAppClient(RpcClient, AppClient):
    """Typed calls and notifications over one connection to a host."""

    shared = True

    def __init__(self, transport: Transport) -> None:
        super().__init__()
        load_protocol()
        self.transport = transport
        self._queues: list[NotificationQueue] = []
        self._served = {}
        self._segments: list[StatusSegment] | None = None
        #: Why the connection ended (set once it has).
        self.disconnected: str | None = None
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read(), name=f"roder client {transport.address}")

    @classmethod
    async def connect_unix(cls, path: Path) -> RemoteAppClient:
        return cls(await unix_transport(path))

    @classmethod
    async def connect_websocket(cls, url: str, token: str) -> RemoteAppClient:
        return cls(await websocket_transport(url, token))

    @property
    def address(self) -> str:
        return self.transport.address

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Methods served here (``serve_locally``) never reach the host; the rest go to it."""
        handler = self._served.get(method)
        if handler is None:
            return await super().request(method, params)
        result = await handler(METHODS[method].params.model_validate(params or {}))
        return result.wire()

    async def _send(self, text: str) -> None:
        try:
            await self.transport.send(text)
        except (ConnectionError, OSError) as exc:
            raise RpcError(RUNTIME_ERROR, f"the connection to the host broke: {exc}") from None

    async def _read(self) -> None:
        """Messages in arrival order: notifications to the queues, replies to the calls."""
        reason: BaseException = EOFError("the host closed the connection")
        try:
            async for raw in self.transport.messages:
                try:
                    self._receive(raw)
                except ValueError:
                    log.warning("the host sent a message that is not JSON; skipped")
        except (ConnectionError, OSError) as exc:
            reason = exc
        except asyncio.CancelledError:
            reason = EOFError("the client closed the connection")
            raise
        finally:
            self._lost(reason)

    # ------------------------------------------------------------------ notifications

    def subscribe(self, thread_id: str | None = None, maxsize: int = DEFAULT_MAXSIZE) -> NotificationQueue:
        queue = NotificationQueue(maxsize, thread_id)
        queue.attach(lambda: self._queues.remove(queue) if queue in self._queues else None)
        if self.disconnected is not None:
            queue.close()
        else:
            self._queues.append(queue)
        return queue

    def _notify(self, notification: Notification) -> None:
        for queue in list(self._queues):
            queue.offer(notification)

    def _lost(self, reason: BaseException) -> None:
        if self.disconnected is None:
            self.disconnected = str(reason) or type(reason).__name__
        super()._lost(reason)
        for queue in list(self._queues):
            queue.close()
        self._queues.clear()
        self.closed.set()

    # ------------------------------------------------------------------ surfaces, lifecycle

    def status_segments(self, workspace: str | None = None) -> list[StatusSegment]:
        """Segments render a state dict on the client, so they come from the extensions
        installed here. A project's own extensions load only for the host's workspace on this
        machine and when the user trusted it, as they would for the app without a host; from
        another machine none do (this client runs no project code it cannot see)."""
        if self._segments is None:
            from roder_core.kernel.distribution import build_distribution, make_host

            folder = Path(workspace) if workspace and Path(workspace).is_dir() else None
            host = make_host(folder, interactive=True, trust=None if folder is not None else False)
            # Only the extensions that may provide segments are imported (the extension index).
            self._segments = list(build_distribution(host, kinds={"StatusSegment"}).registry.status_segments)
        return self._segments

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        with contextlib.suppress(Exception):
            await self.transport.close()

    async def __aenter__(self) -> RemoteAppClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
