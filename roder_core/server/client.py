"""The control-plane client: typed calls and typed notifications, in process or remote.

``AppClient`` is the one interface the TUI and one-shot mode use. ``LocalAppClient`` calls the
same dispatcher the stdio, WebSocket and unix-socket transports use, with typed params and typed
results and no JSON on the hot path; ``RemoteAppClient`` (``roder_core.server.remote_client``)
speaks JSON-RPC to a running host and rebuilds the same typed objects. So every action a front
end takes is also an app-server method a remote client can call::

    client = LocalAppClient.start(StartSettings(provider="mock"))
    async with client:
        info = await client.initialize(client_name="my-ui")
        events = client.subscribe()
        thread = (await client.thread_start()).thread
        turn = (await client.turn_start(thread.id, "hello")).turn
        async for event in events:
            ...
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, TypeVar

from roder_core.server.app_client import AppClient
from roder_core.server.dispatcher import CallContext, Dispatcher
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import (
    MethodSpec,
    ProtocolModel,
)

if TYPE_CHECKING:
    from roder_core.kernel.services import StatusSegment
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.runtime.runtime import Runtime

R = TypeVar("R", bound=ProtocolModel)

_ids = itertools.count(1)


class LocalAppClient(AppClient):
    """Typed calls into a dispatcher of this process; notifications through bounded queues."""

    def __init__(self, dispatcher: Dispatcher, *, owns_runtime: bool = False) -> None:
        self.dispatcher = dispatcher
        self._owns_runtime = owns_runtime
        self._queues: list[NotificationQueue] = []
        self.context = CallContext(connection_id=f"local-{next(_ids)}", notify=self._notify)

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

    def subscribe(self, thread_id: str | None = None, maxsize: int = DEFAULT_MAXSIZE) -> NotificationQueue:
        queue = self.dispatcher.connect(maxsize, thread_id)
        self._queues.append(queue)
        return queue

    def _notify(self, notification: Any) -> None:
        """Notifications addressed to this client alone (command output, replayed approvals)."""
        for queue in self._queues:
            queue.offer(notification)

    async def call(self, spec: MethodSpec, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        return await self.dispatcher.call(spec.name, params, self.context)

    def status_segments(self, workspace: str | None = None) -> list[StatusSegment]:
        return list(self.dispatcher.runtime.registry.status_segments)

    async def close(self) -> None:
        for queue in self._queues:
            queue.close()
        self._queues.clear()
        if self._owns_runtime:
            await self.dispatcher.close()
            await self.dispatcher.runtime.close()

    async def __aenter__(self) -> LocalAppClient:
        return self
