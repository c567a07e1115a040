"""``RemoteAppClient``: the ``AppClient`` interface over JSON-RPC to a running host.

It connects to a background host's private unix socket (``roder serve``) or to a remote app
server's WebSocket (``roder app-server --remote``, with its bearer token), and gives back the
same typed results and typed notifications ``LocalAppClient`` gives, so the app and one-shot
mode run unchanged on either. Results are validated into the method's result model; runtime
events become the runtime's event classes again, server notifications their models; a
notification this client does not know is skipped (the protocol only ever adds them).

When the connection ends, every waiting call fails with a -32000 error saying so, and every
notification stream ends; ``disconnected`` tells the front end why.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import itertools
import json
import logging
import pkgutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from roder_core.server.app_client import AppClient
from roder_core.server.errors import RUNTIME_ERROR, RpcError
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import SERVER_NOTIFICATIONS, MethodSpec, ProtocolModel

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
    from roder_core.server.stdio import MAX_LINE, read_lines

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
    """The app server's WebSocket with its bearer token (header) and ``roder.remote.v1``."""
    try:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus
    except ImportError:
        from roder_core.kernel.install_hints import extra_install_hint

        raise HostUnreachable(f"attaching over a WebSocket needs the 'remote' extra: {extra_install_hint('remote')}") from None
    from roder_core.server.websocket import MAX_MESSAGE, SUBPROTOCOL

    try:
        socket = await connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
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


@functools.cache
def load_protocol() -> None:
    """Register every method group's models (``protocol_*`` modules) without the handlers."""
    import roder_core.server as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("protocol_"):
            importlib.import_module(f"roder_core.server.{module.name}")


@functools.cache
def _server_notifications() -> dict[str, type[BaseModel]]:
    load_protocol()
    return {str(model.model_fields["method"].default): model for model in SERVER_NOTIFICATIONS}


def decode_notification(method: str, params: Any) -> Any | None:
    """The typed notification, or None for one this client does not know (skipped)."""
    from roder_core.threads.events import parse_event

    data = {**(params if isinstance(params, dict) else {}), "method": method}
    model = _server_notifications().get(method)
    try:
        if model is not None:
            return model.model_validate(data)
        return parse_event(data)
    except ValidationError:
        log.debug("skipped notification %s this client cannot read", method)
        return None


class RemoteAppClient(AppClient):
    """Typed calls and notifications over one connection to a host."""

    shared = True

    def __init__(self, transport: Transport) -> None:
        load_protocol()
        self.transport = transport
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._queues: list[NotificationQueue] = []
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

    # ------------------------------------------------------------------ calls

    async def call(self, spec: MethodSpec, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        if self.disconnected is not None:
            raise RpcError(RUNTIME_ERROR, self.disconnected)
        if isinstance(params, BaseModel):
            wire: Any = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        else:
            wire = params or {}
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self.transport.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": spec.name, "params": wire}))
            message = await future
        except (ConnectionError, OSError) as exc:
            raise RpcError(RUNTIME_ERROR, f"the connection to the host broke: {exc}") from None
        finally:
            self._waiting.pop(request_id, None)
        error = message.get("error")
        if error is not None:
            raise RpcError(int(error.get("code", RUNTIME_ERROR)), str(error.get("message", "")), error.get("data"))
        try:
            return spec.result.model_validate(message.get("result") or {})
        except ValidationError as exc:
            raise RpcError(RUNTIME_ERROR, f"the host's answer to {spec.name} does not fit this client: {exc}") from None

    # ------------------------------------------------------------------ notifications

    def subscribe(self, thread_id: str | None = None, maxsize: int = DEFAULT_MAXSIZE) -> NotificationQueue:
        queue = NotificationQueue(maxsize, thread_id)
        queue.attach(lambda: self._queues.remove(queue) if queue in self._queues else None)
        if self.disconnected is not None:
            queue.close()
        else:
            self._queues.append(queue)
        return queue

    async def _read(self) -> None:
        """Deliver messages in arrival order: notifications to the queues, replies to calls."""
        reason = "the host closed the connection"
        try:
            async for raw in self.transport.messages:
                try:
                    message = json.loads(raw)
                except ValueError:
                    log.warning("the host sent a message that is not JSON; skipped")
                    continue
                if isinstance(message, dict):
                    self._dispatch(message)
        except (ConnectionError, OSError) as exc:
            reason = f"the connection to the host broke: {exc}"
        except asyncio.CancelledError:
            reason = "the client closed the connection"
            raise
        finally:
            self._end(reason)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            notification = decode_notification(method, message.get("params"))
            if notification is not None:
                for queue in list(self._queues):
                    queue.offer(notification)
            return
        future = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(message)

    def _end(self, reason: str) -> None:
        if self.disconnected is None:
            self.disconnected = reason
        for future in self._waiting.values():
            if not future.done():
                future.set_result({"error": {"code": RUNTIME_ERROR, "message": reason}})
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
            self._segments = list(build_distribution(host).registry.status_segments)
        return self._segments

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        with contextlib.suppress(Exception):
            await self.transport.close()

    async def __aenter__(self) -> RemoteAppClient:
        return self
