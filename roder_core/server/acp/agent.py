"""The ACP agent: ACP requests -> control-plane calls, runtime notifications -> session updates.

An ACP session is a Roder thread (the session id is the thread id). ``session/prompt`` starts a
turn and returns when it completes, with the stop reason mapped onto ACP's. Approvals become
``session/request_permission`` with allow_once / allow_always / reject_once / reject_always.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.helpers import update_available_commands
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    AuthenticateResponse,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    StopReason,
    ToolCallUpdate,
)

from roder_core import __version__
from roder_core.customization.slash_commands import RUNTIME_BUILTINS
from roder_core.ir import ApprovalDecisionKind, ApprovalRequest, Mode, ToolCallItem, ToolResultItem, Turn, TurnStatus
from roder_core.kernel.services import PolicyVerdict
from roder_core.kernel.tool_catalog import ServerHost
from roder_core.kernel.tools import CLIENT_TEXT_READER
from roder_core.server.acp.client_tools import ClientBridge
from roder_core.server.acp.commands import available_commands, invocation
from roder_core.server.acp.updates import acp_kind, diff_texts, item_updates, notification_updates, tool_title
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RUNTIME_ERROR, RpcError
from roder_core.server.fanout import ClientFellBehind
from roder_core.server.protocol import (
    INITIALIZE,
    MODEL_LIST,
    PROVIDERS_LIST,
    PROVIDERS_SELECT,
    SESSION_GET,
    SESSION_RESOLVE_APPROVAL,
    SESSION_SET_MODE,
    THREAD_FORK,
    THREAD_LIST,
    THREAD_RESUME,
    THREAD_START,
    TOOLS_LIST,
    TURN_INTERRUPT,
    TURN_START,
    ClientInfo,
    InitializeParams,
    InputItem,
    MethodSpec,
    ModelListParams,
    NoParams,
    ProtocolModel,
    ProvidersSelectParams,
    ResolveApprovalParams,
    SessionGetParams,
    SessionSetModeParams,
    ThreadForkParams,
    ThreadListParams,
    ThreadResumeParams,
    ThreadStartParams,
    ToolsListParams,
    TurnInterruptParams,
    TurnStartParams,
)
from roder_core.server.protocol_features import (
    COMMANDS_EXPAND,
    COMMANDS_LIST,
    COMMANDS_RUN,
    MCP_LIST,
    SESSION_RESOLVE_USER_INPUT,
    CommandInfoModel,
    CommandsExpandParams,
    CommandsListParams,
    CommandsRunParams,
    McpListParams,
    ResolveUserInputParams,
)
from roder_core.settings.config import MODES
from roder_core.threads.events import ApprovalRequested, ItemCompleted, TurnCompleted, UserInputRequested

log = logging.getLogger(__name__)

P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)

MODE_NAMES = {
    "plan": ("Plan", "Read-only: explore and propose a plan"),
    "ask": ("Ask", "Ask before edits and commands"),
    "auto-edit": ("Auto-edit", "Edit workspace files freely; ask before commands"),
    "bypass": ("Bypass", "Run everything without asking"),
}
EVENT_QUEUE = 200_000
#: Longest the command list waits for MCP servers still connecting before it is sent again.
COMMANDS_SETTLE = 10.0


def _request_error(exc: RpcError) -> RequestError:
    return RequestError(exc.code, exc.message, exc.data)


@dataclass
class Session:
    id: str
    cwd: str
    #: Resolved with the completed turn of the running prompt (set before turn/start).
    waiter: asyncio.Future[Turn] | None = None
    permission_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: Tool calls announced to the editor that have no final status yet (closed when the turn ends).
    open_calls: set[str] = field(default_factory=set)
    #: The last ``ask_user`` call announced: its questions are asked about that call.
    asking_call: str | None = None


class RoderAcpAgent:
    """Implements ``acp.Agent`` on top of a LocalAppClient."""

    def __init__(self, app: LocalAppClient, bridge: ClientBridge | None = None) -> None:
        self.app = app
        self.bridge = bridge or ClientBridge()
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}
        self._kinds: dict[str, str] = {}
        self._rejected_rules: set[str] = set()
        self._model_options: list[SessionConfigSelectOption] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        #: The editor renders ``elicitation/create`` forms (else questions go as permission requests).
        self._ask_by_form = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.bridge.conn = conn

    async def _call(self, spec: MethodSpec[P, R], params: P) -> R:
        """One control-plane call; its error goes back to the editor as an ACP request error."""
        try:
            return await self.app.call(spec, params)
        except RpcError as exc:
            raise _request_error(exc) from None

    # ------------------------------------------------------------------ handshake

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        name = getattr(client_info, "name", None) or "acp-client"
        await self._call(INITIALIZE, InitializeParams(client_info=ClientInfo(name=name)))
        if client_capabilities is not None:
            fs = client_capabilities.fs
            self.bridge.can_write = bool(fs and fs.write_text_file)
            self.bridge.can_read = bool(fs and fs.read_text_file)
            self.bridge.terminal = bool(client_capabilities.terminal)
            elicitation = getattr(client_capabilities, "elicitation", None)
            self._ask_by_form = elicitation is not None and elicitation.form is not None
        await self._ready()
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # Editor-given MCP servers run through Roder's MCP client, which speaks all three.
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
                # Stable capabilities in their stable places; ``fork`` is where the unstable schema
                # defines it (clients on the stable schema ignore the unknown key).
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    fork=SessionForkCapabilities(),
                ),
            ),
            agent_info=Implementation(name="roder", title="Roder", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        return AuthenticateResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Roder defines no ``_``-prefixed ACP extension methods."""
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Unknown extension notifications are ignored, as ACP asks."""

    # ------------------------------------------------------------------ sessions

    async def _modes(self) -> SessionModeState:
        mode = (await self._call(SESSION_GET, SessionGetParams())).mode
        return SessionModeState(
            current_mode_id=mode,
            available_modes=[SessionMode(id=m, name=MODE_NAMES[m][0], description=MODE_NAMES[m][1]) for m in MODES],
        )

    async def _model_config(
        self, thread_provider: str, thread_model: str
    ) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
        if self._model_options is None:
            options: list[SessionConfigSelectOption] = []
            providers = await self._call(PROVIDERS_LIST, NoParams())
            for provider in providers.providers:
                if provider.auth_configured is False:
                    continue
                try:
                    async with asyncio.timeout(5.0):
                        models = (await self.app.call(MODEL_LIST, ModelListParams(provider=provider.id))).models
                except (RpcError, TimeoutError):
                    models = []
                ids = [m.id for m in models if m.id] or [provider.default_model]
                ids = [m for m in ids if m]  # a provider with no model to offer adds no empty option
                options += [SessionConfigSelectOption(value=f"{provider.id}/{m}", name=f"{provider.name}: {m}") for m in ids]
            self._model_options = options
        current = f"{thread_provider}/{thread_model}"
        options = list(self._model_options)
        if current not in {o.value for o in options}:
            options.insert(0, SessionConfigSelectOption(value=current, name=current))
        return [
            SessionConfigOptionSelect(
                id="model", name="Model", category="model", type="select", current_value=current, options=options
            )
        ]

    def _add_mcp_servers(self, servers: Any) -> None:
        """Start the MCP servers the editor passes (ACP: agents MUST support stdio) through the
        runtime's MCP client, the same manager and policy as configured servers. A definition
        Roder cannot run is refused with the reason, before the session is opened."""
        if not servers:
            return
        definitions, problems = mcp_definitions(servers)
        hosts = [c for c in self.app.runtime.registry.tools if isinstance(c, ServerHost)]
        if not hosts:
            problems.append("MCP servers cannot be started: the MCP extension is not loaded (see `roder extensions`)")
        else:
            problems += hosts[0].add_servers(definitions, "editor (ACP)")
        if problems:
            raise RequestError.invalid_params({"mcpServers": "; ".join(problems)})

    async def _ready(self) -> None:
        """Learn the tools' kinds and start forwarding runtime events, once. Every session is
        opened through ``_open``, which waits for this: an editor that skips ``initialize``
        still gets its turn's updates and its prompt's answer, instead of a prompt that never
        returns."""
        if self._pump is not None:
            return
        tools = await self._call(TOOLS_LIST, ToolsListParams())
        self._kinds = {t.name: t.kind for t in tools.tools}
        if self._pump is None:
            self._pump = asyncio.create_task(self._pump_events(), name="acp event pump")

    async def _open(self, thread_id: str, cwd: str) -> Session:
        await self._ready()
        session = self.sessions.get(thread_id) or Session(id=thread_id, cwd=cwd)
        self.sessions[thread_id] = session
        task = asyncio.create_task(self._announce_commands(session), name="acp commands")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        self.bridge.sessions_by_cwd[cwd] = thread_id
        if self.bridge.can_read:
            reader = functools.partial(self.bridge.read_text, thread_id)
            self.app.runtime.set_tool_extra(thread_id, CLIENT_TEXT_READER, reader)
        return session

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        self._add_mcp_servers(mcp_servers)
        thread = (await self._call(THREAD_START, ThreadStartParams(cwd=cwd))).thread
        await self._open(thread.id, thread.cwd)
        return NewSessionResponse(
            session_id=thread.id,
            modes=await self._modes(),
            config_options=await self._model_config(thread.provider, thread.model),
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        self._add_mcp_servers(mcp_servers)
        thread = (await self._call(THREAD_RESUME, ThreadResumeParams(thread_id=session_id))).thread
        await self._open(thread.id, thread.cwd)
        for turn in thread.turns:
            for item in turn.items:
                for update in item_updates(item, self._kinds, history=True):
                    await self.conn.session_update(session_id=thread.id, update=update)
        return LoadSessionResponse(
            modes=await self._modes(), config_options=await self._model_config(thread.provider, thread.model)
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        self._add_mcp_servers(mcp_servers)
        # Unlike session/load, resuming replays nothing: the history is not needed (nor read).
        params = ThreadResumeParams(thread_id=session_id, include_turns=False)
        thread = (await self._call(THREAD_RESUME, params)).thread
        await self._open(thread.id, thread.cwd)
        return ResumeSessionResponse(
            modes=await self._modes(), config_options=await self._model_config(thread.provider, thread.model)
        )

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> ListSessionsResponse:
        rows = (await self._call(THREAD_LIST, ThreadListParams(cwd=cwd))).threads
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=r.id,
                    cwd=r.cwd,
                    title=r.title or None,
                    updated_at=datetime.fromtimestamp(r.updated_at, UTC).isoformat(),
                )
                for r in rows
            ]
        )

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        self._add_mcp_servers(mcp_servers)
        thread = (await self._call(THREAD_FORK, ThreadForkParams(thread_id=session_id))).thread
        await self._open(thread.id, thread.cwd)
        return ForkSessionResponse(
            session_id=thread.id,
            modes=await self._modes(),
            config_options=await self._model_config(thread.provider, thread.model),
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            with contextlib.suppress(RpcError):
                await self.app.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=session_id))
        return CloseSessionResponse()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        self._session(session_id)
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": f"unknown mode {mode_id!r}; one of {', '.join(MODES)}"})
        await self._call(SESSION_SET_MODE, SessionSetModeParams(mode=Mode(mode_id), reason="ACP client"))
        return SetSessionModeResponse()

    async def set_session_model(self, session_id: str, model_id: str) -> dict[str, Any]:
        """``session/set_model`` (the pre-config-options ACP method); ``model_id`` is provider/model."""
        await self._select_model(session_id, model_id)
        return {}

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        if config_id == "model" and isinstance(value, str):
            thread = await self._select_model(session_id, value)
            return SetSessionConfigOptionResponse(config_options=await self._model_config(thread[0], thread[1]))
        raise RequestError.invalid_params({"configId": f"unknown config option {config_id!r}"})

    async def _select_model(self, session_id: str, value: str) -> tuple[str, str]:
        self._session(session_id)
        provider, _, model = value.partition("/")
        if not provider:
            raise RequestError.invalid_params({"modelId": "expected provider/model"})
        result = await self._call(
            PROVIDERS_SELECT, ProvidersSelectParams(provider=provider, model=model or None, thread_id=session_id)
        )
        return result.provider, result.model

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}; use session/new or load"})
        return session

    # ------------------------------------------------------------------ slash commands

    async def _commands(self, session: Session) -> list[CommandInfoModel]:
        return (await self.app.call(COMMANDS_LIST, CommandsListParams(workspace=session.cwd))).commands

    async def _announce_commands(self, session: Session) -> None:
        """``available_commands_update`` now, and again once MCP servers still connecting have
        settled (their prompts are commands too) if that changed the list."""
        sent: list[Any] | None = None
        for settle in (False, True):
            try:
                if settle:
                    await self.app.call(MCP_LIST, McpListParams(wait_ms=int(COMMANDS_SETTLE * 1000)))
                commands = available_commands(await self._commands(session))
                if commands != sent:
                    await self.conn.session_update(session_id=session.id, update=update_available_commands(commands))
                    sent = commands
            except Exception as exc:  # the list is a convenience; a session never fails over it
                log.warning("could not send the command list: %s", exc)
                return

    async def _run_command(self, session: Session, blocks: list[Any]) -> tuple[list[Any], PromptResponse | None]:
        """A prompt starting with ``/name``: the blocks with the command expanded, or the answer
        of a built-in the runtime performed. Text that names no command is left alone."""
        found = invocation(blocks)
        if found is None:
            return blocks, None
        index, name, arguments = found
        try:
            expansion = await self.app.call(
                COMMANDS_EXPAND, CommandsExpandParams(name=name, arguments=arguments, workspace=session.cwd)
            )
        except RpcError as exc:
            if exc.code == INVALID_PARAMS and exc.message.startswith("unknown command"):
                return blocks, None
            raise _request_error(exc) from None
        if expansion.kind != "builtin":
            expanded = list(blocks)
            expanded[index] = text_block(expansion.text)
            return expanded, None
        if name not in RUNTIME_BUILTINS:
            raise RequestError.invalid_params({"prompt": f"/{name} is an app command; use the editor's own"})
        outcome = await self._call(COMMANDS_RUN, CommandsRunParams(thread_id=session.id, name=name, arguments=arguments))
        if outcome.message:
            await self.conn.session_update(session_id=session.id, update=update_agent_message_text(outcome.message))
        return blocks, PromptResponse(stop_reason="end_turn")

    # ------------------------------------------------------------------ prompts

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.waiter is not None and not session.waiter.done():
            raise _request_error(
                RpcError(RUNTIME_ERROR, f"a turn is already running on thread {session.id}; wait for it or send session/cancel")
            )
        self.bridge.sessions_by_cwd[session.cwd] = session.id
        prompt, answered = await self._run_command(session, prompt)
        if answered is not None:
            return answered
        waiter: asyncio.Future[Turn] = asyncio.get_running_loop().create_future()
        session.waiter = waiter
        try:
            await self._call(TURN_START, TurnStartParams(thread_id=session.id, input=prompt_input(prompt)))
        except BaseException:
            session.waiter = None
            raise
        turn = await waiter
        return PromptResponse(stop_reason=stop_reason(turn))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.sessions:
            with contextlib.suppress(RpcError):
                await self.app.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=session_id))

    # ------------------------------------------------------------------ notifications

    async def _pump_events(self) -> None:
        """Forward runtime notifications of open sessions, in order, as session updates."""
        while True:
            events = self.app.subscribe(maxsize=EVENT_QUEUE)
            try:
                async for event in events:
                    await self._forward(event)
                return
            except ClientFellBehind as exc:
                log.warning("ACP client fell behind; some streamed deltas were dropped: %s", exc)
                events.close()

    async def _forward(self, event: Any) -> None:
        session = self.sessions.get(getattr(event, "thread_id", ""))
        if session is None:
            return
        if isinstance(event, ApprovalRequested):
            task = asyncio.create_task(self._ask_permission(session, event.request))
            session.permission_tasks.add(task)
            task.add_done_callback(session.permission_tasks.discard)
            return
        if isinstance(event, UserInputRequested):
            task = asyncio.create_task(self._ask_user(session, event))
            session.permission_tasks.add(task)
            task.add_done_callback(session.permission_tasks.discard)
            return
        if isinstance(event, TurnCompleted):
            await self._close_open_calls(session, event.turn)
            if session.waiter is not None and not session.waiter.done():
                session.waiter.set_result(event.turn)
            return
        item = event.item if isinstance(event, ItemCompleted) else None
        if isinstance(item, ToolCallItem):
            session.open_calls.add(item.call_id)
            if item.name == "ask_user":
                session.asking_call = item.call_id
            if self._kinds.get(item.name) == "execute":
                self.bridge.pending_exec.setdefault(session.id, deque()).append(item.call_id)
        elif isinstance(item, ToolResultItem):
            session.open_calls.discard(item.call_id)
        for update in notification_updates(event, self._kinds):
            try:
                await self.conn.session_update(session_id=session.id, update=update)
            except Exception as exc:
                log.warning("could not send a session update: %s", exc)

    async def _close_open_calls(self, session: Session, turn: Turn) -> None:
        """Give every call still open a final status before the prompt returns (a call cut off by
        session/cancel would otherwise stay pending in the editor forever). ACP has no
        ``cancelled`` tool status, so it is ``failed`` with a line saying why."""
        why = "cancelled" if turn.status == "interrupted" else "did not finish"
        for call_id in sorted(session.open_calls):
            with contextlib.suppress(Exception):
                await self.conn.session_update(
                    session_id=session.id,
                    update=update_tool_call(call_id, status="failed", content=[tool_content(text_block(why))]),
                )
        session.open_calls.clear()

    async def _ask_permission(self, session: Session, request: ApprovalRequest) -> None:
        # the exact rules Roder would save (one per line); none when the call may never be
        # allowed for good (protected or outside-workspace targets)
        always = next((o.rule for o in request.options if o.id == "allow_always"), None)
        rule = always or request.tool
        if rule in self._rejected_rules:
            await self._resolve(request, "deny", reason=f"always rejected in this editor session: {rule}")
            return
        content = None
        if request.diff:
            from acp import tool_diff_content

            old, new = diff_texts(request.diff)
            path = str(request.arguments.get("path") or request.arguments.get("file_path") or request.tool)
            content = [tool_diff_content(path, new, old)]
        tool_call = ToolCallUpdate(
            tool_call_id=request.call_id,
            title=tool_title(request.tool, request.arguments),
            kind=acp_kind(self._kinds.get(request.tool)),
            status="pending",
            content=content,  # type: ignore[arg-type]
            raw_input=request.arguments,
        )
        options = [
            PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
            *(
                [
                    PermissionOption(
                        option_id="allow_always", name=f"Always allow {', '.join(rule.splitlines())}", kind="allow_always"
                    )
                ]
                if always
                else []
            ),
            PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
            PermissionOption(option_id="reject_always", name=f"Always reject {rule}", kind="reject_always"),
        ]
        try:
            response = await self.conn.request_permission(session_id=session.id, tool_call=tool_call, options=options)
        except Exception as exc:
            await self._resolve(request, "deny", reason=f"permission request failed: {exc}")
            return
        outcome = response.outcome
        choice = outcome.option_id if isinstance(outcome, AllowedOutcome) else "cancelled"
        if choice == "allow_once":
            await self._resolve(request, "allow_once")
        elif choice == "allow_always":
            await self._resolve(request, "allow_always", rule=rule)
        elif choice == "reject_always":
            self._rejected_rules.add(rule)
            if unsaved := self.app.runtime.persist_rule(rule, PolicyVerdict.DENY):
                await self.conn.session_update(session_id=session.id, update=update_agent_message_text(f"roder: {unsaved}\n"))
            await self._resolve(request, "deny", reason=f"always rejected: {rule}")
        else:
            await self._resolve(request, "deny", reason="rejected in the editor" if choice == "reject_once" else "cancelled")
            if choice == "cancelled":
                with contextlib.suppress(Exception):
                    await self.conn.session_update(
                        session_id=session.id, update=update_tool_call(request.call_id, status="failed")
                    )

    async def _ask_user(self, session: Session, event: UserInputRequested) -> None:
        """Put a ``userInput/requested`` to the editor in the form it supports, then answer it
        (an empty answer when the editor failed: the model hears the user declined)."""
        from roder_core.kernel.questions import Question
        from roder_core.server.acp.questions import ask_by_form, ask_by_permission

        questions = [Question.from_json(q, i) for i, q in enumerate(event.questions)]
        try:
            if self._ask_by_form:
                answers = await ask_by_form(self.conn, session.id, questions, session.asking_call)
            else:
                answers = await ask_by_permission(self.conn, session.id, questions, session.asking_call or event.request_id)
        except Exception as exc:
            log.warning("could not ask the editor: %s", exc)
            answers = {}
        with contextlib.suppress(RpcError):  # the turn may have ended (cancel) in the meantime
            await self.app.call(SESSION_RESOLVE_USER_INPUT, ResolveUserInputParams(request_id=event.request_id, answers=answers))

    async def _resolve(
        self, request: ApprovalRequest, decision: ApprovalDecisionKind, *, rule: str | None = None, reason: str = ""
    ) -> None:
        params = ResolveApprovalParams(approval_id=request.approval_id, decision=decision, rule=rule, reason=reason)
        with contextlib.suppress(RpcError):  # the turn may have ended (cancel) in the meantime
            await self.app.call(SESSION_RESOLVE_APPROVAL, params)

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump


def mcp_definitions(servers: list[Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """ACP ``McpServer`` entries -> ``.mcp.json``-shaped definitions, and why any was refused."""
    definitions: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for server in servers:
        kind = getattr(server, "type", None) or "stdio"
        if kind == "stdio":
            definitions[server.name] = {
                "command": server.command,
                "args": list(server.args),
                "env": {v.name: v.value for v in server.env or []},
            }
        elif kind in ("http", "sse"):
            definitions[server.name] = {
                "type": kind,
                "url": server.url,
                "headers": {h.name: h.value for h in server.headers or []},
            }
        else:
            problems.append(f"MCP server {server.name!r}: transport {kind!r} is not supported (stdio, http or sse)")
    return definitions, problems


def prompt_input(blocks: list[Any]) -> list[InputItem]:
    """ACP content blocks -> turn input items (text, images, attached files and resources)."""
    items: list[InputItem] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            items.append(InputItem(type="text", text=block.text))
        elif kind == "image":
            items.append(InputItem(type="image", data_base64=block.data, mime_type=block.mime_type, path=_file_path(block.uri)))
        elif kind == "resource_link":
            path = _file_path(block.uri)
            if path is not None:
                items.append(InputItem(type="file", path=path, name=block.name or Path(path).name))
            else:
                items.append(InputItem(type="text", text=f"[resource: {block.name} {block.uri}]"))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            name = Path(_file_path(resource.uri) or resource.uri).name or resource.uri
            if text is not None:
                items.append(InputItem(type="file", name=name, text=text, mime_type=resource.mime_type))
            elif (resource.mime_type or "").startswith("image/"):
                items.append(InputItem(type="image", name=name, data_base64=resource.blob, mime_type=resource.mime_type))
            else:
                items.append(InputItem(type="text", text=f"[binary resource {resource.uri} not attached]"))
        elif kind == "audio":
            raise RequestError.invalid_params({"prompt": "audio input is not supported"})
    return items


def _file_path(uri: str | None) -> str | None:
    if not uri:
        return None
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else None


def stop_reason(turn: Turn) -> StopReason:
    if turn.status == TurnStatus.INTERRUPTED:
        return "cancelled"
    if turn.status == TurnStatus.FAILED:
        if turn.error is not None and turn.error.kind == "max_iterations":
            return "max_turn_requests"
        raise RequestError.internal_error({"message": turn.error.message if turn.error else "the turn failed"})
    if turn.stop_reason == "max_tokens":
        return "max_tokens"
    if turn.stop_reason == "refusal":
        return "refusal"
    return "end_turn"
