"""The embedded runtime: threads, turns, approvals, the event bus and persistence.

Clients (TUI, one-shot mode, app server, ACP, batch) drive it through the control-plane surface;
this class is what that surface calls. It owns lifecycle ordering, cancellation and event
semantics; extensions only provide the services it orchestrates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.config import MODES, ConfigWriter, RoderConfig
from roder_core.context import ContextAssembler
from roder_core.errors import RoderError, ThreadNotFoundError, TurnBusyError, UnknownProviderError
from roder_core.events import (
    EventBus,
    ModeChanged,
    RuntimeEvent,
    ThreadStarted,
    ThreadStatusChanged,
)
from roder_core.hooks import HookRunner
from roder_core.ir import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ModelProfile,
    ParentRef,
    Thread,
    ThreadHeader,
    ThreadSummary,
    Turn,
    UserMessageItem,
)
from roder_core.mutation import MutationQueue
from roder_core.paths import RoderPaths
from roder_core.policy import PolicyEngine
from roder_core.reducer import apply_event
from roder_core.services import HookPoint, InferenceEngine

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.registry import ExtensionRegistry
    from roder_core.turn import TurnRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrokerScope:
    """What a broker set is scoped to: one workspace and one extension's granted capabilities."""

    workspace: Path
    capabilities: frozenset[str]
    extension_id: str
    runtime: Runtime


BrokerFactory = Callable[[BrokerScope], "Brokers"]


@dataclass
class RuntimeOptions:
    cwd: Path
    paths: RoderPaths
    config: RoderConfig = field(default_factory=RoderConfig)
    mode: str = "ask"
    provider: str | None = None
    model: str | None = None
    #: False in headless runs: anything that would ask a person is denied instead.
    interactive: bool = True
    trusted: bool = False
    broker_factory: BrokerFactory | None = None
    max_iterations: int | None = None
    #: Removes known secret values from text before it is stored or shown.
    redactor: Callable[[str], str] | None = None


@dataclass
class ThreadState:
    thread: Thread
    ephemeral: bool = False
    runner: TurnRunner | None = None
    task: asyncio.Task[Turn] | None = None
    steers: list[UserMessageItem] = field(default_factory=list)
    #: Subagent threads: only these tools are offered (None: every tool).
    allowed_tools: frozenset[str] | None = None
    #: Subagent threads: the policy mode of this thread (None: the runtime's mode).
    mode: str | None = None

    @property
    def active_turn_id(self) -> str | None:
        return self.runner.turn.id if self.runner is not None and self.task and not self.task.done() else None


class Runtime:
    def __init__(self, registry: ExtensionRegistry, options: RuntimeOptions) -> None:
        if options.mode not in MODES:
            raise RoderError(f"unknown mode {options.mode!r}; choose one of {', '.join(MODES)}")
        self.registry = registry
        self.options = options
        self.bus = EventBus()
        self.policy = PolicyEngine(options.mode, registry.policy_contributors)
        self.hooks = HookRunner(registry.hooks, options.config.hook_timeout)
        self.mutations = MutationQueue()
        self.context = ContextAssembler(registry.context_providers, registry.context_planner)
        self.store = registry.thread_store
        self.redact: Callable[[str], str] = options.redactor or (lambda text: text)
        self._threads: dict[str, ThreadState] = {}
        self._approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[ApprovalDecision]]] = {}
        self._brokers: dict[tuple[str, str], Brokers] = {}
        self.provider = options.provider or self.default_provider()
        self.model = options.model or self.engine(self.provider).default_model()
        for sink in registry.event_sinks:
            self.bus.add_listener(sink.on_event)

    # ------------------------------------------------------------------ providers

    @property
    def mode(self) -> str:
        return self.policy.mode

    def default_provider(self) -> str:
        configured = self.options.config.provider
        if configured:
            return configured
        engines = self.registry.inference_engines
        if not engines:
            raise UnknownProviderError("no inference engine is installed")
        ready = [e for e in engines if e.metadata().auth_configured is not False and e.id() != "mock"]
        ready.sort(key=lambda e: e.metadata().sort_order)
        return ready[0].id() if ready else "mock" if self.registry.inference_engine("mock") else engines[0].id()

    def engine(self, provider: str) -> InferenceEngine:
        engine = self.registry.inference_engine(provider)
        if engine is None:
            known = ", ".join(sorted(e.id() for e in self.registry.inference_engines)) or "none"
            raise UnknownProviderError(f"unknown provider {provider!r} (installed: {known})")
        return engine

    def model_profile(self, provider: str, model: str) -> ModelProfile:
        profile = self.engine(provider).model_profile(model)
        overrides = self.options.config.models_override
        override = overrides.get(f"{provider}/{model}") or overrides.get(model)
        return profile.model_copy(update=override) if override else profile

    def select(self, provider: str, model: str | None = None) -> None:
        engine = self.engine(provider)
        self.provider = provider
        self.model = model or engine.default_model()

    # ------------------------------------------------------------------ brokers

    def brokers_for(self, workspace: Path, extension_id: str) -> Brokers:
        key = (str(workspace), extension_id)
        if key not in self._brokers:
            factory = self.options.broker_factory
            if factory is None:
                from roder_core.brokers.host import default_broker_factory

                factory = default_broker_factory
            scope = BrokerScope(workspace, self.registry.granted_capabilities(extension_id), extension_id, self)
            self._brokers[key] = factory(scope)
        return self._brokers[key]

    # ------------------------------------------------------------------ events

    async def emit(self, event: RuntimeEvent) -> None:
        """Apply to live state, persist (unless a delta or an ephemeral thread), then fan out."""
        state = self._threads.get(event.thread_id)
        if state is not None:
            apply_event(state.thread, event)
            if event.persisted and not state.ephemeral and self.store is not None:
                try:
                    await self.store.append(state.thread.header(), event)
                except Exception as exc:  # a full disk must not lose the live turn silently
                    log.error("could not persist event %s: %s", event.method, exc)
                    self.bus.publish(
                        _error_event(event.thread_id, f"could not save thread: {exc}", "persistence")
                    )
        self.bus.publish(event)

    def publish_live(self, event: RuntimeEvent) -> None:
        """Deltas: no persistence, no await; straight to subscribers."""
        self.bus.publish(event)

    # ------------------------------------------------------------------ threads

    def _state(self, thread_id: str) -> ThreadState:
        state = self._threads.get(thread_id)
        if state is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} is open (resume it first)")
        return state

    def thread(self, thread_id: str) -> Thread:
        return self._state(thread_id).thread

    def open_threads(self) -> list[Thread]:
        return [s.thread for s in self._threads.values()]

    def active_turn_id(self, thread_id: str) -> str | None:
        """The id of the turn running on an open thread, if any (session/get, ACP cancel)."""
        state = self._threads.get(thread_id)
        return state.active_turn_id if state is not None else None

    async def start_thread(
        self,
        cwd: Path | None = None,
        provider: str | None = None,
        model: str | None = None,
        *,
        title: str = "",
        ephemeral: bool = False,
        parent: ParentRef | None = None,
    ) -> Thread:
        provider = provider or self.provider
        engine = self.engine(provider)
        header = ThreadHeader(
            cwd=str((cwd or self.options.cwd).resolve()),
            provider=provider,
            model=model or (self.model if provider == self.provider else engine.default_model()),
            title=title,
            parent=parent,
        )
        thread = Thread(**header.model_dump(), mode=self.mode)
        self._threads[thread.id] = ThreadState(thread=thread, ephemeral=ephemeral)
        await self.emit(ThreadStarted(thread_id=thread.id, thread=header))
        await self._run_observer_hook(HookPoint.SESSION_START, {"thread_id": thread.id, "cwd": thread.cwd})
        return thread

    async def resume_thread(self, thread_id: str) -> Thread:
        """Load a stored thread into the runtime (same reducer as live), ready for new turns."""
        if thread_id in self._threads:
            return self._threads[thread_id].thread
        if self.store is None:
            raise ThreadNotFoundError(f"no thread store is installed; cannot resume {thread_id!r}")
        thread = await self.store.load(thread_id)
        self._threads[thread.id] = ThreadState(thread=thread)
        return thread

    def adopt_thread(self, thread: Thread, ephemeral: bool = False) -> None:
        """Open an already-built thread (a fork made by a CheckpointStore)."""
        self._threads[thread.id] = ThreadState(thread=thread, ephemeral=ephemeral)

    async def list_threads(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]:
        stored = await self.store.list_threads(cwd, limit) if self.store is not None else []
        known = {s.id for s in stored}
        live = [
            ThreadSummary(
                id=s.thread.id,
                cwd=s.thread.cwd,
                title=s.thread.title,
                created_at=s.thread.created_at,
                updated_at=s.thread.updated_at,
                provider=s.thread.provider,
                model=s.thread.model,
                parent=s.thread.parent,
                turn_count=len(s.thread.turns),
                status=s.thread.status,
            )
            for s in self._threads.values()
            if s.thread.id not in known and s.thread.turns and (cwd is None or s.thread.cwd == cwd)
        ]
        rows = sorted([*stored, *live], key=lambda s: s.updated_at, reverse=True)
        return rows[:limit] if limit else rows

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None
    ) -> None:
        """Give one thread (a subagent's) its own tool set and policy mode."""
        if mode is not None and mode not in MODES:
            raise RoderError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        state = self._state(thread_id)
        state.allowed_tools = tools
        state.mode = mode

    def thread_mode(self, thread_id: str) -> str:
        state = self._threads.get(thread_id)
        return (state.mode if state is not None else None) or self.mode

    async def close_thread(self, thread_id: str) -> None:
        state = self._threads.get(thread_id)
        if state is None:
            return
        if state.task is not None and not state.task.done():
            await self.interrupt(thread_id)
        await self._run_observer_hook(HookPoint.SESSION_END, {"thread_id": thread_id})
        self._threads.pop(thread_id, None)

    # ------------------------------------------------------------------ turns

    async def start_turn(
        self,
        thread_id: str,
        text: str,
        attachments: list[Attachment] | None = None,
        *,
        task_ledger_required: bool = False,
        deadline: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> Turn:
        """Start a turn in the background and return it as soon as it has started.

        ``provider``/``model`` override the thread's model for this turn only (slash commands
        with a ``model`` frontmatter)."""
        from roder_core.turn import TurnRunner

        state = self._state(thread_id)
        if state.task is not None and not state.task.done():
            raise TurnBusyError(f"a turn is already running on thread {thread_id}; steer or interrupt it")
        runner = TurnRunner(
            self,
            state,
            UserMessageItem(text=text, attachments=attachments or []),
            task_ledger_required=task_ledger_required,
            deadline=deadline,
            provider=provider,
            model=model,
        )
        state.runner = runner
        started = asyncio.get_running_loop().create_future()
        state.task = asyncio.create_task(runner.run(started), name=f"turn {runner.turn.id}")
        await asyncio.wait({started, state.task}, return_when=asyncio.FIRST_COMPLETED)
        return runner.turn

    async def wait_turn(self, thread_id: str) -> Turn:
        state = self._state(thread_id)
        if state.task is None:
            raise RoderError(f"thread {thread_id} has no turn")
        return await asyncio.shield(state.task)

    async def run_turn(self, thread_id: str, text: str, attachments: list[Attachment] | None = None, **kw: Any) -> Turn:
        await self.start_turn(thread_id, text, attachments, **kw)
        return await self.wait_turn(thread_id)

    def steer(self, thread_id: str, text: str, expected_turn_id: str | None = None) -> UserMessageItem:
        """Queue a message for the running turn; it is delivered at the next model call."""
        state = self._state(thread_id)
        active = state.active_turn_id
        if active is None:
            raise RoderError("no turn is running on this thread; start a new turn instead")
        if expected_turn_id is not None and expected_turn_id != active:
            raise RoderError(f"turn {expected_turn_id} is not the running turn ({active})")
        item = UserMessageItem(text=text, steer=True)
        state.steers.append(item)
        return item

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool:
        """Cancel the running turn (stream and tools); it ends with status ``interrupted``."""
        state = self._state(thread_id)
        task = state.task
        if task is None or task.done():
            return False
        if turn_id is not None and state.active_turn_id != turn_id:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True

    # ------------------------------------------------------------------ approvals

    def register_approval(self, request: ApprovalRequest) -> asyncio.Future[ApprovalDecision]:
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._approvals[request.approval_id] = (request, future)
        return future

    def forget_approval(self, approval_id: str) -> None:
        self._approvals.pop(approval_id, None)

    def pending_approvals(self, thread_id: str | None = None) -> list[ApprovalRequest]:
        return [r for r, _ in self._approvals.values() if thread_id is None or r.thread_id == thread_id]

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool:
        entry = self._approvals.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(decision)
        return True

    def persist_rule(self, rule: str) -> None:
        """'Always' approvals write the exact rule shown to the user into config.toml."""
        ConfigWriter(self.options.paths.config_file).append_unique("policy.allow", rule)

    # ------------------------------------------------------------------ session

    async def set_mode(self, mode: str, reason: str = "") -> None:
        if mode not in MODES:
            raise RoderError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        self.policy.mode = mode
        for state in list(self._threads.values()):
            await self.emit(ModeChanged(thread_id=state.thread.id, mode=mode, reason=reason))
        if not self._threads:
            self.bus.publish(ModeChanged(thread_id="", mode=mode, reason=reason))

    async def set_status(self, state: ThreadState, status: str) -> None:
        if state.thread.status != status:
            await self.emit(ThreadStatusChanged(thread_id=state.thread.id, status=status))

    async def _run_observer_hook(self, point: HookPoint, payload: dict[str, Any]) -> None:
        if self.hooks.has(point):
            await self.hooks.run(point, payload)

    async def close(self) -> None:
        for thread_id in list(self._threads):
            await self.close_thread(thread_id)
        if self.store is not None and hasattr(self.store, "close"):
            await self.store.close()
        for service in self.registry.closeable_services():
            try:
                await service.aclose()
            except Exception as exc:  # one stuck service must not keep the others open
                log.warning("closing %s failed: %s", type(service).__name__, exc)


def _error_event(thread_id: str, message: str, kind: str) -> RuntimeEvent:
    from roder_core.events import ErrorEvent

    return ErrorEvent(thread_id=thread_id, message=message, kind=kind)
