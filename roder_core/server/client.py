"""The in-process client: the control-plane surface without JSON on the hot path.

``LocalAppClient`` calls the same dispatcher the stdio, WebSocket and unix-socket transports use,
with typed params and typed results, and delivers notifications as the typed runtime events (plus
server notifications) through bounded queues. It is one ``AppClient``
(``roder_core.server.app_client``); ``RemoteAppClient`` is the other, for a running host. The TUI
and one-shot mode use only that interface, so every action they take is also an app-server
method a remote client can call::

    client = LocalAppClient.start(StartSettings(provider="mock"))
    async with client:
        info = await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="my-ui")))
        events = client.subscribe()
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hello"))).turn
        async for event in events:
            ...

``call`` takes any ``MethodSpec`` constant of ``roder_core.server.protocol*`` and that method's
params model, and returns its result model; mypy checks both. The remote clients of
``roder_core.server.rpc_client`` have the same ``call``.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from roder_core.server.app_client import AppClient
from roder_core.server.dispatcher import CallContext, Dispatcher
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import METHODS, MethodSpec, NoParams, ProtocolModel

if TYPE_CHECKING:
    from roder_core.kernel.services import StatusSegment
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.runtime.runtime import Runtime

P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)

_ids = itertools.count(1)


class LocalAppClient(AppClient):
    """Typed calls into a dispatcher plus typed notification subscriptions.

    Every method raises ``RpcError`` (code and message as a remote client would see them).
    """

    def __init__(self, dispatcher: Dispatcher, *, owns_runtime: bool = False) -> None:
        self.dispatcher = dispatcher
        self._owns_runtime = owns_runtime
        self._queues: list[NotificationQueue] = []
        self.context = CallContext(connection_id=f"local-{next(_ids)}", notify=self._notify)
        #: Methods this client implements itself (client concerns, like the TUI's team panes).
        self._served: dict[str, Callable[[Any], Awaitable[ProtocolModel]]] = {}

    @classmethod
    def start(cls, settings: StartSettings, *, persist_config: bool = True) -> LocalAppClient:
        """Build a runtime from CLI-style settings and a dispatcher this client owns."""
        from roder_core.runtime.bootstrap import start_runtime

        started = start_runtime(settings)
        dispatcher = Dispatcher(started.runtime, started=started, persist_config=persist_config)
        return cls(dispatcher, owns_runtime=True)

    @classmethod
    def for_runtime(cls, runtime: Runtime, *, persist_config: bool = False) -> LocalAppClient:
        return cls(Dispatcher(runtime, persist_config=persist_config), owns_runtime=False)

    @property
    def runtime(self) -> Runtime:
        """For embedding hosts only (tests, benchmarks); clients must not drive it directly."""
        return self.dispatcher.runtime

    # ------------------------------------------------------------------ notifications

    def subscribe(self, thread_id: str | None = None, maxsize: int = DEFAULT_MAXSIZE) -> NotificationQueue:
        """A bounded, ordered stream of typed notifications (all threads, or one).

        Iterate it with ``async for``; if the consumer falls ``maxsize`` behind, iteration
        raises ``ClientFellBehind`` and the caller should re-read state (thread/read).
        """
        queue = self.dispatcher.connect(maxsize, thread_id)
        self._queues.append(queue)
        return queue

    def _notify(self, notification: Any) -> None:
        """Notifications addressed to this client alone (command output, replayed approvals)."""
        for queue in self._queues:
            queue.offer(notification)

    # ------------------------------------------------------------------ calls

    async def request(self, method: str, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        """Any method by name with wire-shaped (camelCase) dict params, as a remote client sends
        them; the result is that method's result model. Prefer ``call`` when the method is known."""
        return await self._dispatch(method, params)

    async def _dispatch(self, method: str, params: ProtocolModel | dict[str, Any] | None) -> ProtocolModel:
        handler = self._served.get(method)
        if handler is not None:
            return await handler(self.dispatcher.parse_params(METHODS[method], params))
        return await self.dispatcher.call(method, params, self.context)

    @overload
    async def call(self, spec: MethodSpec[NoParams, R]) -> R: ...

    @overload
    async def call(self, spec: MethodSpec[P, R], params: P) -> R: ...

    async def call(self, spec: MethodSpec[Any, R], params: ProtocolModel | None = None) -> R:
        """Run ``spec``'s method with typed params; returns its typed result (one call for all)."""
        return spec.result_of(await self._dispatch(spec.name, params))

    def status_segments(self, workspace: str | None = None) -> list[StatusSegment]:
        return list(self.dispatcher.runtime.registry.status_segments)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        for queue in self._queues:
            queue.close()
        self._queues.clear()
        await self.dispatcher.close()  # made by this client either way (its plugin watch, ...)
        if self._owns_runtime:
            await self.dispatcher.runtime.close()

    async def __aenter__(self) -> LocalAppClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
