"""The dispatcher: validates a method call against its protocol models and runs its handler.

One dispatcher serves one runtime and any number of connections (stdio, WebSocket clients, the
in-process client, the ACP agent). Handlers live in ``roder_core.server.methods``; each takes the
dispatcher, its typed params and the caller's ``CallContext`` and returns its typed result.
Errors leave as ``RpcError`` with a seed-004 code; nothing a client sends can crash the server.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from roder_core.errors import RoderError, ThreadNotFoundError, UnknownProviderError, UnsafePathError
from roder_core.server.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    POLICY_DENIED,
    RUNTIME_ERROR,
    RpcError,
)
from roder_core.server.fanout import DEFAULT_MAXSIZE, Fanout, Notification, NotificationQueue
from roder_core.server.live_text import LiveText
from roder_core.server.plugin_watch import PluginWatch
from roder_core.server.protocol import METHODS, MethodSpec, ProtocolModel, RemoteInfo
from roder_core.settings.config import ConfigError

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.runtime.bootstrap import Started
    from roder_core.runtime.runtime import Runtime
    from roder_core.threads.events import RuntimeEvent

log = logging.getLogger(__name__)

P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)
Handler = Callable[["Dispatcher", Any, "CallContext"], Awaitable[ProtocolModel]]
#: The handler of one method: its spec's params in, its spec's result out.
TypedHandler = Callable[["Dispatcher", P, "CallContext"], Awaitable[R]]

#: method name -> handler; filled by the modules in ``roder_core.server.methods``.
HANDLERS: dict[str, Handler] = {}

#: The control plane's own broker identity: it reads workspace files (fs/*, attachments) and
#: runs commands (command/exec) and undoes hunks (hunk/rollback), always after policy.
SERVER_EXTENSION_ID = "roder-app-server"
SERVER_CAPABILITIES = frozenset({"fs.read.workspace", "fs.write.workspace", "process.spawn.exec", "process.spawn.shell"})

#: Longest id (``threadId``, ``traceId``, ...) a client may pass; ids become file names.
MAX_ID_LENGTH = 200

#: The handlers every client calls (handshake, threads, turns, approvals): imported when the
#: first dispatcher is built.
CORE_METHOD_MODULE = "roder_core.server.methods.core"
#: Every module defining handlers. Those beyond the core are imported on the first call of a
#: method the core does not handle (or when the whole table is listed): a one-shot run never
#: calls them, and their protocol models cost about 0.14 s of CPU to build.
METHOD_MODULES = (
    CORE_METHOD_MODULE,
    "roder_core.server.methods.host",
    "roder_core.server.methods.features",
    "roder_core.server.methods.changes",
    "roder_core.server.methods.runners",
    "roder_core.server.methods.tasks",
    "roder_core.server.methods.media",
    "roder_core.server.methods.plugins",
    "roder_core.server.methods.attach",
    "roder_core.server.methods.sessions",
    "roder_core.server.methods.audit",
    "roder_core.server.methods.trust",
    "roder_core.server.methods.plan_review",
    "roder_core.server.methods.teams",
    "roder_core.server.methods.workflows",
    "roder_core.server.methods.auth",
)


def load_method_modules() -> None:
    """Import every handler module, so HANDLERS and METHODS hold the whole method table."""
    for module in METHOD_MODULES:
        importlib.import_module(module)


def handles(spec: MethodSpec[P, R]) -> Callable[[TypedHandler[P, R]], TypedHandler[P, R]]:
    """Register the decorated coroutine as the handler of ``spec``'s method.

    Typed by the spec: a handler whose params or result disagree with its ``MethodSpec`` fails
    ``mypy --strict``, and "find references" from a client's ``call(SPEC, ...)`` reaches it."""

    def register(func: TypedHandler[P, R]) -> TypedHandler[P, R]:
        if METHODS.get(spec.name) is not spec:
            raise ValueError(f"{spec.name!r} is not a registered method of roder_core.server.protocol")
        HANDLERS[spec.name] = func
        return func

    return register


@dataclass
class CallContext:
    """Who is calling: the connection's id, how to reach it and what kind of client it is."""

    connection_id: str = "local"
    #: Sends a server notification to this connection only (command output, task updates).
    notify: Callable[[Notification], None] = lambda _n: None
    remote: RemoteInfo | None = None
    client_name: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "params"
        parts.append(f"{where}: {err['msg']}")
    return "invalid params: " + "; ".join(parts)


class Dispatcher:
    """Method table + runtime + fan-out of notifications to connected clients."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        started: Started | None = None,
        persist_config: bool = False,
        queue_size: int = DEFAULT_MAXSIZE,
    ) -> None:
        importlib.import_module(CORE_METHOD_MODULE)
        self.runtime = runtime
        self.started = started
        self.persist_config = persist_config
        self.queue_size = queue_size
        self.fanout = Fanout()
        #: Text streamed so far of items still open, for clients that attach mid-answer.
        self.live = LiveText()
        self.services: dict[str, Any] = {}
        self._remove_listener = runtime.bus.add_listener(self._publish)

    def _publish(self, event: RuntimeEvent) -> None:
        self.live.observe(event)
        self.fanout.publish(event)

    # ------------------------------------------------------------------ typed calls

    def method_spec(self, method: str) -> MethodSpec[Any, Any]:
        if method not in HANDLERS:
            load_method_modules()
        spec = METHODS.get(method)
        if spec is None or method not in HANDLERS:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method!r}")
        return spec

    def parse_params(self, spec: MethodSpec[Any, Any], raw: Any) -> ProtocolModel:
        if raw is None:
            raw = {}
        if isinstance(raw, spec.params):
            typed: ProtocolModel = raw
            return typed
        if isinstance(raw, BaseModel):
            raw = raw.model_dump(by_alias=True)
        if not isinstance(raw, dict):
            raise RpcError(INVALID_PARAMS, f"invalid params: {spec.name} takes an object of named params")
        _check_id_lengths(raw)
        try:
            parsed: ProtocolModel = spec.params.model_validate(raw)
        except ValidationError as exc:
            raise RpcError(INVALID_PARAMS, _validation_message(exc)) from None
        return parsed

    async def call(self, method: str, params: Any = None, ctx: CallContext | None = None) -> ProtocolModel:
        """Run one method with typed (or dict) params; raises RpcError on any failure."""
        spec = self.method_spec(method)
        parsed = self.parse_params(spec, params)
        try:
            return await HANDLERS[method](self, parsed, ctx or CallContext())
        except RpcError:
            raise
        except ValidationError as exc:
            raise RpcError(INVALID_PARAMS, _validation_message(exc)) from None
        except (ThreadNotFoundError, UnknownProviderError, UnsafePathError) as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        except PermissionError as exc:  # brokers refuse with BrokerDenied (a PermissionError)
            raise RpcError(POLICY_DENIED, f"denied: {exc}") from None
        except (RoderError, ConfigError) as exc:
            raise RpcError(RUNTIME_ERROR, str(exc)) from None
        except Exception as exc:
            log.exception("method %s failed", method)
            raise RpcError(RUNTIME_ERROR, f"internal error in {method}: {type(exc).__name__}: {exc}") from None

    # ------------------------------------------------------------------ JSON-RPC

    async def handle_message(self, message: Any, ctx: CallContext) -> dict[str, Any] | None:
        """One decoded JSON-RPC message -> its response object (None for notifications)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            request_id = message.get("id") if isinstance(message, dict) else None
            if not _valid_id(request_id):
                request_id = None
            return error_response(
                request_id,
                RpcError(INVALID_REQUEST, 'invalid request: expected {"jsonrpc": "2.0", "method": ..., "id": ...}'),
            )
        request_id = message.get("id")
        if not _valid_id(request_id):
            return error_response(None, RpcError(INVALID_REQUEST, "invalid request: id must be a string or a number"))
        is_notification = "id" not in message
        try:
            result = await self.call(message["method"], message.get("params"), ctx)
        except RpcError as exc:
            return None if is_notification else error_response(request_id, exc)
        if is_notification:
            return None
        return {"jsonrpc": "2.0", "id": request_id, "result": result.wire()}

    def brokers(self, workspace: Path, *, runner: str | None = None) -> Brokers:
        """The control plane's brokers for ``workspace``: this machine's, or runner ``runner``'s
        (its session for ``workspace`` must be open)."""
        return self.runtime.brokers_for(workspace, SERVER_EXTENSION_ID, SERVER_CAPABILITIES, runner=runner)

    def connect(self, maxsize: int | None = None, thread_id: str | None = None) -> NotificationQueue:
        """Open a bounded notification queue for a new client (the first one starts watching
        for plugin changes made by another process)."""
        self._watch_plugins()
        return self.fanout.open(maxsize or self.queue_size, thread_id)

    def _watch_plugins(self) -> None:
        if PluginWatch.KEY in self.services:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a client connecting outside an event loop has no changes to hear
            return
        options = self.runtime.options
        watch = PluginWatch.of(options.paths, options.cwd, options.trusted, self._plugins_changed_elsewhere)
        self.services[PluginWatch.KEY] = watch
        watch.start()

    async def _plugins_changed_elsewhere(self, ids: list[str]) -> None:
        """The plugin methods are imported only now (most runs never change a plugin)."""
        plugins = importlib.import_module("roder_core.server.methods.plugins")
        await plugins.changed_elsewhere(self, ids)

    def broadcast(self, notification: Notification) -> None:
        self.fanout.publish(notification)

    async def close(self) -> None:
        """Stop background work owned by the server (tasks, processes); the runtime stays open."""
        self._remove_listener()
        for service in list(self.services.values()):
            closer = getattr(service, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception as exc:
                    log.warning("closing %s: %s", type(service).__name__, exc)


def _check_id_lengths(raw: dict[str, Any]) -> None:
    """Ids name files (threads, traces, processes): one too long for a file name is a bad
    param, refused before any path is built, with a short message (never the data path)."""
    for key, value in raw.items():
        if key.endswith("Id") and isinstance(value, str) and len(value) > MAX_ID_LENGTH:
            raise RpcError(INVALID_PARAMS, f"invalid params: {key} is {len(value)} characters long (at most {MAX_ID_LENGTH})")


def _valid_id(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def error_response(request_id: Any, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}


def parse_error(detail: str) -> dict[str, Any]:
    return error_response(None, RpcError(PARSE_ERROR, f"parse error: {detail}"))
