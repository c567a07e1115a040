"""App-server protocol models (seed 004): the single source of truth for every method.

Each method has a params model and a result model; ``METHODS`` ties them to the method name and
its group. The dispatcher validates requests with these models, the in-process client returns
them as typed objects, and ``docs/protocol.md`` plus the ``--schema`` JSON Schema export are
generated from them. Field names are snake_case in Python and camelCase on the wire, exactly like
the canonical IR, so runtime objects (threads, turns, items, approvals) appear unchanged.

Notifications are the runtime events of ``roder_core.threads.events`` (their ``method`` already is the
notification name) plus the few the server itself emits, defined at the bottom of this module.
"""

# Annotations here are objects, not strings (no ``from __future__ import annotations``): pydantic
# would otherwise compile every field's annotation string again when it builds the models, a
# cost every start-up pays (tests/test_startup_imports.py names the modules kept so).

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import ConfigDict, Field

from roder_core.ir import (
    ApprovalDecisionKind,
    ApprovalRequest,
    IRModel,
    Mode,
    ModelProfile,
    Thread,
    ThreadSummary,
    Turn,
    empty_list,
)
from roder_core.server.wire import PROTOCOL_VERSION as PROTOCOL_VERSION

SERVER_NAME = "roder-app-server"


class ProtocolModel(IRModel):
    """Base of params and results: camelCase on the wire, unknown fields ignored."""


M = TypeVar("M", bound=ProtocolModel)


def from_domain(model: type[M], data: Mapping[str, Any], omit: frozenset[str] = frozenset()) -> M:
    """The protocol model of a domain object's JSON (its ``to_json()``, a store's row): the one
    conversion at the boundary for results built from domain data.

    Protocol models ignore unknown keys (files and peers from a newer Roder still load), so a key
    renamed on one side would be dropped while the model's field silently kept its default. Here
    every key the domain sends, at any depth, must survive into the model (by its camelCase alias
    or its Python name), or the conversion raises naming the keys it would drop. ``omit`` names
    the top-level keys the caller leaves out on purpose (said at the call site, never silently)."""
    data = {key: value for key, value in data.items() if key not in omit}
    result = model.model_validate(data)
    dropped = _dropped(data, result.model_dump(mode="json", by_alias=True), "")
    if dropped:
        raise TypeError(f"{model.__name__} would drop {', '.join(dropped)}: add the fields to the protocol model")
    return result


def _dropped(sent: Any, kept: Any, where: str) -> list[str]:
    """Keys of ``sent`` missing from ``kept`` (the model's dump), walked through dicts and lists."""
    from pydantic.alias_generators import to_camel

    if isinstance(sent, Mapping) and isinstance(kept, Mapping):
        found: list[str] = []
        for key, value in sent.items():
            name = key if key in kept else to_camel(key) if isinstance(key, str) else key
            if name not in kept:
                found.append(f"{where}{key}")
            else:
                found += _dropped(value, kept[name], f"{where}{key}.")
        return found
    if isinstance(sent, list | tuple) and isinstance(kept, list) and len(sent) == len(kept):
        return [key for index, (a, b) in enumerate(zip(sent, kept, strict=True)) for key in _dropped(a, b, f"{where}{index}.")]
    return []


class NoParams(ProtocolModel):
    """For methods that take no params (``params`` may be omitted, ``{}`` or ``null``)."""


class Ok(ProtocolModel):
    ok: bool = True


# --------------------------------------------------------------------------- handshake


class ClientInfo(ProtocolModel):
    name: str = ""
    version: str = ""


class InitializeParams(ProtocolModel):
    client_info: ClientInfo | None = None
    protocol_version: str | None = None
    #: False answers with an empty ``methodGroups``: a client that never reads the method table
    #: (``roder -p``) spares the server importing every handler module to build it.
    include_method_groups: bool = True


class ServerInfo(ProtocolModel):
    name: str = SERVER_NAME
    version: str


class MethodGroup(ProtocolModel):
    name: str
    available: bool
    methods: list[str]
    note: str = ""


class RemoteInfo(ProtocolModel):
    """Present for WebSocket clients: how they were authenticated and what they may reach."""

    authenticated: bool = True
    auth: Literal["bearer"] = "bearer"
    subprotocol: str | None = None
    workspace: str
    tls: bool = False


class InitializeResult(ProtocolModel):
    server_info: ServerInfo
    protocol_version: str = PROTOCOL_VERSION
    provider: str
    model: str
    cwd: str
    mode: str
    method_groups: list[MethodGroup]
    #: Startup problems a client should show once (skipped extensions, mock fallback).
    warnings: list[str] = Field(default_factory=empty_list)
    fell_back_to_mock: bool = False
    remote: RemoteInfo | None = None


# --------------------------------------------------------------------------- discovery


class SkippedExtensionInfo(ProtocolModel):
    source: str
    reason: str
    #: Left out because the capability profile denies what it needs (what the user chose).
    expected: bool = False


class ExtensionProcessInfo(ProtocolModel):
    """An extension that runs outside Roder's process: a program or a WebAssembly module."""

    id: str
    kind: Literal["process", "wasm"]
    state: Literal["running", "stopped", "restarting", "failed"]
    #: Confined to what was granted (bubblewrap for a process; always for WebAssembly).
    sandboxed: bool
    granted: list[str] = Field(default_factory=empty_list)
    restarts: int = 0
    last_error: str | None = None


class ExtensionsListResult(ProtocolModel):
    """Seed 003's ``extensions/list`` shape: manifests plus capability statuses per extension."""

    extensions: list[dict[str, Any]]
    capability_statuses: dict[str, list[dict[str, Any]]]
    #: Extensions found but not loaded at start-up, and why.
    skipped: list[SkippedExtensionInfo] = Field(default_factory=empty_list)
    #: Process and WebAssembly extensions, with their state.
    processes: list[ExtensionProcessInfo] = Field(default_factory=empty_list)


class ProviderInfo(ProtocolModel):
    id: str
    name: str
    auth_type: str
    auth_configured: bool | None = None
    #: Where the key in use comes from: "env" (its environment variable) or "stored"
    #: (providers/configure, ``roder providers login``). The key itself is never sent.
    auth_source: Literal["env", "stored", "oauth"] | None = None
    #: The environment variable its key is read from (``OPENAI_API_KEY``); never the key.
    auth_label: str | None = None
    recommended: bool = False
    description: str | None = None
    dialect: str = ""
    base_url: str | None = None
    default_model: str
    selected: bool = False


class ProvidersListResult(ProtocolModel):
    providers: list[ProviderInfo]
    provider: str
    model: str
    #: Why ``provider`` was chosen when the server was started without one ("OPENAI_API_KEY is
    #: set", "provider in config.toml", ...); None when it was given explicitly.
    default_reason: str | None = None


class ModelListParams(ProtocolModel):
    provider: str | None = None


class ModelNotes(ProtocolModel):
    """What Roder makes of one listed model."""

    id: str
    #: False: not in the built-in table; its limits are defaults until a
    #: ``[models."provider/model"]`` table in config.toml sets them.
    known: bool = True
    #: The output limit Roder sends for it; None: the server decides.
    sent_output_limit: int | None = None


class ModelListResult(ProtocolModel):
    provider: str
    models: list[ModelProfile]
    #: One per model, in the same order.
    notes: list[ModelNotes] = Field(default_factory=empty_list)


class ToolsListParams(ProtocolModel):
    thread_id: str | None = None
    #: Seconds to give dynamic sources (MCP servers) to connect before listing; 0: list now.
    wait: float = Field(default=0.0, ge=0.0, le=120.0)


class ToolInfo(ProtocolModel):
    name: str
    description: str
    parameters: dict[str, Any]
    source: str = ""
    #: The extension that contributed it (``roder-ext-mcp`` for every MCP server's tools).
    extension: str = ""
    kind: str = "other"
    read_only: bool = False


class ToolSourceInfo(ProtocolModel):
    """A dynamic tool source (an MCP server) and whether its tools are there."""

    #: A source's own details (an MCP server's transport, target, prompts, ...) ride along.
    model_config = ConfigDict(extra="allow")

    name: str
    kind: str
    #: pending | connecting | connected | failed | exited | stopped | disabled
    status: str
    error: str | None = None
    tool_count: int = 0
    tools: list[str] = Field(default_factory=empty_list)


class ToolsListResult(ProtocolModel):
    tools: list[ToolInfo]
    #: Contributors that failed to list their tools (an MCP server down, ...): source -> error.
    errors: dict[str, str] = Field(default_factory=dict)
    #: Dynamic tool sources (MCP servers).
    sources: list[ToolSourceInfo] = Field(default_factory=empty_list)


# --------------------------------------------------------------------------- threads


class ThreadStartParams(ProtocolModel):
    cwd: str | None = None
    model_provider: str | None = None
    model: str | None = None
    ephemeral: bool = False
    title: str = ""


class ThreadResult(ProtocolModel):
    thread: Thread
    #: Turns that came before ``thread.turns`` and were left out (``thread/resume`` with ``lastTurns``).
    older_turns: int = 0


class ThreadListParams(ProtocolModel):
    cwd: str | None = None
    limit: int | None = Field(default=None, ge=1)


class ThreadListResult(ProtocolModel):
    threads: list[ThreadSummary]


class ThreadReadParams(ProtocolModel):
    thread_id: str
    include_turns: bool = False


class ThreadResumeParams(ProtocolModel):
    thread_id: str
    #: False returns the thread without its turns: a caller that only needs the id, model and
    #: settings (``roder -p -c``) skips copying a long history into the reply.
    include_turns: bool = True
    #: With ``includeTurns``: at most the last N turns (fewer when the thread was resumed from
    #: its recent turns and holds fewer), so a client shows the end of a long thread without
    #: waiting for (or copying) all of it; the reply's ``olderTurns`` counts the turns before
    #: them, which ``thread/read`` with ``includeTurns`` returns.
    last_turns: int | None = Field(default=None, ge=1)


class ThreadCloseParams(ProtocolModel):
    thread_id: str


class ThreadCloseResult(ProtocolModel):
    #: False when the thread was not open here (closing is idempotent).
    closed: bool


class ThreadForkParams(ProtocolModel):
    thread_id: str
    #: Copy the thread up to and including this turn; the whole thread when omitted.
    turn_id: str | None = None
    #: Or: copy everything before this user message (to edit and resend it); wins over turnId.
    before_item_id: str | None = None
    title: str | None = None


# --------------------------------------------------------------------------- turns


class InputItem(ProtocolModel):
    """Structured turn input: text, an image (base64, absolute path, or ``mediaId`` of an item
    the thread already stores: what media/attachToTurn returns) or a file to attach. A file
    whose bytes are an image is attached as an image."""

    type: Literal["text", "image", "file"]
    text: str | None = None
    path: str | None = None
    name: str | None = None
    mime_type: str | None = None
    data_base64: str | None = None
    media_id: str | None = None


class TurnStartParams(ProtocolModel):
    thread_id: str
    prompt: str | None = None
    input: list[InputItem] = Field(default_factory=empty_list)
    task_ledger_required: bool = False


class TurnResult(ProtocolModel):
    turn: Turn


class TurnSteerParams(ProtocolModel):
    thread_id: str
    expected_turn_id: str
    prompt: str | None = None
    input: list[InputItem] = Field(default_factory=empty_list)


class TurnSteerResult(ProtocolModel):
    turn_id: str
    item_id: str


class TurnSteerCancelParams(ProtocolModel):
    thread_id: str
    #: The ``itemId`` turn/steer returned.
    item_id: str


class TurnSteerCancelResult(ProtocolModel):
    #: False when the model already received it (or it was never queued).
    cancelled: bool
    #: The message taken back, to edit and send again.
    text: str | None = None


class TurnInterruptParams(ProtocolModel):
    thread_id: str
    turn_id: str | None = None


class TurnInterruptResult(ProtocolModel):
    interrupted: bool


# --------------------------------------------------------------------------- session


class SessionGetParams(ProtocolModel):
    thread_id: str | None = None


class UserInputRequest(ProtocolModel):
    request_id: str
    thread_id: str
    turn_id: str
    questions: list[dict[str, Any]] = Field(default_factory=empty_list)


class SandboxInfo(ProtocolModel):
    """The command sandbox in effect (probed once per server process)."""

    #: None: the default level (omitted on the wire, like every None).
    requested: str | None = None
    effective: str
    #: True when an explicitly requested level is unavailable: commands are refused.
    blocked: bool = False
    reason: str = ""


class SessionGetResult(ProtocolModel):
    mode: str
    provider: str
    model: str
    cwd: str
    interactive: bool
    open_threads: list[str]
    active_turns: dict[str, str]
    pending_approvals: list[ApprovalRequest]
    pending_user_inputs: list[UserInputRequest] = Field(default_factory=empty_list)
    sandbox: SandboxInfo


class TrustGetParams(ProtocolModel):
    #: Absolute folder; the server's cwd when omitted.
    cwd: str | None = None


class TrustSetParams(TrustGetParams):
    trusted: bool


class TrustResult(ProtocolModel):
    cwd: str
    trusted: bool
    #: The folder whose recorded decision applies (the folder itself or a parent); None if never decided.
    decided_at: str | None = None
    #: Project items present in the folder that load only when it is trusted.
    items: list[str] = Field(default_factory=empty_list)
    #: Whether this server loaded the folder's own items (decided at startup; changes need a restart).
    loaded: bool = False


class SessionSetModeParams(ProtocolModel):
    mode: Mode
    reason: str = ""


class SessionModeResult(ProtocolModel):
    mode: str


class ResolveApprovalParams(ProtocolModel):
    """``approved`` is the simple form; ``decision`` picks one of the offered options."""

    approval_id: str
    approved: bool | None = None
    decision: ApprovalDecisionKind | None = None
    rule: str | None = None
    reason: str = ""


class ResolvedResult(ProtocolModel):
    resolved: bool


class ResolveUserInputParams(ProtocolModel):
    request_id: str
    answers: dict[str, Any] = Field(default_factory=dict)


class ExitPlanParams(ProtocolModel):
    request_id: str
    approved: bool
    feedback: str = ""
    #: Mode to switch to when the plan is approved (default: the mode before plan mode).
    mode: Literal["ask", "auto-edit", "bypass"] | None = None


# --------------------------------------------------------------------------- providers, settings


class ProvidersSelectParams(ProtocolModel):
    provider: str
    model: str | None = None
    reasoning: str | None = None
    #: Also switch the model of this open thread (its next turn uses it).
    thread_id: str | None = None


class ProvidersSelectResult(ProtocolModel):
    provider: str
    model: str
    reasoning: str | None = None
    persisted: bool


class ProvidersConfigureParams(ProtocolModel):
    """Settings go to config.toml; ``apiKey`` goes to the user's private credentials file
    (``credentials.json`` in the data dir, mode 0600), never to config.toml. Both outlive the
    connection, so clients should say so in their UI. An empty ``apiKey`` removes the stored key."""

    provider: str
    api_key: str | None = None
    base_url: str | None = None
    dialect: Literal["responses", "chat-completions", "anthropic-messages"] | None = None
    api_key_env: str | None = None
    models: list[str] | None = None
    default_model: str | None = None


class ProvidersConfigureResult(ProtocolModel):
    provider: str
    persisted: bool
    #: Settings written to config.toml take effect for new runtimes (a server restart); a stored
    #: key alone is used at once by a provider the server already has.
    restart_required: bool = True
    #: Whether a key is now stored for this provider (after storing or removing one).
    key_stored: bool = False
    #: An empty ``apiKey`` removed a stored key (False: there was none).
    key_removed: bool = False
    #: Where the provider's key comes from now: "env", "stored" or None (none yet).
    auth_source: Literal["env", "stored", "oauth"] | None = None
    warnings: list[str] = Field(default_factory=empty_list)


class SettingsResult(ProtocolModel):
    provider: str
    model: str
    mode: str
    default_mode: str
    web_search: str
    config_file: str
    persist: bool


class SetWebSearchParams(ProtocolModel):
    mode: Literal["off", "auto", "on"]


class SetDefaultModeParams(ProtocolModel):
    mode: Mode


# --------------------------------------------------------------------------- method table


P = TypeVar("P", bound=ProtocolModel)
R = TypeVar("R", bound=ProtocolModel)


@dataclass(frozen=True)
class MethodSpec(Generic[P, R]):
    """One method: its name, group, params and result models, and a one-line summary.

    Generic in params and result so that one call covers every method with full types:
    ``await client.call(THREAD_START, ThreadStartParams(...))`` is a ``ThreadResult``. Each
    method has a module-level constant (the method name in upper snake case) to pass around.
    """

    name: str
    group: str
    params: type[P]
    result: type[R]
    summary: str

    def result_of(self, value: object) -> R:
        """The typed result from a handler's model or a remote peer's decoded JSON object;
        anything else is a protocol violation (``TypeError`` or pydantic's ``ValidationError``)."""
        if isinstance(value, self.result):
            return value
        if isinstance(value, dict):
            return self.result.model_validate(value)
        raise TypeError(f"{self.name} answered {type(value).__name__}, not {self.result.__name__}")


INITIALIZE = MethodSpec(
    "initialize",
    "handshake",
    InitializeParams,
    InitializeResult,
    "Handshake: server info, active provider/model/cwd/mode and which method groups exist.",
)

EXTENSIONS_LIST = MethodSpec(
    "extensions/list",
    "discovery",
    NoParams,
    ExtensionsListResult,
    "Installed extension manifests and capability statuses.",
)

PROVIDERS_LIST = MethodSpec(
    "providers/list",
    "discovery",
    NoParams,
    ProvidersListResult,
    "Inference providers with auth state, and the selected provider/model.",
)

MODEL_LIST = MethodSpec(
    "model/list", "discovery", ModelListParams, ModelListResult, "Model profiles of a provider (default: the selected one)."
)

TOOLS_LIST = MethodSpec(
    "tools/list", "discovery", ToolsListParams, ToolsListResult, "Tools every contributor offers right now, with schemas."
)

THREAD_START = MethodSpec(
    "thread/start",
    "threads",
    ThreadStartParams,
    ThreadResult,
    "Create a thread (cwd defaults to the server's; ephemeral threads are not stored).",
)

THREAD_LIST = MethodSpec(
    "thread/list",
    "threads",
    ThreadListParams,
    ThreadListResult,
    "Stored and open threads, newest first, optionally for one cwd.",
)

THREAD_READ = MethodSpec(
    "thread/read",
    "threads",
    ThreadReadParams,
    ThreadResult,
    "A thread (open or stored); turns and items only with includeTurns.",
)

THREAD_RESUME = MethodSpec(
    "thread/resume",
    "threads",
    ThreadResumeParams,
    ThreadResult,
    "Open a stored thread so new turns can run on it (turn/start also does this).",
)

THREAD_CLOSE = MethodSpec(
    "thread/close",
    "threads",
    ThreadCloseParams,
    ThreadCloseResult,
    "Unload an open thread and give up writing it, so another process can resume it "
    "(a running turn is interrupted first; the stored thread is kept).",
)

THREAD_FORK = MethodSpec(
    "thread/fork",
    "threads",
    ThreadForkParams,
    ThreadResult,
    "Copy a thread up to a turn into a new thread with a parent pointer.",
)

TURN_START = MethodSpec(
    "turn/start",
    "threads",
    TurnStartParams,
    TurnResult,
    "Start a turn from a prompt or input items; returns once it has started.",
)

TURN_STEER = MethodSpec(
    "turn/steer",
    "threads",
    TurnSteerParams,
    TurnSteerResult,
    "Queue a message for the running turn (expectedTurnId must match); input items attach files and pictures as in turn/start.",
)

TURN_STEER_CANCEL = MethodSpec(
    "turn/steer/cancel",
    "threads",
    TurnSteerCancelParams,
    TurnSteerCancelResult,
    "Take back a queued steer message the model has not received yet (to edit or drop it).",
)

TURN_INTERRUPT = MethodSpec(
    "turn/interrupt",
    "threads",
    TurnInterruptParams,
    TurnInterruptResult,
    "Cancel the running turn; it completes with status interrupted.",
)

SESSION_GET = MethodSpec(
    "session/get",
    "session",
    SessionGetParams,
    SessionGetResult,
    "Mode, provider, open threads, running turns and pending approvals/user input.",
)

SESSION_SET_MODE = MethodSpec(
    "session/set_mode", "session", SessionSetModeParams, SessionModeResult, "Change the policy mode for this session."
)

SESSION_RESOLVE_APPROVAL = MethodSpec(
    "session/resolve_approval",
    "session",
    ResolveApprovalParams,
    ResolvedResult,
    "Answer a pending approval (approved, or one of the offered decisions).",
)

TRUST_GET = MethodSpec(
    "trust/get",
    "trust",
    TrustGetParams,
    TrustResult,
    "Whether a folder is trusted to load its own config, hooks, skills, commands, agents and MCP.",
)

TRUST_SET = MethodSpec(
    "trust/set",
    "trust",
    TrustSetParams,
    TrustResult,
    "Record a trust decision for a folder (takes effect when a runtime next starts there).",
)

PROVIDERS_SELECT = MethodSpec(
    "providers/select",
    "providers",
    ProvidersSelectParams,
    ProvidersSelectResult,
    "Select provider and model for new threads (persisted when the server persists config).",
)

PROVIDERS_CONFIGURE = MethodSpec(
    "providers/configure",
    "providers",
    ProvidersConfigureParams,
    ProvidersConfigureResult,
    "Write a provider's settings (base URL, dialect, key variable, models) to config.toml and/or "
    "store its API key in the user's private credentials file.",
)

SETTINGS_GET = MethodSpec("settings/get", "settings", NoParams, SettingsResult, "Current settings.")

SETTINGS_SET_WEB_SEARCH = MethodSpec(
    "settings/set_web_search", "settings", SetWebSearchParams, SettingsResult, "Set the web-search mode (persisted)."
)

SETTINGS_SET_DEFAULT_MODE = MethodSpec(
    "settings/set_default_mode",
    "settings",
    SetDefaultModeParams,
    SettingsResult,
    "Set the default policy mode for future sessions (persisted).",
)

_SPECS: list[MethodSpec[Any, Any]] = [
    INITIALIZE,
    EXTENSIONS_LIST,
    PROVIDERS_LIST,
    MODEL_LIST,
    TOOLS_LIST,
    THREAD_START,
    THREAD_LIST,
    THREAD_READ,
    THREAD_RESUME,
    THREAD_CLOSE,
    THREAD_FORK,
    TURN_START,
    TURN_STEER,
    TURN_STEER_CANCEL,
    TURN_INTERRUPT,
    SESSION_GET,
    SESSION_SET_MODE,
    SESSION_RESOLVE_APPROVAL,
    TRUST_GET,
    TRUST_SET,
    PROVIDERS_SELECT,
    PROVIDERS_CONFIGURE,
    SETTINGS_GET,
    SETTINGS_SET_WEB_SEARCH,
    SETTINGS_SET_DEFAULT_MODE,
]

METHODS: dict[str, MethodSpec[Any, Any]] = {spec.name: spec for spec in _SPECS}


def register(spec: MethodSpec[P, R]) -> MethodSpec[P, R]:
    """Add a method spec (used by the protocol modules of further method groups)."""
    if spec.name in METHODS:
        raise ValueError(f"method {spec.name!r} is already defined")
    METHODS[spec.name] = spec
    return spec


# --------------------------------------------------------------------------- server notifications


class ServerNotification(ProtocolModel):
    """A notification the server emits itself (not a runtime event)."""

    method: str

    def params(self) -> dict[str, Any]:
        data = self.wire()
        data.pop("method", None)
        return data


class ErrorNotification(ServerNotification):
    """Sent before a connection is cut, e.g. when the client fell too far behind."""

    method: Literal["server/error"] = "server/error"
    code: int
    message: str


#: Notifications the server emits itself; the runtime's events are the rest.
SERVER_NOTIFICATIONS: list[type[ServerNotification]] = [ErrorNotification]


def register_notification(model: type[ServerNotification]) -> None:
    if model not in SERVER_NOTIFICATIONS:
        SERVER_NOTIFICATIONS.append(model)
