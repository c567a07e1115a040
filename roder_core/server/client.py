"""The in-process client: the control-plane surface without JSON on the hot path.

``LocalAppClient`` calls the same dispatcher the stdio and WebSocket transports use, with typed
params and typed results, and delivers notifications as the typed runtime events (plus server
notifications) through bounded queues. The TUI and one-shot mode use only this class, so every
action they take is also an app-server method a remote client can call::

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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from roder_core.server.dispatcher import CallContext, Dispatcher
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import (
    METHODS,
    ClientInfo,
    ExtensionsListResult,
    InitializeParams,
    InitializeResult,
    InputItem,
    ModelListParams,
    ModelListResult,
    NoParams,
    ProtocolModel,
    ProvidersListResult,
    ProvidersSelectParams,
    ProvidersSelectResult,
    ResolveApprovalParams,
    ResolvedResult,
    SessionGetParams,
    SessionGetResult,
    SessionModeResult,
    SessionSetModeParams,
    ThreadCloseParams,
    ThreadCloseResult,
    ThreadListParams,
    ThreadListResult,
    ThreadReadParams,
    ThreadResult,
    ThreadResumeParams,
    ThreadStartParams,
    ToolsListParams,
    ToolsListResult,
    TrustGetParams,
    TrustResult,
    TrustSetParams,
    TurnInterruptParams,
    TurnInterruptResult,
    TurnResult,
    TurnStartParams,
    TurnSteerCancelParams,
    TurnSteerCancelResult,
    TurnSteerParams,
    TurnSteerResult,
)

if TYPE_CHECKING:
    from roder_core.ir import ApprovalDecisionKind
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.runtime.runtime import Runtime

R = TypeVar("R", bound=ProtocolModel)

_ids = itertools.count(1)


class LocalAppClient:
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

    def serve_locally(self, method: str, handler: Callable[[Any], Awaitable[ProtocolModel]]) -> None:
        """Answer ``method`` here, in the client, instead of the server: for the seed-004 methods
        that are a client concern (``team/pane/*``: only the client draws panes). The handler
        gets the typed params and returns the method's result model."""
        if method not in METHODS:
            raise ValueError(f"{method!r} is not a protocol method")
        self._served[method] = handler

    async def request(self, method: str, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        """Any method by name; the result is that method's result model."""
        handler = self._served.get(method)
        if handler is not None:
            return await handler(self.dispatcher.parse_params(METHODS[method], params))
        return await self.dispatcher.call(method, params, self.context)

    async def _call(self, method: str, params: ProtocolModel, result: type[R]) -> R:
        value = await self.dispatcher.call(method, params, self.context)
        assert isinstance(value, result)
        return value

    async def initialize(self, client_name: str = "roder-local", client_version: str = "") -> InitializeResult:
        params = InitializeParams(client_info=ClientInfo(name=client_name, version=client_version))
        return await self._call("initialize", params, InitializeResult)

    async def extensions_list(self) -> ExtensionsListResult:
        return await self._call("extensions/list", NoParams(), ExtensionsListResult)

    async def providers_list(self) -> ProvidersListResult:
        return await self._call("providers/list", NoParams(), ProvidersListResult)

    async def model_list(self, provider: str | None = None) -> ModelListResult:
        return await self._call("model/list", ModelListParams(provider=provider), ModelListResult)

    async def tools_list(self, thread_id: str | None = None) -> ToolsListResult:
        return await self._call("tools/list", ToolsListParams(thread_id=thread_id), ToolsListResult)

    async def providers_select(
        self, provider: str, model: str | None = None, reasoning: str | None = None, *, thread_id: str | None = None
    ) -> ProvidersSelectResult:
        params = ProvidersSelectParams(provider=provider, model=model, reasoning=reasoning, thread_id=thread_id)
        return await self._call("providers/select", params, ProvidersSelectResult)

    async def thread_start(
        self,
        cwd: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        *,
        ephemeral: bool = False,
        title: str = "",
    ) -> ThreadResult:
        params = ThreadStartParams(cwd=cwd, model_provider=provider, model=model, ephemeral=ephemeral, title=title)
        return await self._call("thread/start", params, ThreadResult)

    async def thread_list(self, cwd: str | None = None, limit: int | None = None) -> ThreadListResult:
        return await self._call("thread/list", ThreadListParams(cwd=cwd, limit=limit), ThreadListResult)

    async def thread_read(self, thread_id: str, include_turns: bool = True) -> ThreadResult:
        params = ThreadReadParams(thread_id=thread_id, include_turns=include_turns)
        return await self._call("thread/read", params, ThreadResult)

    async def thread_resume(self, thread_id: str, *, include_turns: bool = True) -> ThreadResult:
        params = ThreadResumeParams(thread_id=thread_id, include_turns=include_turns)
        return await self._call("thread/resume", params, ThreadResult)

    async def thread_close(self, thread_id: str) -> ThreadCloseResult:
        return await self._call("thread/close", ThreadCloseParams(thread_id=thread_id), ThreadCloseResult)

    async def turn_start(
        self,
        thread_id: str,
        prompt: str | None = None,
        input: list[InputItem] | None = None,
        *,
        task_ledger_required: bool = False,
    ) -> TurnResult:
        params = TurnStartParams(thread_id=thread_id, prompt=prompt, input=input or [], task_ledger_required=task_ledger_required)
        return await self._call("turn/start", params, TurnResult)

    async def turn_steer(self, thread_id: str, expected_turn_id: str, prompt: str) -> TurnSteerResult:
        params = TurnSteerParams(thread_id=thread_id, expected_turn_id=expected_turn_id, prompt=prompt)
        return await self._call("turn/steer", params, TurnSteerResult)

    async def turn_steer_cancel(self, thread_id: str, item_id: str) -> TurnSteerCancelResult:
        params = TurnSteerCancelParams(thread_id=thread_id, item_id=item_id)
        return await self._call("turn/steer/cancel", params, TurnSteerCancelResult)

    async def turn_interrupt(self, thread_id: str, turn_id: str | None = None) -> TurnInterruptResult:
        params = TurnInterruptParams(thread_id=thread_id, turn_id=turn_id)
        return await self._call("turn/interrupt", params, TurnInterruptResult)

    async def session_get(self, thread_id: str | None = None) -> SessionGetResult:
        return await self._call("session/get", SessionGetParams(thread_id=thread_id), SessionGetResult)

    async def session_set_mode(self, mode: str, reason: str = "") -> SessionModeResult:
        params = SessionSetModeParams(mode=mode, reason=reason)  # type: ignore[arg-type]
        return await self._call("session/set_mode", params, SessionModeResult)

    async def trust_get(self, cwd: str | None = None) -> TrustResult:
        return await self._call("trust/get", TrustGetParams(cwd=cwd), TrustResult)

    async def trust_set(self, trusted: bool, cwd: str | None = None) -> TrustResult:
        return await self._call("trust/set", TrustSetParams(cwd=cwd, trusted=trusted), TrustResult)

    async def resolve_approval(
        self,
        approval_id: str,
        decision: ApprovalDecisionKind | None = None,
        *,
        approved: bool | None = None,
        rule: str | None = None,
        reason: str = "",
    ) -> ResolvedResult:
        params = ResolveApprovalParams(approval_id=approval_id, decision=decision, approved=approved, rule=rule, reason=reason)
        return await self._call("session/resolve_approval", params, ResolvedResult)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        for queue in self._queues:
            queue.close()
        self._queues.clear()
        if self._owns_runtime:
            await self.dispatcher.close()
            await self.dispatcher.runtime.close()

    async def __aenter__(self) -> LocalAppClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
