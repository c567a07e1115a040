"""The embedded runtime: the facade clients drive (TUI, one-shot mode, app server, ACP, batch).

The control plane calls this class; it owns lifecycle ordering and cancellation, and hands each
job to a part of its own: the open threads (``thread_table``), requests waiting for a person
(``pending``: approvals and questions), the event pipeline (``event_pipeline``: redact, reduce,
persist, publish), the engines and model profiles (``model_directory``), and turns run by
``turn.runner`` against the narrow ``TurnHost`` this class provides. Extensions only provide
the services it orchestrates.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from roder_core.errors import InferenceError, RoderError, ThreadNotFoundError, TurnBusyError
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
    UserMessageItem,
    new_id,
)
from roder_core.kernel.hook_payloads import HookPayload, SessionEndPayload, SessionStartPayload
from roder_core.kernel.services import HookPoint, InferenceEngine, PolicyVerdict, RunnerScope
from roder_core.kernel.tools import HostedHook, ToolCall, ToolHost
from roder_core.media.library import MediaLibrary, require_vision
from roder_core.policy.audit import AuditLog
from roder_core.policy.engine import PolicyEngine
from roder_core.policy.rules import RuleSet
from roder_core.runtime.event_audit import PolicyEventAudit
from roder_core.runtime.event_pipeline import EventPipeline
from roder_core.runtime.model_directory import ModelDirectory
from roder_core.runtime.options import BrokerFactory as BrokerFactory  # re-exported: embedders name it here
from roder_core.runtime.options import BrokerScope, RuntimeOptions
from roder_core.runtime.pending import PendingRequests
from roder_core.runtime.thread_table import ThreadTable
from roder_core.settings.config import MODES, ConfigWriter
from roder_core.threads.events import (
    CustomEntrySaved,
    ErrorEvent,
    EventBus,
    MediaAdded,
    ModeChanged,
    RuntimeEvent,
    ThreadModelChanged,
    ThreadStarted,
    ThreadStatusChanged,
    UserInputRequested,
)
from roder_core.threads.state import ThreadState
from roder_core.turn.context import ContextAssembler
from roder_core.turn.hooks import HookRunner
from roder_core.turn.host import Approver
from roder_core.turn.mutation import MutationQueue
from roder_core.turn.planner import BudgetPlanner
from roder_core.turn.runner import TurnRunner
from roder_core.turn.service_set import Closing, ServiceSet
from roder_core.turn.tool_host import TurnToolHost

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.brokers.command_conditions import CommandConditions
    from roder_core.brokers.netns import ThreadNetworks
    from roder_core.brokers.sandbox import SandboxStatus
    from roder_core.customization.subagents import TraceRecord
    from roder_core.kernel.extension import RoderExtension
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.kernel.teams import TeamChannel
    from roder_core.plugins.enabled import ActivePlugins
    from roder_core.policy.plan_review_book import PlanReviewBook
    from roder_core.runtime.tasks import BackgroundTasks
    from roder_core.teams.manager import TeamManager
    from roder_core.threads.sessions import Migration, ThreadNode

log = logging.getLogger(__name__)


def _check_mode(mode: str | None) -> None:
    if mode is not None and mode not in MODES:
        raise RoderError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")


class Runtime:
    def __init__(self, registry: ExtensionRegistry, options: RuntimeOptions) -> None:
        _check_mode(options.mode)
        self.registry = registry
        self.options = options
        from roder_core.providers.limits import LearnedLimits

        self.models = ModelDirectory(registry, options.config, LearnedLimits(options.paths.data_dir / "model-limits.json"))
        self.threads = ThreadTable(registry.thread_store)
        self.bus = EventBus()
        self.events = EventPipeline(self.threads, self.bus, options.redactor)
        self.redact: Callable[[str], str] = self.events.redact
        self.audit = AuditLog(options.paths.audit_file, self.redact)
        rules = options.config.policy
        self.policy = PolicyEngine(
            options.mode,
            registry.policy_contributors,
            RuleSet(rules.allow, rules.ask, rules.deny),
            audit=self.audit.record,
            extra_roots=options.config.fs.extra_roots,
        )
        self.hooks = self._hook_runner(registry)
        self.mutations = MutationQueue()
        #: Images and other binary attachments of every thread (``roder_core.media``).
        self.media = MediaLibrary(options.paths.media_dir)
        self.context = ContextAssembler(
            registry.context_providers,
            registry.context_planner or BudgetPlanner(options.config.context.reserve_tokens),
            media=self.media.data_base64,
        )
        self.store = registry.thread_store
        #: Approvals waiting for a person (``session/resolve_approval``).
        self.approvals: PendingRequests[ApprovalRequest, ApprovalDecision] = PendingRequests()
        #: Questions waiting for a person (``session/resolve_user_input``).
        self.questions: PendingRequests[UserInputRequested, dict[str, Any]] = PendingRequests()
        self._brokers: dict[tuple[str, str, str], Brokers] = {}
        from roder_core.runtime.runners import RunnerTable

        #: Where threads' tools execute (``runners/*``); ``local`` unless a thread selected another.
        self.runners = RunnerTable(registry, options)
        #: Built on first use (``tasks``, ``thread_brokers``): most runs never need them.
        self._tasks: BackgroundTasks | None = None
        self._networks: ThreadNetworks | None = None
        #: Subagents running in this runtime, by trace id (``turn/subagentTrace/read`` while they run).
        self.subagent_traces: dict[str, TraceRecord] = {}
        self.provider = options.provider or self.models.default_provider()
        config = options.config
        # config.toml's model belongs to config.toml's provider, not to one picked by --provider.
        config_model = config.model if config.provider == self.provider else None
        self.model = options.model or config_model or self.engine(self.provider).default_model()
        #: Each event sink's way off the bus (a plugin's process extension may bring one and go).
        self._sinks = {id(sink): self.bus.add_listener(sink.on_event) for sink in registry.event_sinks}
        self.bus.add_listener(PolicyEventAudit(self.audit))
        self._plugins_lock = asyncio.Lock()
        #: What plugins brought that the last reload did not admit, one line each (said to the user).
        self.plugin_refusals: list[str] = []
        #: What a turn starting now runs with (``turn.service_set``); replaced when plugins change.
        self.services = ServiceSet(registry, self.hooks)

    # ------------------------------------------------------------------ providers and models

    @property
    def mode(self) -> Mode:
        return Mode(self.policy.mode)

    def engine(self, provider: str) -> InferenceEngine:
        return self.models.engine(provider)

    def model_profile(self, provider: str, model: str) -> ModelProfile:
        return self.models.model_profile(provider, model)

    def learn_context_limit(self, provider: str, model: str, error: InferenceError, prompt_tokens: int) -> bool:
        return self.models.learn_context_limit(provider, model, error, prompt_tokens)

    def select(self, provider: str, model: str | None = None) -> None:
        engine = self.engine(provider)
        self.provider = provider
        self.model = model or engine.default_model()

    async def set_thread_model(self, thread_id: str, provider: str, model: str | None = None) -> None:
        """Switch an open thread's model; its next model call uses it (recorded in the thread)."""
        engine = self.engine(provider)
        state = self.threads.get(thread_id)
        chosen = model or engine.default_model()
        try:
            window: int | None = self.model_profile(provider, chosen).context_window
        except RoderError:
            window = None  # an unlisted model: the client shows no window until a turn reports one
        await self.emit(ThreadModelChanged(thread_id=state.thread.id, provider=provider, model=chosen, context_window=window))

    # ------------------------------------------------------------------ brokers and tool hosts

    @property
    def read_rules(self) -> RuleSet:
        """The live ``[policy]`` rules the content gate consults (``brokers.content_gate``)."""
        return self.policy.rules

    def brokers_for(
        self,
        workspace: Path,
        extension_id: str,
        capabilities: frozenset[str] | None = None,
        *,
        thread_id: str | None = None,
        runner: str | None = None,
    ) -> Brokers:
        """Brokers scoped to a workspace and an extension's grants; ``capabilities`` replaces the
        grants for callers that are not extensions (the control plane's fs/* and command/exec).
        With ``thread_id``, the brokers of that thread's runner (opened by ``open_runner``);
        ``runner`` names one explicitly (its session for ``workspace`` must be open)."""
        if runner is None and thread_id is not None:
            runner = self.thread_runner(thread_id)
        key = (str(workspace), extension_id, runner or "")
        if key not in self._brokers:
            granted = self.registry.granted_capabilities(extension_id) if capabilities is None else capabilities
            scope = BrokerScope(workspace, granted, extension_id, self)
            factory = self.options.broker_factory
            if factory is None:
                from roder_core.brokers.host import default_broker_factory

                factory = default_broker_factory
            if runner is None:
                self._brokers[key] = factory(scope)
                return self._brokers[key]
            session = self.runners.session_for(runner, workspace)
            if session is None:
                raise RoderError(f"runner {runner!r} has no open session for {workspace}; start a turn or select it again")
            self._brokers[key] = session.brokers(self._runner_scope(scope, lambda: factory(scope)))
        return self._brokers[key]

    def thread_brokers(self, thread_id: str | None, workspace: Path, extension_id: str) -> Brokers:
        """``brokers_for``, bound to the thread: sandboxed commands in its loopback network,
        which a child thread shares with its root thread (``brokers.netns``), and shown that
        thread's own files of Roder's folders, nobody else's (``brokers.own_folders``)."""
        brokers = self.brokers_for(workspace, extension_id, thread_id=thread_id)
        if thread_id is None:
            return brokers
        from roder_core.brokers.netns import ThreadNetworks, bind_thread

        if thread_id not in self.threads:
            return bind_thread(brokers, thread_id, None)
        if self._networks is None:
            self._networks = ThreadNetworks()
        owner = thread_id
        while (parent := self.threads.get(owner).thread.parent) is not None and parent.thread_id in self.threads:
            owner = parent.thread_id
        return bind_thread(brokers, thread_id, self._networks.handle(owner))

    @property
    def tasks(self) -> BackgroundTasks:
        """Background tasks of every thread (``runtime.tasks``)."""
        if self._tasks is None:
            from roder_core.runtime.tasks import BackgroundTasks

            self._tasks = BackgroundTasks(self, self.options.cwd)
        return self._tasks

    def _runner_scope(self, scope: BrokerScope, local: Callable[[], Brokers]) -> RunnerScope:
        import os

        options = self.options
        return RunnerScope(
            workspace=scope.workspace,
            capabilities=scope.capabilities,
            extension_id=scope.extension_id,
            config=options.config,
            spill_dir=options.paths.spill_dir,
            env=dict(options.env) if options.env is not None else dict(os.environ),
            redactor=self.redact,
            audit=self.audit.record,
            local_brokers=local,
            read_rules=self.read_rules,
        )

    # ------------------------------------------------------------------ runners

    def thread_runner(self, thread_id: str) -> str | None:
        """The runner a thread selected (saved in the thread), else its parent's, up to the root
        thread (subagents, agent tasks and other child threads work where their parent works
        unless they were given a runner of their own); None for the default."""
        from roder_core.runtime.runners import RUNNER_NAMESPACE

        state = self.threads.find(thread_id)
        seen: set[str] = set()
        while state is not None and state.thread.id not in seen:
            seen.add(state.thread.id)
            saved = self.custom_state(state.thread.id, RUNNER_NAMESPACE)
            if isinstance(saved, dict) and saved.get("name"):
                return str(saved["name"])
            parent = state.thread.parent
            state = self.threads.find(parent.thread_id) if parent is not None else None
        return None

    async def open_runner(self, thread_id: str) -> None:
        """Open the thread's runner session if it is not live (a turn's tools need it)."""
        runner = self.thread_runner(thread_id)
        if runner is not None:
            await self.runners.open(runner, Path(self.thread(thread_id).cwd))

    async def set_thread_runner(self, thread_id: str, name: str, *, runner_workspace: str | None = None) -> None:
        """Run the thread's tools in runner ``name`` from its next tool call on (saved in the
        thread, so resuming keeps it). The session is opened now: a runner that cannot be
        reached is refused here, not in the middle of a turn."""
        from roder_core.runtime.runners import RUNNER_NAMESPACE

        state = self.threads.get(thread_id)
        if state.task is not None and not state.task.done():
            raise TurnBusyError(f"a turn is running on thread {thread_id}; select a runner after it ends")
        await self.runners.open(name, Path(state.thread.cwd), runner_workspace=runner_workspace)
        await self.save_custom(state.thread.id, RUNNER_NAMESPACE, {"name": name})
        self.forget_brokers(state.thread.cwd)

    async def _turn_snapshot(self, state: ThreadState, item_id: str) -> None:
        """Snapshot the workspace before the turn when the thread's runner asks for it
        (``snapshots = "turn"``), tied to the turn's user message for rewinds."""
        runner = self.thread_runner(state.thread.id)
        if runner is None or not self.runners.turn_snapshots(runner):
            return
        store = await self.runners.snapshots(runner, Path(state.thread.cwd))
        try:
            await store.create(thread_id=state.thread.id, item_id=item_id, label="turn")
        except RoderError as exc:  # a failed snapshot must not cost the turn; it is reported
            failed = f"the turn's workspace snapshot failed: {exc}"
            await self.emit(ErrorEvent(thread_id=state.thread.id, message=failed, kind="runner"))

    def forget_brokers(self, workspace: str, runner: str | None = None) -> None:
        """Drop cached broker sets of a workspace (of one runner, or all) so the next use builds them anew."""
        for key in [k for k in self._brokers if k[0] == workspace and (runner is None or k[2] == runner)]:
            del self._brokers[key]

    def tool_host(self, thread_id: str, turn_id: str, workspace: Path, provider: str, model: str, approve: Approver) -> ToolHost:
        return TurnToolHost(self, thread_id, turn_id, workspace, provider, model, approve)

    def hook_host(self, thread_id: str) -> ToolHost | None:
        """The ToolHost of ``thread_id``'s running turn, for prompt and agent hooks (their child
        threads hang under that turn); None when no turn runs. It asks no one: approvals are refused."""
        state = self.threads.find(thread_id)
        runner = state.runner if state is not None else None
        if state is None or runner is None:
            return None
        return TurnToolHost(self, thread_id, runner.turn.id, Path(state.thread.cwd), runner.provider, runner.model)

    @property
    def sandbox(self) -> SandboxStatus:
        """The command sandbox in effect (probed once per process), for status bars and notices."""
        from roder_core.brokers.sandbox import sandbox_status

        return sandbox_status(self.options.config.sandbox, cache_file=self.options.paths.cache_dir / "sandbox-probe.json")

    def command_conditions(self) -> CommandConditions:
        """What shell commands may do here (the environment block and the bash tool say it)."""
        from roder_core.brokers.command_conditions import CommandConditions

        status = self.sandbox
        return CommandConditions.of("blocked" if status.blocked else status.effective, self.options.config.network.commands)

    # ------------------------------------------------------------------ events

    async def emit(self, event: RuntimeEvent) -> None:
        await self.events.emit(event)

    def publish_live(self, event: RuntimeEvent) -> None:
        self.events.publish_live(event)

    async def set_status(self, state: ThreadState, status: ThreadStatus) -> None:
        if state.thread.status != status:
            await self.emit(ThreadStatusChanged(thread_id=state.thread.id, status=status))

    # ------------------------------------------------------------------ threads

    def thread(self, thread_id: str) -> Thread:
        return self.threads.get(thread_id).thread

    def open_threads(self) -> list[Thread]:
        return [s.thread for s in self.threads.states()]

    def active_turn_id(self, thread_id: str) -> str | None:
        """The id of the turn running on an open thread, if any (session/get, ACP cancel)."""
        state = self.threads.find(thread_id)
        return state.active_turn_id if state is not None else None

    def turn_started_at(self, thread_id: str) -> float | None:
        """When the turn running on an open thread began (wall clock), if one runs."""
        state = self.threads.find(thread_id)
        if state is None or state.active_turn_id is None or state.runner is None:
            return None
        return state.runner.turn.started_at

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
        self.threads.open(thread, ephemeral=ephemeral)
        await self.emit(ThreadStarted(thread_id=thread.id, thread=header))
        await self._observe(HookPoint.SESSION_START, SessionStartPayload(thread_id=thread.id, cwd=thread.cwd))
        return thread

    async def resume_thread(self, thread_id: str) -> Thread:
        """Load a stored thread into the runtime (same reducer as live), ready for new turns.

        ``thread_id`` may be an unambiguous prefix of the id. This process becomes the thread's
        only writer (the store refuses when another process has it open); to look at a thread
        without continuing it, read it from the store instead."""
        if (state := self.threads.find(thread_id)) is not None:
            return state.thread
        if self.store is None:
            raise ThreadNotFoundError(f"no thread store is installed; cannot resume {thread_id!r}")
        try:
            thread, older = await self.threads.load_stored(thread_id)
        except ThreadNotFoundError:
            thread_id = await self.find_thread(thread_id)
            if (state := self.threads.find(thread_id)) is not None:
                return state.thread
            thread, older = await self.threads.load_stored(thread_id)
        await self.store.claim(thread.id)
        self.threads.open(thread, older=older)
        return thread

    async def full_thread(self, thread_id: str) -> Thread:
        """An open thread with its whole history: a thread resumed from its recent turns reads
        its older ones now (once). Whatever shows, exports or branches off the whole thread
        uses this; ``thread`` gives the loaded turns only."""
        return await self.threads.get(thread_id).complete_history()

    async def last_turns(self, thread_id: str, count: int) -> tuple[list[Turn], int]:
        """At most the last ``count`` turns of an open thread, and how many came before them.
        A thread resumed from its recent turns gives only those it holds (its older turns are
        read when none is held): what a client shows first, before paging back."""
        state = self.threads.get(thread_id)
        if not state.thread.turns:
            await state.complete_history()
        turns = state.thread.turns[-count:]
        return turns, state.turn_count - len(turns)

    async def find_thread(self, id_or_prefix: str) -> str:
        """The full id of an open or stored thread given its id or an unambiguous prefix."""
        return await self.threads.resolve_id(id_or_prefix)

    async def list_threads(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]:
        return await self.threads.summaries(cwd, limit)

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None, agent: str | None = None
    ) -> None:
        """Give one thread (a subagent's, a team member's) its own tool set and policy mode, and
        the agent name its approvals carry."""
        _check_mode(mode)
        state = self.threads.get(thread_id)
        state.allowed_tools = tools
        state.mode = mode
        state.agent = agent

    def tool_names(self) -> list[str]:
        """Every tool the registry offers now (a child thread's tools are chosen from these)."""
        return self.registry.tool_registry(on_error=lambda *_: None).names()

    @functools.cached_property
    def plan_reviews(self) -> PlanReviewBook:
        """Plans ``exit_plan`` proposed, as documents under review (``plan/review/*``), set up at
        first use: a run that reviews no plan (a one-shot) does not import them. The book
        listens to the bus from then on; before, it held no review that an event could end."""
        from roder_core.policy.plan_review_book import PlanReviewBook

        return PlanReviewBook(self, self.bus.add_listener)

    @functools.cached_property
    def teams(self) -> TeamManager:
        """Agent teams led by threads of this runtime (``team/*``), set up at first use: a run that forms no team (a
        one-shot) does not import them."""
        from roder_core.teams.files import TeamFiles
        from roder_core.teams.manager import TeamManager

        return TeamManager(self, TeamFiles(self.options.paths.data_dir / "teams"))

    def team_channel(self, thread_id: str) -> TeamChannel | None:
        """The team a thread belongs to (as member or lead), as its tools see it; none before
        any team was formed in this process."""
        if "teams" not in self.__dict__:
            return None
        return self.teams.channel(thread_id)

    def set_tool_extra(self, thread_id: str, key: str, value: Any) -> None:
        """Offer a front-end service to the tools of one thread (under ``ctx.extra[key]``)."""
        self.threads.get(thread_id).tool_extra[key] = value

    def thread_interactive(self, thread_id: str) -> bool:
        """Whether a person can be asked in this thread (not in headless runs or threads)."""
        if not self.options.interactive:
            return False
        state = self.threads.find(thread_id)
        while state is not None:  # a subagent of a headless thread asks nobody either
            if state.headless:
                return False
            parent = state.thread.parent
            state = self.threads.find(parent.thread_id) if parent is not None else None
        return True

    def thread_mode(self, thread_id: str) -> str:
        state = self.threads.find(thread_id)
        return (state.mode if state is not None else None) or self.mode

    async def close_thread(self, thread_id: str) -> None:
        state = self.threads.find(thread_id)
        if state is None:
            return
        if state.finishing:
            await asyncio.shield(state.task)  # type: ignore[arg-type]  # the turn is over; let it finish saving
        elif state.busy:
            await state.interrupt()
        await self._observe(HookPoint.SESSION_END, SessionEndPayload(thread_id=thread_id))
        if self._tasks is not None:
            await self._tasks.thread_closed(thread_id)
        if self._networks is not None:
            self._networks.release(thread_id)
        await self.threads.release(thread_id)
        if state.ephemeral or self.store is None:  # nothing will ever resume it
            self.media.remove_thread(thread_id)

    # ------------------------------------------------------------------ sessions: fork, tree, compact, state

    async def fork_thread(
        self, thread_id: str, turn_id: str | None = None, *, title: str | None = None, before_item: str | None = None
    ) -> Thread:
        """Branch a thread into a new open thread whose header points at the parent: after
        ``turn_id`` (its last finished turn when None), or just before the user message
        ``before_item`` (to edit and resend it). The parent and its file are never modified."""
        from roder_core.threads.sessions import fork_header, fork_in_memory

        state = self.threads.find(thread_id)
        parent = await state.complete_history() if state is not None else await self._stored(thread_id)
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
        self.media.copy_thread(parent.id, thread.id)
        self.threads.open(thread, ephemeral=ephemeral)
        self.bus.publish(ThreadStarted(thread_id=thread.id, thread=thread.header()))
        await self._observe(
            HookPoint.SESSION_START, SessionStartPayload(thread_id=thread.id, cwd=thread.cwd, forked_from=parent.id)
        )
        return thread

    async def _stored(self, thread_id: str) -> Thread:
        if self.store is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} is open and no thread store is installed")
        return await self.store.load(await self.find_thread(thread_id))

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
        self.media.remove_thread(thread_id)

    async def compact(self, thread_id: str, instructions: str | None = None) -> Turn:
        """``/compact [instructions]``: summarize the older part of the thread now. Runs as a turn
        of its own (interruptible like any turn) and returns it once done."""
        from roder_core.turn.compaction import manual_keep_tokens, plan_compaction
        from roder_core.turn.manual_compaction import CompactionRunner

        state = self.threads.get(thread_id)
        if state.busy:
            raise TurnBusyError(f"a turn is running on thread {thread_id}; compact after it ends")
        await state.complete_history()  # the summary covers every turn since the last compaction
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
        await self.emit(CustomEntrySaved(thread_id=self.threads.get(thread_id).thread.id, entry=entry))
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
        scripted: Sequence[ToolCall] | None = None,
        sender: str = "",
    ) -> Turn:
        """Start a turn in the background and return it as soon as it has started.

        ``provider``/``model`` override the thread's model for this turn only (slash commands
        with a ``model`` frontmatter). ``scripted`` calls replace the model: the turn runs them
        one by one through policy and the brokers, like a model's calls (a workflow's commands,
        ``turn.scripted``). ``sender`` names who sent ``text`` when the user did not type it."""
        state = self.threads.get(thread_id)
        if state.busy:
            if not state.finishing:
                raise TurnBusyError(f"a turn is already running on thread {thread_id}; steer or interrupt it")
            # A client saw turn/completed and went on; the old turn is only finishing its saves.
            await asyncio.shield(state.task)  # type: ignore[arg-type]
        thread = state.thread
        pending = [m.attachment() for m in self.media.list_media(thread.id) if m.pending]
        given = [*(attachments or []), *pending]
        given = list({a.media_id or id(a): a for a in given}.values())  # pending and explicit: once
        given = await self.user_attachments(thread.id, given, provider=provider, model=model)
        self.media.take_pending(thread.id)
        await self.open_runner(thread_id)
        message = UserMessageItem(text=text, attachments=given, sender=sender)
        await self._turn_snapshot(state, message.id)
        if scripted is not None:
            from roder_core.turn.scripted import ScriptedTurnRunner

            return await self._launch(state, ScriptedTurnRunner(self, state, message, scripted))
        runner = TurnRunner(
            self,
            state,
            message,
            task_ledger_required=task_ledger_required,
            deadline=deadline,
            provider=provider,
            model=model,
        )
        return await self._launch(state, runner)

    async def store_media(
        self, thread_id: str, attachments: list[Attachment], *, source: str, turn_id: str | None = None
    ) -> list[Attachment]:
        """Move inline bytes of ``attachments`` into the thread's media store (off the event loop)
        and return the references; each newly stored item is announced as media/artifactAdded."""
        if all(a.data_base64 is None for a in attachments):
            return attachments
        stored, added = await asyncio.to_thread(self.media.store_attachments, thread_id, attachments, source=source)
        for record in added:
            self.bus.publish(MediaAdded(thread_id=thread_id, turn_id=turn_id, media=record))
        return stored

    async def _launch(self, state: ThreadState, runner: TurnRunner) -> Turn:
        """Run a turn in the background once this process is the thread's only writer."""
        await self.threads.claim(state)
        state.runner = runner
        started = asyncio.get_running_loop().create_future()
        state.task = asyncio.create_task(runner.run(started), name=f"turn {runner.turn.id}")
        await asyncio.wait({started, state.task}, return_when=asyncio.FIRST_COMPLETED)
        return runner.turn

    async def wait_turn(self, thread_id: str) -> Turn:
        state = self.threads.get(thread_id)
        if state.task is None:
            raise RoderError(f"thread {thread_id} has no turn")
        return await asyncio.shield(state.task)

    async def run_turn(self, thread_id: str, text: str, attachments: list[Attachment] | None = None, **kw: Any) -> Turn:
        await self.start_turn(thread_id, text, attachments, **kw)
        return await self.wait_turn(thread_id)

    async def user_attachments(
        self, thread_id: str, attachments: list[Attachment], *, provider: str | None = None, model: str | None = None
    ) -> list[Attachment]:
        """What a user attached to a prompt or a queued message, ready for the thread: refused
        (``MediaError``) when the model cannot see a picture among them, pictures moved into the
        thread's media store. Turns and steers both take their attachments through here."""
        thread = self.thread(thread_id)
        require_vision(self.model_profile(provider or thread.provider, model or thread.model), attachments)
        return await self.store_media(thread_id, attachments, source="user")

    def steer(
        self,
        thread_id: str,
        text: str,
        expected_turn_id: str | None = None,
        *,
        sender: str = "",
        attachments: list[Attachment] | None = None,
    ) -> UserMessageItem:
        """Queue a message for the running turn; it is delivered at the next model call.
        ``attachments`` come from ``user_attachments``."""
        return self.threads.get(thread_id).steer(text, expected_turn_id, sender=sender, attachments=attachments)

    def queued_steers(self, thread_id: str) -> list[UserMessageItem]:
        """Messages queued for the running turn that the model has not seen yet."""
        return list(self.threads.get(thread_id).steers)

    def set_headless(self, thread_id: str, headless: bool) -> None:
        """Run one thread as a headless run would (``roder -p`` through a host): calls that need
        approval are denied with the remedy, questions are refused, nobody is asked."""
        self.threads.get(thread_id).headless = headless

    def cancel_steer(self, thread_id: str, item_id: str) -> UserMessageItem | None:
        """Take a queued steer message back before the model sees it; None when already delivered."""
        return self.threads.get(thread_id).cancel_steer(item_id)

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool:
        """Cancel the running turn (stream and tools); it ends with status ``interrupted``."""
        return await self.threads.get(thread_id).interrupt(turn_id)

    # ------------------------------------------------------------------ approvals and questions

    def pending_approvals(self, thread_id: str | None = None) -> list[ApprovalRequest]:
        return self.approvals.pending(thread_id)

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool:
        return self.approvals.resolve(approval_id, decision)

    async def ask_user(self, thread_id: str, turn_id: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
        """Ask the person at a client (``userInput/requested``) and wait for the answers that
        ``session/resolve_user_input`` brings. Headless runs refuse at once."""
        if not self.thread_interactive(thread_id):
            raise RoderError("nobody can answer questions in this headless run")
        event = UserInputRequested(thread_id=thread_id, turn_id=turn_id, request_id=new_id("input"), questions=questions)
        return await self.questions.ask(
            event.request_id, thread_id, event, lambda: self.emit(event), self.options.config.approval_timeout
        )

    def pending_user_inputs(self, thread_id: str | None = None) -> list[UserInputRequested]:
        return self.questions.pending(thread_id)

    def resolve_user_input(self, request_id: str, answers: dict[str, Any]) -> bool:
        return self.questions.resolve(request_id, answers)

    def persist_rule(self, rule: str, verdict: PolicyVerdict = PolicyVerdict.ALLOW) -> str | None:
        """'Always' answers write the exact rules shown to the user (one per line) into
        config.toml's ``[policy] allow`` (or ``deny``) and apply them at once.

        The rules apply for this process whatever happens to the file. When the file cannot be
        written (a read-only or broken config.toml), the answer still counts: the one-line reason
        the rule was not saved is returned for the caller to tell the user, never raised into
        the turn (where it failed the whole call)."""
        writer = ConfigWriter(self.options.paths.config_file)
        lines = [line for line in (r.strip() for r in rule.splitlines()) if line]
        for line in lines:
            self.policy.add_rule(verdict, line)
        try:
            for line in lines:
                writer.append_unique(f"policy.{verdict}", line)
                self.audit.record("policy.rule_saved", {"list": verdict, "rule": line, "file": str(writer.path)})
        except (OSError, ValueError) as exc:  # tomlkit's parse errors are ValueErrors
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.audit.record("policy.rule_not_saved", {"list": verdict, "rule": rule, "error": reason})
            return f"the rule {', '.join(lines)} applies to this session but was not saved to {writer.path}: {reason}"
        return None

    # ------------------------------------------------------------------ session

    async def set_mode(self, mode: Mode | str, reason: str = "") -> None:
        _check_mode(mode)
        mode = Mode(mode)
        self.policy.mode = mode
        for state in self.threads.states():
            await self.emit(ModeChanged(thread_id=state.thread.id, mode=mode, reason=reason))
        if not self.threads:
            self.bus.publish(ModeChanged(thread_id="", mode=mode, reason=reason))

    async def plugins_changed(self) -> list[str]:
        """Hand the enabled plugins, read again, to every service that reads them (the
        ``PluginAware`` ones: skills, MCP servers, language servers, ...) and make the extensions
        plugins contribute again (the ``PluginExtensionSource`` ones: hooks, monitors, process
        extensions) after a plugin was installed, enabled, disabled, configured or removed, here
        or by another process: the running session uses the change from its next turn. Commands
        and agents are read per use and need nothing. Returns one line per problem."""
        from roder_core.plugins.enabled import PluginAware, active_plugins

        options = self.options
        problems: list[str] = []
        # One reload at a time: two changes at once must not apply an older read after a newer one.
        async with self._plugins_lock:
            extra = options.config.model_extra
            active = await asyncio.to_thread(active_plugins, options.paths, options.cwd, options.trusted, extra)
            problems += await self._reload_plugin_extensions(active)
            for service in self.registry.unique_implementations():
                if not isinstance(service, PluginAware):
                    continue
                try:
                    problems.extend(await service.reload_plugins(active))
                except Exception as exc:  # one failing service must not keep the others on the old set
                    problems.append(f"{type(service).__name__}: {exc}")
        return problems

    def live_plugin_parts(self) -> frozenset[str]:
        """Which parts of a plugin (its layout's fields: ``hooks``, ``lsp_servers``, ...) this
        runtime applies without a restart: those a ``PluginAware`` service or a
        ``PluginExtensionSource`` here takes."""
        from roder_core.plugins.enabled import PluginAware
        from roder_core.plugins.sources import PluginExtensionSource

        found: set[str] = set()
        for item in [*self.registry.unique_implementations(), *self.registry.extensions().values()]:
            if isinstance(item, PluginAware | PluginExtensionSource):
                found |= item.plugin_parts
        return frozenset(found)

    def _hook_runner(self, registry: ExtensionRegistry) -> HookRunner:
        for hook in registry.hooks:
            if isinstance(hook, HostedHook):
                hook.bind_hosts(self.hook_host)
        return HookRunner(
            registry.hooks, self.options.config.hook_timeout, self.threads.transcript_path, redact=self.options.redactor
        )

    def _adopt(self, registry: ExtensionRegistry) -> ServiceSet:
        """Make ``registry`` the one every caller and every turn starting from now uses; returns
        the set it replaced (turns that started before keep using it)."""
        old = self.services
        self.registry = registry
        self.models.registry = registry
        self.policy.use_contributors(registry.policy_contributors)
        self.context.use_providers(registry.context_providers)
        self.hooks = self._hook_runner(registry)
        sinks = {id(sink): sink for sink in registry.event_sinks}
        for key in [key for key in self._sinks if key not in sinks]:
            self._sinks.pop(key)()
        for key, sink in sinks.items():
            if key not in self._sinks:
                self._sinks[key] = self.bus.add_listener(sink.on_event)
        self.services = ServiceSet(registry, self.hooks)
        return old

    async def _reload_plugin_extensions(self, active: ActivePlugins) -> list[str]:
        """Ask every ``PluginExtensionSource`` for the extensions the enabled plugins make now,
        admit the new ones as at start (``kernel.distribution.rebuild``: the profile's grants, the
        registry's rules) and retire the ones no longer made: closed when the last turn that
        started with them ends."""
        from roder_core.kernel.distribution import rebuild
        from roder_core.plugins.sources import PluginExtensionSource

        registry = self.registry
        self.plugin_refusals = []
        sources = [e for e in registry.extensions().values() if isinstance(e, PluginExtensionSource)]
        removed: set[str] = set()
        added: list[tuple[PluginExtensionSource, RoderExtension]] = []
        problems: list[str] = []
        for source in sources:
            before = {id(e): e.manifest().id for e in source.current}
            try:
                now = await asyncio.to_thread(source.plugin_extensions, active)
            except Exception as exc:  # one failing source must not keep the others on the old set
                problems.append(f"{source.manifest().id}: {exc}")
                continue
            removed |= {ident for key, ident in before.items() if key not in {id(e) for e in now}}
            added += [(source, e) for e in now if id(e) not in before]
        if not removed and not added:
            return problems
        updated, skipped = rebuild(registry, removed, [e for _, e in added])
        problems += [s.describe() for s in skipped if not s.expected]
        for maker, extension in added:
            if updated.extensions().get(extension.manifest().id) is not extension:
                why = next((s.reason for s in skipped if s.source == extension.manifest().id), "not admitted")
                maker.refused(extension, why)
                self.plugin_refusals.append(f"{extension.manifest().name} not loaded: {why}")
        # By object: a plugin's changed extension comes back under the same id, as a new object.
        gone = {ident for ident in removed if registry.extensions().get(ident) is not updated.extensions().get(ident)}
        old = self._adopt(updated)
        await old.retire([cast(Closing, s) for s in registry.services_of(gone) if callable(getattr(s, "aclose", None))])
        return problems

    async def _observe(self, point: HookPoint, payload: HookPayload) -> None:
        if self.hooks.has(point):
            await self.hooks.run(point, payload)

    async def close(self) -> None:
        for thread_id in self.threads.ids():
            await self.close_thread(thread_id)
        await self.runners.close()
        if self._tasks is not None:
            await self._tasks.aclose()
        if self._networks is not None:
            self._networks.close()
        if self.store is not None and hasattr(self.store, "close"):
            await self.store.close()
        for service in self.registry.closeable_services():
            try:
                await service.aclose()
            except Exception as exc:  # one stuck service must not keep the others open
                log.warning("closing %s failed: %s", type(service).__name__, exc)
        self.audit.close()
