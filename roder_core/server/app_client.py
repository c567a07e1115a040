"""``AppClient``: the control-plane interface every front end uses, wherever the runtime is.

``LocalAppClient`` (``roder_core.server.client``) calls a dispatcher in this process;
``RemoteAppClient`` (``roder_core.server.remote_client``) talks JSON-RPC to a running host. Both
return the same typed results and deliver the same typed notifications. This module imports
only the protocol models, so a client of a host never loads the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from roder_core.server.errors import METHOD_NOT_FOUND, RpcError
from roder_core.server.fanout import DEFAULT_MAXSIZE, NotificationQueue
from roder_core.server.protocol import (
    METHODS,
    ClientInfo,
    ExtensionsListResult,
    InitializeParams,
    InitializeResult,
    InputItem,
    MethodSpec,
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
    unavailable_group,
)
from roder_core.server.protocol_attach import (
    PaletteCommandsParams,
    PaletteCommandsResult,
    ThreadHeadlessParams,
    ThreadLiveParams,
    ThreadLiveResult,
)

if TYPE_CHECKING:
    from roder_core.ir import ApprovalDecisionKind
    from roder_core.kernel.services import StatusSegment

R = TypeVar("R", bound=ProtocolModel)


class AppClient:
    """What every client offers, whatever carries its calls (subclasses supply ``call``,
    ``subscribe``, ``status_segments`` and ``close``). Every method raises ``RpcError``, with
    the code and message a remote client would see."""

    #: True when other clients share the runtime (a host): threads are left open for them.
    shared: bool = False

    async def call(self, spec: MethodSpec, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        """One method by its spec; the result is an instance of ``spec.result``."""
        raise NotImplementedError

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

    async def __aenter__(self) -> AppClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, method: str, params: ProtocolModel | dict[str, Any] | None = None) -> ProtocolModel:
        """Any method by name; the result is that method's result model."""
        spec = METHODS.get(method)
        if spec is None:
            unavailable = unavailable_group(method)
            raise RpcError(METHOD_NOT_FOUND, f"{method}: {unavailable[1]}" if unavailable else f"method not found: {method!r}")
        return await self.call(spec, params)

    async def _call(self, method: str, params: ProtocolModel, result: type[R]) -> R:
        value = await self.call(METHODS[method], params)
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

    async def thread_live(self, thread_id: str) -> ThreadLiveResult:
        """A thread's live state; the same snapshot also arrives as a ``thread/live``
        notification, in order with this client's other notifications."""
        return await self._call("thread/live", ThreadLiveParams(thread_id=thread_id), ThreadLiveResult)

    async def thread_headless(self, thread_id: str, headless: bool = True, *, mode: str | None = None) -> None:
        params = ThreadHeadlessParams(thread_id=thread_id, headless=headless, mode=mode)  # type: ignore[arg-type]
        await self.request("thread/headless", params)

    async def palette_commands(self, state: dict[str, Any]) -> PaletteCommandsResult:
        return await self._call("palette/commands", PaletteCommandsParams(state=state), PaletteCommandsResult)
