"""Typed JSON-RPC clients of a Roder app server in another process: over stdio pipes or a WebSocket.

They have the same ``call(spec, params) -> result`` as the in-process ``LocalAppClient``, so code
written against one works against the others; only the transport differs::

    async with await StdioRpcClient.spawn(["roder", "app-server", "--provider", "mock"]) as client:
        info = await client.call(INITIALIZE, InitializeParams())
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread

    async with await WebSocketRpcClient.connect("ws://127.0.0.1:8765", token) as client:
        ...

Results are validated against the method's result model (extra fields from a newer server are
ignored); errors arrive as ``RpcError`` with the server's code, message and data. Notifications
are parsed into the runtime's typed events and the server's own notification models; methods this
client does not know are skipped, as seed 004 asks of clients.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import itertools
import json
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Self, TypeVar, overload

from pydantic import BaseModel

from roder_core import bounded_json
from roder_core.errors import RoderError
from roder_core.server.errors import RUNTIME_ERROR, RpcError
from roder_core.server.fanout import Notification
from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel
from roder_core.server.schema import notification_models

P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)

#: Largest message either side may send (file contents travel base64-encoded).
MAX_MESSAGE = 64 * 1024 * 1024
#: The subprotocol the remote app server echoes (``roder_core.server.websocket.SUBPROTOCOL``).
REMOTE_SUBPROTOCOL = "roder.remote.v1"


class ConnectionLost(RoderError):
    """The server went away (process ended, socket closed) before answering."""


@functools.cache
def load_protocol() -> None:
    """Register every method group's models and notifications (the ``protocol_*`` modules)
    without importing the handlers, which would pull in the runtime a client does not need."""
    import roder_core.server as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("protocol_"):
            importlib.import_module(f"roder_core.server.{module.name}")


@functools.cache
def _notification_models() -> dict[str, type[BaseModel]]:
    load_protocol()
    return notification_models()


def parse_notification(message: dict[str, Any]) -> Notification | None:
    """A typed notification from its JSON-RPC form; None for methods this client does not know."""
    method = message.get("method")
    model = _notification_models().get(method) if isinstance(method, str) else None
    if model is None:
        return None
    notification: Notification = model.model_validate({**(message.get("params") or {}), "method": method})  # type: ignore[assignment]
    return notification


class RpcClient(ABC):
    """Request ids, pending replies and typed notifications over any message transport.

    Subclasses provide ``_send`` (one JSON text) and feed every received text to ``_receive``;
    ``_lost`` fails the pending calls when the transport ends.
    """

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._closed: BaseException | None = None
        self.notifications: asyncio.Queue[Notification] = asyncio.Queue()

    @abstractmethod
    async def _send(self, text: str) -> None:
        """Deliver one JSON-RPC message."""

    @overload
    async def call(self, spec: MethodSpec[NoParams, R]) -> R: ...

    @overload
    async def call(self, spec: MethodSpec[P, R], params: P) -> R: ...

    async def call(self, spec: MethodSpec[Any, R], params: ProtocolModel | None = None) -> R:
        """Run ``spec``'s method on the server; its typed result, or ``RpcError``."""
        return spec.result_of(await self.request(spec.name, params.wire() if params is not None else None))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any method by name with wire-shaped params; the decoded ``result``."""
        if self._closed is not None:
            raise ConnectionLost(f"the app server connection is closed: {self._closed}")
        request_id = next(self._ids)
        reply = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(json.dumps(message, ensure_ascii=False))
            return await reply
        finally:
            self._pending.pop(request_id, None)

    def _receive(self, text: str | bytes) -> None:
        message = bounded_json.loads(text)
        if not isinstance(message, dict):
            return
        if "method" in message:
            notification = parse_notification(message)
            if notification is not None:
                self._notify(notification)
            return
        reply = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if reply is None or reply.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            reply.set_exception(RpcError(int(error.get("code", RUNTIME_ERROR)), str(error.get("message", "")), error.get("data")))
        else:
            reply.set_result(message.get("result"))

    def _notify(self, notification: Notification) -> None:
        """Hand a notification to the caller: the ``notifications`` queue, unless a subclass
        delivers them otherwise."""
        self.notifications.put_nowait(notification)

    def _lost(self, reason: BaseException) -> None:
        self._closed = reason
        for reply in self._pending.values():
            if not reply.done():
                reply.set_exception(ConnectionLost(f"the app server connection ended: {reason}"))

    async def next_notification(self, method: str) -> Notification:
        """The next notification named ``method`` (earlier ones of other names are dropped)."""
        while True:
            notification = await self.notifications.get()
            if notification.method == method:
                return notification

    @abstractmethod
    async def close(self) -> None:
        """End the connection and wait for the reader to finish."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class StdioRpcClient(RpcClient):
    """``roder app-server`` as a child process: newline-delimited JSON over its stdin and stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        super().__init__()
        self.process = process
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None) -> StdioRpcClient:
        """Start the server command; its stderr is left to the caller's terminal."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=MAX_MESSAGE,
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self._receive(line)
        self._lost(EOFError("the server closed its stdout"))

    async def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")
        await self.process.stdin.drain()

    async def close(self) -> None:
        """Close the server's stdin (it exits) and wait for it (``process.returncode`` says how)."""
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            self.process.stdin.close()
        await self.process.wait()
        await self._reader


class WebSocketRpcClient(RpcClient):
    """A client of ``roder app-server --remote`` (needs the ``remote`` extra: websockets)."""

    def __init__(self, socket: Any) -> None:
        super().__init__()
        self.socket = socket
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, url: str, token: str) -> WebSocketRpcClient:
        """Connect with ``Authorization: Bearer <token>`` and the ``roder.remote.v1`` subprotocol."""
        from websockets.asyncio.client import connect

        socket = await connect(
            url,
            subprotocols=[REMOTE_SUBPROTOCOL],  # type: ignore[list-item]
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=MAX_MESSAGE,
        )
        return cls(socket)

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in self.socket:
                self._receive(message)
        except ConnectionClosed as exc:
            self._lost(exc)
        else:
            self._lost(EOFError("the server closed the WebSocket"))

    async def _send(self, text: str) -> None:
        await self.socket.send(text)

    async def close(self) -> None:
        await self.socket.close()
        await self._reader
