"""``AppClient``: the control-plane interface the app and one-shot mode use, wherever the runtime is.

``LocalAppClient`` (``roder_core.server.client``) calls a dispatcher in this process;
``RemoteAppClient`` (``roder_core.server.remote_client``) talks JSON-RPC to a running host over its
unix socket or a WebSocket. Both have the one typed ``call(spec, params) -> result`` and deliver
the same typed notifications through ``subscribe``, so a front end cannot tell them apart. This
module imports only the protocol models, so a client of a host never loads the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from roder_core.server.errors import METHOD_NOT_FOUND, RpcError
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import METHODS, MethodSpec, NoParams, ProtocolModel

if TYPE_CHECKING:
    from roder_core.kernel.services import StatusSegment

P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)


class AppClient:
    """What every client offers. Calls raise ``RpcError`` with the code and message a remote
    client would see."""

    #: True when other clients share the runtime (a host): threads are left open for them.
    shared: bool = False
    #: Methods this client answers itself (see ``serve_locally``); each subclass starts it empty.
    _served: dict[str, Callable[[Any], Awaitable[ProtocolModel]]]

    def serve_locally(self, method: str, handler: Callable[[Any], Awaitable[ProtocolModel]]) -> None:
        """Answer ``method`` here, in the client, instead of the server: for the seed-004 methods
        that are a client concern (``team/pane/*``: only the client draws panes). The handler
        gets the typed params and returns the method's result model."""
        if method not in METHODS:
            raise ValueError(f"{method!r} is not a protocol method")
        self._served[method] = handler

    @overload
    async def call(self, spec: MethodSpec[NoParams, R]) -> R: ...

    @overload
    async def call(self, spec: MethodSpec[P, R], params: P) -> R: ...

    async def call(self, spec: MethodSpec[Any, R], params: ProtocolModel | None = None) -> R:
        """Run ``spec``'s method with typed params; returns its typed result."""
        raise NotImplementedError

    async def call_method(self, method: str, params: dict[str, Any]) -> ProtocolModel:
        """A method known only by name with wire-shaped params (a palette row names its method):
        checked against the method's params model here, then ``call``."""
        spec = METHODS.get(method)
        if spec is None:  # its protocol module may not be imported yet: load the whole table
            from roder_core.server.dispatcher import load_method_modules

            load_method_modules()
            spec = METHODS.get(method)
        if spec is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method!r}")
        from pydantic import ValidationError

        from roder_core.server.errors import INVALID_PARAMS

        try:
            typed = spec.params.model_validate(params)
        except ValidationError as exc:
            raise RpcError(INVALID_PARAMS, f"invalid params for {method}: {exc.errors()[0]['msg']}") from None
        return await self.call(spec, typed)

    def subscribe(self, thread_id: str | None = None, maxsize: int = DEFAULT_MAXSIZE) -> NotificationQueue:
        """A bounded, ordered stream of typed notifications (all threads, or one).

        Iterate it with ``async for``; if the consumer falls ``maxsize`` behind, iteration
        raises ``ClientFellBehind`` and the caller should re-read state (thread/read).
        """
        raise NotImplementedError

    def status_segments(self, workspace: str | None = None) -> list[StatusSegment]:
        """The status-bar segments the app draws for ``workspace``: renderers of a state dict,
        run client-side."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError
