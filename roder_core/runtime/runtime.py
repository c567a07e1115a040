"""The embedded runtime: threads, turns, approvals, the event bus and persistence.

Clients (TUI, one-shot mode, app server, ACP, batch) drive it through the control-plane surface;
this class is what that surface calls. It owns lifecycle ordering, cancellation and event
semantics; extensions only provide the services it orchestrates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.brokers.live_redaction import LiveRedaction
from roder_core.brokers.secrets import SecretRedactor, redact_data
from roder_core.errors import InferenceError, RoderError, ThreadNotFoundError, TurnBusyError, UnknownProviderError
from roder_core.ir import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    CustomItem,
    Mode,
    ModelProfile,
    ParentRef,
    Thread,
    ThreadHeader,
    ThreadStatus,
    ThreadSummary,
    Turn,
    TurnStatus,
    UserMessageItem,
    new_id,
)
from roder_core.kernel.services import HookPoint, InferenceEngine
from roder_core.policy.audit import AuditLog
from roder_core.policy.engine import PolicyEngine
from roder_core.policy.plan_review_book import PlanReviewBook
from roder_core.policy.rules import RuleSet
from roder_core.runtime.options import BrokerFactory as BrokerFactory  # re-exported: embedders name it here
from roder_core.runtime.options import BrokerScope, RuntimeOptions
from roder_core.settings.config import MODES, ConfigWriter
from roder_core.teams.files import TeamFiles
from roder_core.teams.manager import TeamManager
from roder_core.threads.events import (
    AgentMessageDelta,
    ApprovalRequested,
    ApprovalResolved,
    CustomEntrySaved,
    EventBus,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    ModeChanged,
    RuntimeEvent,
    ThreadModelChanged,
    ThreadStarted,
    ThreadStatusChanged,
    ToolOutputDelta,
    UserInputRequested,
    parse_event,
)
from roder_core.threads.reducer import apply_event
from roder_core.threads.state import ThreadState
from roder_core.turn.context import ContextAssembler
from roder_core.turn.hooks import HookRunner
from roder_core.turn.mutation import MutationQueue
from roder_core.turn.planner import BudgetPlanner

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.brokers.sandbox import SandboxStatus
    from roder_core.customization.subagents import TraceRecord
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.kernel.teams import TeamChannel
    from roder_core.threads.sessions import Migration, ThreadNode
    from roder_core.turn.runner import TurnRunner

log = logging.getLogger(__name__)


class Runtime:
    def __init__(self, registry: ExtensionRegistry, options: RuntimeOptions) -> None:
        if options.mode not in MODES:
            raise RoderError(f"unknown mode {options.mode!r}; choose one of {', '.join(MODES)}")
        self.registry = registry
        self.options = options
        from roder_core.providers.limits import LearnedLimits

        self.learned_limits = LearnedLimits(options.paths.data_dir / "model-limits.json")
        self.bus = EventBus()
        self.redact: Callable[[str], str] = options.redactor or (lambda text: text)
        #: Live deltas redacted as streams (a secret split across two deltas is still caught).
        self._live = LiveRedaction(self.redact) if isinstance(self.redact, SecretRedactor) else None
        self.audit = AuditLog(options.paths.audit_file, self.redact)
        rules = options.config.policy
        self.policy = PolicyEngine(
            options.mode,
            registry.policy_contributors,
            RuleSet(rules.allow, rules.ask, rules.deny),
            audit=self.audit.record,
            extra_roots=options.config.fs.extra_roots,
        )
        self.hooks = HookRunner(registry.hooks, options.config.hook_timeout, self._transcript_path)
        self.mutations = MutationQueue()
        self.context = ContextAssembler(
            registry.context_providers,
            registry.context_planner or BudgetPlanner(options.config.context.reserve_tokens),
        )
        self.store = registry.thread_store
        self._threads: dict[str, ThreadState] = {}
        self._approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[ApprovalDecision]]] = {}
        self._user_inputs: dict[str, tuple[UserInputRequested, asyncio.Future[dict[str, Any]]]] = {}
        self._brokers: dict[tuple[str, str], Brokers] = {}
        #: Subagents running in this runtime, by trace id (``turn/subagentTrace/read`` while they run).
        self.subagent_traces: dict[str, TraceRecord] = {}
        self.provider = options.provider or self.default_provider()
        config = options.config
        # config.toml's model belongs to config.toml's provider, not to one picked by --provider.
        config_model = config.model if config.provider == self.provider else None
        self.model = options.model or config_model or self.engine(self.provider).default_model()
        for sink in registry.event_sinks:
            self.bus.add_listener(sink.on_event)
        self.bus.add_listener(self._audit_event)
        #: Plans ``exit_plan`` proposed, as documents under review (``plan/review/*``).
        self.plan_reviews = PlanReviewBook(self, self.bus.add_listener)
        #: Agent teams led by threads of this runtime (``team/*``).
        self.teams = TeamManager(self, TeamFiles(options.paths.data_dir / "teams"))

    # ------------------------------------------------------------------ providers

    @property
    def mode(self) -> Mode:
        return Mode(self.policy.mode)

    def default_provider(self) -> str:
        """config.toml's provider, else the first with a key, else a local server, else mock
        (roder_core.providers.selection says why)."""
        from roder_core.providers.selection import choose_default_provider

        return choose_default_provider(self.registry.inference_engines, self.options.config).provider

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
        profile = profile.model_copy(update=override) if override else profile
        learned = self.learned_limits.get(provider, model)
        if learned is not None and learned < profile.context_window:
            # The server's real window, learned from its rejections (see providers/limits.py).
            profile = profile.model_copy(
                update={"context_window": learned, "max_output_tokens": min(profile.max_output_tokens, learned // 4)}
            )
        return profile

    def learn_context_limit(self, provider: str, model: str, error: InferenceError, prompt_tokens: int) -> bool:
        """Record the window a context overflow revealed; True when the assumed window shrank."""
        from roder_core.providers.limits import limit_after_rejection

        window = limit_after_rejection(error.context_limit, prompt_tokens, self.model_profile(provider, model).context_window)
        if window is None:
            return False
        source = "stated by the server" if error.context_limit else f"a {prompt_tokens}-token prompt was refused"
        log.warning("%s/%s: context window is %d tokens (%s); recorded", provider, model, window, source)
        self.learned_limits.record(provider, model, window, source)
        return True

    def select(self, provider: str, model: str | None = None) -> None:
        engine = self.engine(provider)
        self.provider = provider
        self.model = model or engine.default_model()

    async def set_thread_model(self, thread_id: str, provider: str, model: str | None = None) -> None:
        """Switch an open thread's model; its next model call uses it (recorded in the thread)."""
        engine = self.engine(provider)
        state = self._state(thread_id)
        await self.emit(ThreadModelChanged(thread_id=state.thread.id, provider=provider, model=model or engine.default_model()))

    # ------------------------------------------------------------------ brokers

    def brokers_for(self, workspace: Path, extension_id: str, capabilities: frozenset[str] | None = None) -> Brokers:
        """Brokers scoped to a workspace and an extension's grants; ``capabilities`` replaces the
        grants for callers that are not extensions (the control plane's fs/* and command/exec)."""
        key = (str(workspace), extension_id)
        if key not in self._brokers:
            factory = self.options.broker_factory
            if factory is None:
                from roder_core.brokers.host import default_broker_factory

                factory = default_broker_factory
            granted = self.registry.granted_capabilities(extension_id) if capabilities is None else capabilities
            scope = BrokerScope(workspace, granted, extension_id, self)
            self._brokers[key] = factory(scope)
        return self._brokers[key]

    # ------------------------------------------------------------------ events

    def _redacted(self, event: RuntimeEvent) -> RuntimeEvent:
        """The event as it is stored and shown: known secret values removed from every string it
        carries (a streaming item's snapshot also leaves out an end that may begin a secret), and
        an item event holding its own copy of the item, never the object a turn keeps growing in
        place: transports serialize later, and must show the item as it was when emitted."""
        snapshot = isinstance(event, ItemStarted | ItemUpdated | ItemCompleted)
        if self.options.redactor is None and not snapshot:
            return event
        data = event.model_dump(mode="json", by_alias=True)
        changed = False
        if self.options.redactor is not None:
            if isinstance(event, ItemUpdated) and isinstance(self.redact, SecretRedactor):
                for name in ("text", "summary"):
                    if isinstance(data["item"].get(name), str):
                        data["item"][name] = self.redact.releasable(data["item"][name])
            data, changed = redact_data(data, self.redact)
        return parse_event(data) if snapshot or changed else event

    def _audit_event(self, event: RuntimeEvent) -> None:
        """Approvals and mode changes are policy decisions: they go to the audit log too."""
        if isinstance(event, ApprovalRequested):
            request = event.request
            self.audit.record(
                "approval.requested",
                {
                    "thread": event.thread_id,
                    "turn": event.turn_id,
                    "approval": request.approval_id,
                    "call": request.call_id,
                    "tool": request.tool,
                    "reason": request.reason,
                    "command": request.command,
                    "arguments": request.arguments,
                },
            )
        elif isinstance(event, ApprovalResolved):
            self.audit.record(
                "approval.resolved",
                {
                    "thread": event.thread_id,
                    "turn": event.turn_id,
                    "approval": event.approval_id,
                    "decision": event.decision.decision,
                    "rule": event.decision.rule,
                    "reason": event.decision.reason,
                },
            )
        elif isinstance(event, ModeChanged):
            self.audit.record("session.mode", {"thread": event.thread_id, "mode": event.mode, "reason": event.reason})

    @property
    def sandbox(self) -> SandboxStatus:
        """The command sandbox in effect (probed once per process), for status bars and notices."""
        from roder_core.brokers.sandbox import sandbox_status

        return sandbox_status(self.options.config.sandbox, cache_file=self.options.paths.cache_dir / "sandbox-probe.json")

    async def emit(self, event: RuntimeEvent) -> None:
        """Apply to live state, persist (unless a delta or an ephemeral thread), then fan out."""
        if self._live is not None:
            for rest in self._live.ending(event):  # what live streams held back, before their end
                self.bus.publish(rest)
        event = self._redacted(event)
        state = self._threads.get(event.thread_id)
        if state is not None:
            apply_event(state.thread, event)
            if event.persisted and not state.ephemeral and self.store is not None:
                try:
                    await self.store.append(state.thread.header(), event)
                except Exception as exc:  # a full disk must not lose the live turn silently
                    log.error("could not persist event %s: %s", event.method, exc)
                    self.bus.publish(_error_event(event.thread_id, f"could not save thread: {exc}", "persistence"))
        self.bus.publish(event)

    def publish_live(self, event: RuntimeEvent) -> None:
        """Deltas: no persistence, no await; straight to subscribers (text redacted as a stream)."""
        if self._live is not None and isinstance(event, AgentMessageDelta | ToolOutputDelta):
            shown = self._live.feed(event)
            if shown is not None:
                self.bus.publish(shown)
            return
        self.bus.publish(self._redacted(event))

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
        """Load a stored thread into the runtime (same reducer as live), ready for new turns.

        ``thread_id`` may be an unambiguous prefix of the id. This process becomes the thread's
        only writer (the store refuses when another process has it open); to look at a thread
        without continuing it, read it from the store instead."""
        if thread_id in self._threads:
            return self._threads[thread_id].thread
        if self.store is None:
            raise ThreadNotFoundError(f"no thread store is installed; cannot resume {thread_id!r}")
        try:
            thread = await self.store.load(thread_id)
        except ThreadNotFoundError:
            thread_id = await self.find_thread(thread_id)
            if thread_id in self._threads:
                return self._threads[thread_id].thread
            thread = await self.store.load(thread_id)
        await self.store.claim(thread.id)
        self._threads[thread.id] = ThreadState(thread=thread)
        return thread

    async def find_thread(self, id_or_prefix: str) -> str:
        """The full id of an open or stored thread given its id or an unambiguous prefix."""
        from roder_core.threads.sessions import resolve_thread_id

        known = set(self._threads)
        if id_or_prefix not in known and self.store is not None:
            known.update(row.id for row in await self.store.list_threads())
        return resolve_thread_id(id_or_prefix, known)

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

    def _transcript_path(self, thread_id: str) -> str | None:
        """The thread's file when the store keeps one (the JSONL store does); None for ephemeral threads."""
        state = self._threads.get(thread_id)
        locate = getattr(self.store, "path", None)
        if state is None or state.ephemeral or not callable(locate):
            return None
        try:
            return str(locate(thread_id))
        except RoderError:
            return None

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None, agent: str | None = None
    ) -> None:
        """Give one thread (a subagent's, a team member's) its own tool set and policy mode, and
        the agent name its approvals carry."""
        if mode is not None and mode not in MODES:
            raise RoderError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        state = self._state(thread_id)
        state.allowed_tools = tools
        state.mode = mode
        state.agent = agent

    def tool_names(self) -> list[str]:
        """Every tool the registry offers now (a child thread's tools are chosen from these)."""
        return self.registry.tool_registry(on_error=lambda *_: None).names()

    def team_channel(self, thread_id: str) -> TeamChannel | None:
        """The team a thread belongs to (as member or lead), as its tools see it."""
        return self.teams.channel(thread_id)

    def set_tool_extra(self, thread_id: str, key: str, value: Any) -> None:
        """Offer a front-end service to the tools of one thread (under ``ctx.extra[key]``)."""
        self._state(thread_id).tool_extra[key] = value

    def thread_mode(self, thread_id: str) -> str:
        state = self._threads.get(thread_id)
        return (state.mode if state is not None else None) or self.mode

    async def close_thread(self, thread_id: str) -> None:
        state = self._threads.get(thread_id)
        if state is None:
            return
        if state.task is not None and not state.task.done():
            if state.runner is not None and state.runner.turn.status is not TurnStatus.IN_PROGRESS:
                await asyncio.shield(state.task)  # the turn is over; let it finish saving
            else:
                await self.interrupt(thread_id)
        await self._run_observer_hook(HookPoint.SESSION_END, {"thread_id": thread_id})
        self._threads.pop(thread_id, None)
        if self.store is not None and not state.ephemeral:
            await self.store.release(thread_id)

    # ------------------------------------------------------------------ sessions: fork, tree, compact, state

    async def _stored(self, thread_id: str) -> Thread:
        if self.store is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} is open and no thread store is installed")
        return await self.store.load(await self.find_thread(thread_id))

    async def fork_thread(
        self, thread_id: str, turn_id: str | None = None, *, title: str | None = None, before_item: str | None = None
    ) -> Thread:
        """Branch a thread into a new open thread whose header points at the parent: after
        ``turn_id`` (its last finished turn when None), or just before the user message
        ``before_item`` (to edit and resend it). The parent and its file are never modified."""
        from roder_core.threads.sessions import fork_header, fork_in_memory

        state = self._threads.get(thread_id)
        parent = state.thread if state is not None else await self._stored(thread_id)
        header = fork_header(parent, turn_id, title, before_item)
        ephemeral = self.store is None or (state is not None and state.ephemeral)
        if ephemeral:
            thread = fork_in_memory(parent, header, before_item)
        else:
            checkpoints = self.registry.checkpoint_store
            if checkpoints is None:
                raise RoderError("the installed thread store cannot fork threads (no CheckpointStore)")
            assert header.parent is not None
            thread = await checkpoints.fork(parent.id, header.parent.turn_id, header, before_item=before_item)
        self._threads[thread.id] = ThreadState(thread=thread, ephemeral=ephemeral)
        self.bus.publish(ThreadStarted(thread_id=thread.id, thread=thread.header()))
        await self._run_observer_hook(
            HookPoint.SESSION_START, {"thread_id": thread.id, "cwd": thread.cwd, "forked_from": parent.id}
        )
        return thread

    async def thread_tree(self, cwd: str | None = None) -> list[ThreadNode]:
        """Threads (of one workspace, or all) arranged by fork: what a sidebar shows."""
        from roder_core.threads.sessions import thread_tree

        return thread_tree(await self.list_threads(cwd))

    async def delete_thread(self, thread_id: str) -> None:
        """Delete a stored thread's file (closing it here first); its forks keep their own."""
        if self.store is None:
            raise ThreadNotFoundError("no thread store is installed")
        thread_id = await self.find_thread(thread_id)
        await self.close_thread(thread_id)
        await self.store.delete(thread_id)

    async def compact(self, thread_id: str, instructions: str | None = None) -> Turn:
        """``/compact [instructions]``: summarize the older part of the thread now. Runs as a turn
        of its own (interruptible like any turn) and returns it once done."""
        from roder_core.turn.compaction import manual_keep_tokens, plan_compaction
        from roder_core.turn.manual_compaction import CompactionRunner

        state = self._state(thread_id)
        if state.task is not None and not state.task.done():
            raise TurnBusyError(f"a turn is running on thread {thread_id}; compact after it ends")
        keep = manual_keep_tokens(state.thread.items(), self.options.config.context.keep_recent_tokens)
        if plan_compaction(state.thread.items(), keep) is None:
            raise RoderError("there is nothing to compact yet")
        await self._launch(state, CompactionRunner(self, state, instructions))
        return await self.wait_turn(thread_id)

    async def save_custom(self, thread_id: str, namespace: str, data: Any, version: int = 1) -> CustomItem:
        """Keep an extension's own JSON state in the thread (never sent to the model). The latest
        entry of a namespace wins; forks carry it; ``version`` lets a later release migrate it."""
        try:
            json.dumps(data)
        except (TypeError, ValueError) as exc:
            raise RoderError(f"custom state for {namespace!r} must be JSON data: {exc}") from exc
        entry = CustomItem(namespace=namespace, version=version, data=data)
        await self.emit(CustomEntrySaved(thread_id=self._state(thread_id).thread.id, entry=entry))
        return entry

    def custom_state(self, thread_id: str, namespace: str, *, version: int = 1, migrate: Migration | None = None) -> Any:
        """An extension's saved state (None if never saved), upgraded with ``migrate(old_version,
        data)`` when it was saved by an older version."""
        from roder_core.threads.sessions import read_custom

        return read_custom(self.thread(thread_id), namespace, version, migrate)

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
        from roder_core.turn.runner import TurnRunner

        state = self._state(thread_id)
        if state.task is not None and not state.task.done():
            if state.runner is None or state.runner.turn.status is TurnStatus.IN_PROGRESS:
                raise TurnBusyError(f"a turn is already running on thread {thread_id}; steer or interrupt it")
            # A client saw turn/completed and went on; the old turn is only finishing its saves.
            await asyncio.shield(state.task)
        runner = TurnRunner(
            self,
            state,
            UserMessageItem(text=text, attachments=attachments or []),
            task_ledger_required=task_ledger_required,
            deadline=deadline,
            provider=provider,
            model=model,
        )
        return await self._launch(state, runner)

    async def _launch(self, state: ThreadState, runner: TurnRunner) -> Turn:
        """Run a turn in the background once this process is the thread's only writer."""
        if self.store is not None and not state.ephemeral:
            await self.store.claim(state.thread.id)
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
        if active is None or (state.runner is not None and state.runner.turn.status is not TurnStatus.IN_PROGRESS):
            # A turn that already reported its end only finishes saving: a steer queued now would
            # be neither delivered nor handed back.
            raise RoderError("no turn is running on this thread; start a new turn instead")
        if expected_turn_id is not None and expected_turn_id != active:
            raise RoderError(f"turn {expected_turn_id} is not the running turn ({active})")
        item = UserMessageItem(text=text, steer=True)
        state.steers.append(item)
        return item

    def cancel_steer(self, thread_id: str, item_id: str) -> UserMessageItem | None:
        """Take a queued steer message back before the model sees it (to edit or drop it);
        None when it was already delivered or never queued."""
        state = self._state(thread_id)
        for index, item in enumerate(state.steers):
            if item.id == item_id:
                return state.steers.pop(index)
        return None

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

    # ------------------------------------------------------------------ user input

    async def ask_user(self, thread_id: str, turn_id: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
        """Ask the person at a client (``userInput/requested``) and wait for the answers that
        ``session/resolve_user_input`` brings. Headless runs refuse at once."""
        if not self.options.interactive:
            raise RoderError("nobody can answer questions in this headless run")
        event = UserInputRequested(thread_id=thread_id, turn_id=turn_id, request_id=new_id("input"), questions=questions)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._user_inputs[event.request_id] = (event, future)
        try:
            await self.emit(event)
            return await asyncio.wait_for(future, self.options.config.approval_timeout)
        finally:
            self._user_inputs.pop(event.request_id, None)

    def pending_user_inputs(self, thread_id: str | None = None) -> list[UserInputRequested]:
        return [e for e, _ in self._user_inputs.values() if thread_id is None or e.thread_id == thread_id]

    def resolve_user_input(self, request_id: str, answers: dict[str, Any]) -> bool:
        entry = self._user_inputs.get(request_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(answers)
        return True

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool:
        entry = self._approvals.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(decision)
        return True

    def persist_rule(self, rule: str, verdict: str = "allow") -> None:
        """'Always' answers write the exact rules shown to the user (one per line) into
        config.toml's ``[policy] allow`` (or ``deny``) and apply them at once."""
        writer = ConfigWriter(self.options.paths.config_file)
        for line in (r.strip() for r in rule.splitlines()):
            if not line:
                continue
            self.policy.add_rule(verdict, line)
            writer.append_unique(f"policy.{verdict}", line)
            self.audit.record("policy.rule_saved", {"list": verdict, "rule": line, "file": str(writer.path)})

    # ------------------------------------------------------------------ session

    async def set_mode(self, mode: Mode | str, reason: str = "") -> None:
        if mode not in MODES:
            raise RoderError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        mode = Mode(mode)
        self.policy.mode = mode
        for state in list(self._threads.values()):
            await self.emit(ModeChanged(thread_id=state.thread.id, mode=mode, reason=reason))
        if not self._threads:
            self.bus.publish(ModeChanged(thread_id="", mode=mode, reason=reason))

    async def set_status(self, state: ThreadState, status: ThreadStatus) -> None:
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
    from roder_core.threads.events import ErrorEvent

    return ErrorEvent(thread_id=thread_id, message=message, kind=kind)
