"""Service protocols: the typed contracts extensions implement and the runtime consumes.

Every service exposes ``id()``; the registry checks that ids match what the manifest declared.
Protocols are structural: an extension does not need to inherit from them.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

from roder_core.ir import (
    AgentInferenceRequest,
    InferenceEvent,
    ModelProfile,
    Thread,
    ThreadHeader,
    ThreadSummary,
)
from roder_core.kernel.tasks import TaskOutput

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.brokers.content_gate import ReadRules
    from roder_core.kernel.tools import ToolCall, ToolExecutionContext, ToolHost, ToolRegistry
    from roder_core.settings.config import RoderConfig
    from roder_core.threads.events import RuntimeEvent


# --------------------------------------------------------------------------- inference


@dataclass
class InferenceProviderMetadata:
    name: str
    auth_type: Literal["api_key", "none", "oauth"] = "api_key"
    auth_label: str | None = None
    auth_configured: bool | None = None
    #: Where the key in use comes from: "env" (its variable) or "stored" (roder providers login).
    auth_source: Literal["env", "stored", "oauth"] | None = None
    recommended: bool = False
    sort_order: int = 100
    description: str | None = None
    dialect: str = ""
    base_url: str | None = None


@dataclass
class InferenceTurnContext:
    thread_id: str
    turn_id: str
    #: ``time.time()`` instant at which the turn's finalization reserve begins (eval deadlines):
    #: work, retries included, should end by then; None means no deadline.
    deadline: float | None = None
    attempt: int = 0
    #: Ceilings on one model response, 0 for none: bytes received and seconds since the request
    #: (``[limits] response_mb`` and ``response_seconds``). HTTP engines enforce them as the
    #: body arrives (``providers.transport``), so a reply that never ends is cut off.
    max_response_bytes: int = 0
    max_response_seconds: float = 0.0


@runtime_checkable
class InferenceEngine(Protocol):
    """Translates the canonical request into one wire dialect and streams canonical events.

    ``stream_turn`` is an async generator; the runtime cancels it (closing the HTTP stream) on
    interrupt. Engines own retries for 429/5xx/dropped streams and raise ``InferenceError`` with
    a kind when they give up.
    """

    def id(self) -> str: ...

    def metadata(self) -> InferenceProviderMetadata: ...

    def model_profile(self, model: str) -> ModelProfile: ...

    def default_model(self) -> str: ...

    async def list_models(self) -> list[ModelProfile]: ...

    def stream_turn(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> AsyncIterator[InferenceEvent]: ...


# --------------------------------------------------------------------------- context


@dataclass
class ContextQuery:
    thread_id: str
    cwd: Path
    prompt: str
    model: ModelProfile | None = None
    #: True once per turn, when its "turn" blocks are taken (recorded with the user message);
    #: False for every model request's "system" blocks. A provider whose blocks consume
    #: something (new output since last time) hands it on only when this is True.
    turn_start: bool = False
    #: What the turn's tools may do, for the environment block: the policy mode, whether a
    #: person can approve, the sandbox level in effect and whether commands reach the network
    #: (empty / None when not known).
    mode: str = ""
    approver: bool = True
    sandbox: str = ""
    network: bool | None = None


@dataclass
class ContextBlock:
    """A typed piece of context. Lower ``priority`` numbers come first; ``droppable`` blocks may
    be left out when the budget is tight.

    ``placement`` keeps provider prompt caches valid: "system" blocks (instructions, skills) form
    the system prompt, which must stay byte-stable from turn to turn; "turn" blocks (the
    environment, recalled memories: anything that changes between turns) are computed once when a
    turn starts and recorded with its user message, so every later request repeats them verbatim
    and the whole history stays a cacheable prefix."""

    source: str
    kind: str
    text: str
    priority: int = 50
    droppable: bool = False
    placement: Literal["system", "turn"] = "system"


@runtime_checkable
class ContextProvider(Protocol):
    def id(self) -> str: ...

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]: ...


@runtime_checkable
class ContextPlanner(Protocol):
    """Orders and budgets context blocks and history into the final request."""

    def id(self) -> str: ...

    def plan(self, blocks: list[ContextBlock], request: AgentInferenceRequest, model: ModelProfile) -> AgentInferenceRequest: ...


# --------------------------------------------------------------------------- state


@runtime_checkable
class ThreadStore(Protocol):
    """Append-only persistence of runtime events per thread.

    ``append`` receives every persisted event (never deltas); a store may hold a thread's events
    back until its first turn starts. ``sync`` is called at turn boundaries (make it durable).
    ``load`` folds the events with ``roder_core.threads.reducer`` and settles what a crash left running.
    ``claim`` is called before a turn starts and must fail (RoderError) when another process
    writes the thread; ``release`` when the runtime closes it. ``events`` returns the stored
    events in order (export, replay, trajectories).
    """

    def id(self) -> str: ...

    async def append(self, header: ThreadHeader, event: RuntimeEvent) -> None: ...

    async def sync(self, thread_id: str) -> None: ...

    async def load(self, thread_id: str) -> Thread: ...

    async def events(self, thread_id: str) -> list[RuntimeEvent]: ...

    async def list_threads(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]: ...

    async def delete(self, thread_id: str) -> None: ...

    async def claim(self, thread_id: str) -> None: ...

    async def release(self, thread_id: str) -> None: ...


@dataclass
class RecentThread:
    """A stored thread with only its recent turns in ``thread.turns``.

    ``older_turns`` turns before them stay on disk: what a resumed thread's next model call can
    see (the turns since the latest compaction's kept part, or the last window's worth when it
    was never compacted) is all a resume needs, and the older ones are read back with ``load``
    only when something asks for the whole history (``ThreadState.complete_history``).
    """

    thread: Thread
    older_turns: int = 0


@runtime_checkable
class RecentThreadLoader(Protocol):
    """A ``ThreadStore`` that can load a thread's recent turns without the rest (optional)."""

    async def load_recent(self, thread_id: str) -> RecentThread: ...


@runtime_checkable
class CheckpointStore(Protocol):
    """Branches: ``fork`` copies a thread up to the end of ``turn_id`` (all of it when None), or
    with ``before_item`` everything before that user message, into a new thread with
    ``new_header`` (whose ``parent`` points back) and returns it loaded. The parent's stored
    bytes must stay untouched."""

    def id(self) -> str: ...

    async def fork(
        self, thread_id: str, turn_id: str | None, new_header: ThreadHeader, *, before_item: str | None = None
    ) -> Thread: ...


MemoryScope = Literal["project", "global"]


@dataclass
class MemoryRecord:
    """One remembered note. ``project`` is the project root it belongs to (None: global)."""

    id: str
    text: str
    scope: MemoryScope
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "scope": self.scope,
            "project": self.project,
            "tags": list(self.tags),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            **({"score": self.score} if self.score is not None else {}),
        }


@runtime_checkable
class MemoryStore(Protocol):
    """Notes the agent and the user keep across sessions, in a project or the global scope.

    ``project`` names the project (a workspace path; the store maps it to its root). Searches
    cover that project's notes plus the global ones unless ``include_global`` is False.
    """

    def id(self) -> str: ...

    async def save(
        self, text: str, scope: MemoryScope = "project", tags: list[str] | None = None, *, project: str | None = None
    ) -> str: ...

    async def search(
        self, query: str, limit: int = 5, *, project: str | None = None, include_global: bool = True
    ) -> list[MemoryRecord]: ...

    async def list(
        self, *, project: str | None = None, scope: MemoryScope | None = None, limit: int | None = None
    ) -> builtins.list[MemoryRecord]: ...

    async def get(self, memory_id: str) -> MemoryRecord | None: ...

    async def update(
        self, memory_id: str, *, text: str | None = None, tags: builtins.list[str] | None = None
    ) -> MemoryRecord: ...

    async def delete(self, memory_id: str) -> bool: ...


class MemoryStoreFactory(Protocol):
    """Seed 003's way to install memory: the factory provides the MemoryStore service id."""

    def id(self) -> str: ...

    def create(self) -> MemoryStore: ...


def resolve_memory_store(service: MemoryStore | MemoryStoreFactory) -> MemoryStore:
    """Seed 003 installs memory as a factory (``registry.memory_store_factory``) whose
    ``create()`` gives the store; this returns the store whichever way it was installed."""
    create = getattr(service, "create", None)
    return cast(MemoryStore, create() if callable(create) else service)


# --------------------------------------------------------------------------- actions


@runtime_checkable
class ToolContributor(Protocol):
    def id(self) -> str: ...

    def contribute(self, registry: ToolRegistry) -> None: ...


@dataclass
class TaskContext:
    """What an executor gets for one task: where to write, brokers bound to the task's thread
    (its workspace, the executor extension's grants, the thread's loopback network) and, when
    the task belongs to a thread, that thread's ``ToolHost`` (to run child threads)."""

    task_id: str
    workspace: Path
    brokers: Brokers
    output: TaskOutput
    thread_id: str | None = None
    turn_id: str | None = None
    host: ToolHost | None = None


@runtime_checkable
class TaskExecutor(Protocol):
    """Runs one kind of background task. Cancelling ``run`` must stop the work (kill the process,
    interrupt the child turn); its return value is the task's ``result``. An executor may also
    define ``describe(params) -> str`` (a title; raise ``ValueError`` to refuse bad params
    before the task starts) and ``policy_call(params) -> (tool, arguments) | None`` (the tool
    call whose policy a client's ``tasks/submit`` must pass, e.g. ``bash`` for a command)."""

    def id(self) -> str: ...

    async def run(self, params: dict[str, Any], ctx: TaskContext) -> Any: ...


@runtime_checkable
class SubagentDispatcher(Protocol):
    def id(self) -> str: ...

    async def dispatch(self, ctx: ToolExecutionContext, agent: str, prompt: str) -> str: ...


@dataclass(frozen=True)
class RunnerDefinition:
    """One runner the user can select: ``[runners.NAME]`` of config.toml (or the built-in
    ``local``). ``kind`` names the ``RemoteRunnerProvider`` that opens it; ``settings`` is the
    rest of the table, which that provider validates."""

    name: str
    kind: str
    settings: dict[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class RunnerAvailability:
    """Whether a provider can open runners on this machine, and if not, why (shown by
    ``runners/list``). ``details`` says what was found (engine and version, ...)."""

    available: bool
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InternalCommandResult:
    """A command Roder itself ran in a runner (snapshots, port listings): never the model's."""

    exit_code: int | None
    stdout: str
    stderr: str = ""


@dataclass(frozen=True)
class ForwardedPort:
    """A runner's port reachable on this machine at ``local_host:local_port``."""

    port: int
    local_host: str
    local_port: int
    how: str


@dataclass(frozen=True)
class RunnerOpenContext:
    """What a provider needs to open a session: the thread's local workspace (the folder a
    container mounts; the key an ssh runner maps absolute paths from), Roder's cache folder
    and the command-network setting."""

    local_workspace: Path
    cache_dir: Path
    network: bool = False
    #: Use this folder in the runner instead of the configured one (a batch rollout's own).
    runner_workspace: str | None = None


@dataclass(frozen=True)
class RunnerScope:
    """What a runner session builds one broker set from: the thread's local workspace and one
    extension's grants, plus the core's own pieces the brokers must use (config, the secret
    redactor, the audit log) and ``local_brokers``, the runtime's broker set for this scope on
    this machine (the ``local`` runner returns it)."""

    workspace: Path
    capabilities: frozenset[str]
    extension_id: str
    config: RoderConfig
    spill_dir: Path
    #: The environment of Roder's process (secrets are scrubbed from what commands get).
    env: Mapping[str, str]
    redactor: Callable[[str], str]
    audit: Callable[[str, dict[str, Any]], None]
    local_brokers: Callable[[], Brokers]
    #: The runtime's live read rules (``[policy]``, a trusted project's, and those an answer
    #: added while running), for the runner's content gate; None: the config's ``[policy]``.
    read_rules: ReadRules | None = None


@runtime_checkable
class RunnerSession(Protocol):
    """A live runner: where a thread's tools execute. It supplies the brokers (the seam); the
    core keeps policy, approvals, secret redaction and environment scrubbing above them.

    ``workspace`` is the workspace path as the runner sees it. ``run_internal`` runs Roder's
    own commands (git for snapshots, the port listing) there outside the tool sandbox; it never
    runs anything the model wrote. ``forward_port`` makes one of the runner's ports reachable
    on this machine."""

    name: str
    kind: str
    workspace: str
    #: True when ``workspace`` is a folder of this machine (local, a mounted container folder):
    #: snapshots then run git here.
    files_local: bool
    #: Where Roder keeps its own state for this session (snapshot stores), in the runner when
    #: its files are not local.
    state_dir: str

    def brokers(self, scope: RunnerScope) -> Brokers: ...

    def describe(self) -> dict[str, Any]: ...

    async def run_internal(self, argv: list[str], *, timeout: float = 60.0) -> InternalCommandResult: ...

    async def forward_port(self, port: int, local_port: int = 0) -> ForwardedPort: ...

    async def push(self, local: Path) -> None:
        """Copy the local folder's files into the runner's workspace (nothing to do where the
        runner's workspace is the local folder)."""
        ...

    async def pull(self, local: Path) -> None:
        """Make the local folder hold exactly the runner's workspace files (a batch scores them)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class RemoteRunnerProvider(Protocol):
    """Seed 003's runner service: opens sessions of one kind (``local``, ``ssh``,
    ``container``). ``id()`` is that kind, which ``[runners.NAME] kind = ...`` names."""

    def id(self) -> str: ...

    def description(self) -> str: ...

    async def availability(self) -> RunnerAvailability: ...

    def check(self, definition: RunnerDefinition) -> None:
        """Raise ``ValueError`` with a clear message when the settings are wrong."""
        ...

    async def open(self, definition: RunnerDefinition, context: RunnerOpenContext) -> RunnerSession: ...


# --------------------------------------------------------------------------- policy, observation


class PolicyVerdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class PolicyDecision:
    verdict: PolicyVerdict
    reason: str = ""
    source: str = ""


@runtime_checkable
class PolicyContributor(Protocol):
    """May veto or escalate a call; returning None abstains. Deny wins over ask over allow."""

    def id(self) -> str: ...

    async def review(self, ctx: ToolExecutionContext, call: ToolCall) -> PolicyDecision | None: ...


@runtime_checkable
class EventSink(Protocol):
    """Observes every runtime event (audit, eval traces). Must be fast and never raise."""

    def id(self) -> str: ...

    def on_event(self, event: RuntimeEvent) -> None: ...


class HookPoint(StrEnum):
    BEFORE_TURN = "before_turn"
    CONTEXT = "context"
    BEFORE_PROVIDER_REQUEST = "before_provider_request"
    TOOL_CALL_BEFORE = "tool_call_before"
    TOOL_RESULT_AFTER = "tool_result_after"
    TURN_END = "turn_end"
    #: The model answered without tool calls; a hook may send it back to work (payload
    #: ``continue_with``: the reason, given to the model). Observing: a failure lets it stop.
    STOP = "stop"
    SESSION_START = "session_start"
    SESSION_END = "session_end"
    COMPACTION = "compaction"


#: Points where a hook failure denies the action (fail closed).
GATING_POINTS = frozenset(
    {
        HookPoint.BEFORE_TURN,
        HookPoint.CONTEXT,
        HookPoint.BEFORE_PROVIDER_REQUEST,
        HookPoint.TOOL_CALL_BEFORE,
    }
)


@dataclass
class HookOutcome:
    """A hook's answer. ``block`` stops the action with ``reason``; ``replace`` carries the
    rewritten payload fields (``text``, ``request``, ``arguments``, ``result``, ``summary``)."""

    block: bool = False
    reason: str = ""
    replace: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Hook(Protocol):
    """A lifecycle hook. Its payload comes redacted (known secret values and token formats
    replaced), unless the hook's class sets ``sees_raw_payload = True``: only Roder's own
    in-process hooks that need the values (``turn.hooks.HookRunner``) do."""

    def id(self) -> str: ...

    def points(self) -> frozenset[HookPoint]: ...

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None: ...


# --------------------------------------------------------------------------- surfaces


@dataclass
class StatusView:
    """What a status segment renders: text plus the segment's priority (lower drops first)."""

    text: str
    priority: int = 50
    style: str = ""


@runtime_checkable
class StatusSegment(Protocol):
    def id(self) -> str: ...

    def render(self, state: dict[str, Any]) -> StatusView | None: ...


@dataclass
class PaletteCommand:
    title: str
    help: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class PaletteSource(Protocol):
    def id(self) -> str: ...

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]: ...


# --------------------------------------------------------------------------- installing


class ServiceRegistrar(Protocol):
    """What ``RoderExtension.install`` receives: the registration half of the registry builder.

    Extensions name this narrow protocol, not ``kernel.registry.ExtensionRegistryBuilder``, so
    the extension contract (``kernel.extension``) does not depend on the builder that validates
    it; the builder satisfies it (mypy checks that where the builder calls ``install(self)``)."""

    def inference_engine(self, engine: InferenceEngine) -> None: ...

    def context_provider(self, provider: ContextProvider) -> None: ...

    def context_planner(self, planner: ContextPlanner) -> None: ...

    def thread_store(self, store: ThreadStore) -> None: ...

    def checkpoint_store(self, store: CheckpointStore) -> None: ...

    def memory_store(self, store: MemoryStore) -> None: ...

    def memory_store_factory(self, factory: MemoryStoreFactory) -> None: ...

    def tool_contributor(self, contributor: ToolContributor) -> None: ...

    def task_executor(self, executor: TaskExecutor) -> None: ...

    def subagent_dispatcher(self, dispatcher: SubagentDispatcher) -> None: ...

    def remote_runner_provider(self, provider: RemoteRunnerProvider) -> None: ...

    def policy_contributor(self, contributor: PolicyContributor) -> None: ...

    def event_sink(self, sink: EventSink) -> None: ...

    def hook(self, hook: Hook) -> None: ...

    def status_segment(self, segment: StatusSegment) -> None: ...

    def palette_source(self, source: PaletteSource) -> None: ...
