"""One turn: context -> model -> tool calls -> policy/approval -> brokered execution -> loop.

Stops when the model answers without tool calls (and no steer is waiting), at the iteration
limit, on interrupt, or on error. Whatever happens, the turn ends with a ``turn/completed`` event
carrying its status, and every item that completed is persisted before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.brokers import next_action
from roder_core.errors import InferenceError, RoderError
from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    ApprovalDecision,
    ApprovalItem,
    ApprovalOption,
    ApprovalRequest,
    Attachment,
    ErrorItem,
    Item,
    Mode,
    ModelProfile,
    ReasoningItem,
    ThreadStatus,
    ToolCallEvent,
    ToolCallItem,
    ToolResultItem,
    Turn,
    TurnError,
    TurnStatus,
    Usage,
    UserMessageItem,
    interrupted_item,
    now,
)
from roder_core.kernel.hook_payloads import (
    BeforeTurnPayload,
    RequestPayload,
    StopPayload,
    ToolCallPayload,
    ToolResultPayload,
    TurnEndPayload,
)
from roder_core.kernel.services import ContextQuery, HookPoint, InferenceTurnContext, PolicyDecision, PolicyVerdict
from roder_core.kernel.tool_args import ToolArgumentError
from roder_core.kernel.tools import (
    PolicySubject,
    ToolCall,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    argument_problem,
    with_ignored_note,
)
from roder_core.media.images import MediaError
from roder_core.policy.engine import subjects_of
from roder_core.threads.events import (
    AgentMessageDelta,
    ApprovalRequested,
    ApprovalResolved,
    ErrorEvent,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    ModelRetrying,
    ThreadTitleChanged,
    TokenUsageUpdated,
    ToolCallStarted,
    ToolOutputDelta,
    TurnCompleted,
    TurnStarted,
)
from roder_core.turn.compaction import Compactor
from roder_core.turn.context import recent_items, shows_all_visible
from roder_core.turn.hooks import HookBlocked
from roder_core.turn.stream_fold import DeltaKind, ModelOutput, SilentListener, StreamedItem, StreamFolder

if TYPE_CHECKING:
    from roder_core.settings.config import ContextConfig
    from roder_core.threads.state import ThreadState
    from roder_core.turn.hooks import HookRunner
    from roder_core.turn.host import TurnHost

log = logging.getLogger(__name__)


#: Given to the model once when a turn's deadline (the start of its finalization reserve) passes.
RESERVE_NOTICE = (
    "Time is almost up: the deadline's finalization reserve has begun. Start no new work; make sure "
    "your changes are saved in the workspace, then give your final answer now."
)
#: Modes a headless denial may point to, in order from strictest to loosest.
HEADLESS_MODES = ("ask", "auto-edit", "bypass")
LEDGER_NOTICE = " First record in the task ledger what is done and what is not."


class TurnInterrupted(Exception):
    """The user chose 'deny and interrupt' in an approval."""


class TurnFailed(RoderError):
    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class TurnRunner:
    def __init__(
        self,
        runtime: TurnHost,
        state: ThreadState,
        user_item: UserMessageItem,
        *,
        task_ledger_required: bool = False,
        deadline: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.state = state
        self.thread = state.thread
        self.user_item = user_item
        self.turn = Turn()
        self.task_ledger_required = task_ledger_required
        #: ``time.time()`` instant at which the finalization reserve begins (see services.InferenceTurnContext).
        self.deadline = deadline
        self._reserve_announced = False
        self.iterations = 0
        self._provider_override = provider
        self._model_override = model
        #: How many times a stop hook sent the model back to work in this turn.
        self.stop_continuations = 0
        self._approval_lock = asyncio.Lock()
        #: Seconds each call spent waiting for approval (left out of its duration).
        self._approval_wait: dict[str, float] = {}
        #: Calls run as another tool (``Tool.redirect``): call id -> that tool's name.
        self._ran_as: dict[str, str] = {}
        #: Streaming items: when each was last saved and how long its text was (see _checkpoint).
        self._checkpoints: dict[str, tuple[float, int]] = {}
        #: Estimated size of the last request sent (a refused one tells how large is too large).
        self._last_prompt_tokens = 0
        self.compactor = Compactor(self, self)
        #: The registry and hooks this turn runs with, from its start to its end (``turn.service_set``).
        self.services = runtime.services
        cfg = runtime.options
        self.max_iterations = cfg.max_iterations or cfg.config.max_iterations

    # ------------------------------------------------------------------ helpers

    @property
    def tid(self) -> str:
        return self.thread.id

    @property
    def provider(self) -> str:
        return self._provider_override or self.thread.provider

    @property
    def model(self) -> str:
        return self._model_override or self.thread.model

    @property
    def mode(self) -> str:
        """The policy mode for this thread (a subagent may run in its own mode)."""
        return self.state.mode or self.runtime.mode

    async def _item_started(self, item: Item) -> None:
        await self.runtime.emit(ItemStarted(thread_id=self.tid, turn_id=self.turn.id, item=item))

    async def _item_completed(self, item: Item) -> None:
        await self.runtime.emit(ItemCompleted(thread_id=self.tid, turn_id=self.turn.id, item=item))

    async def _item(self, item: Item) -> None:
        await self._item_started(item)
        await self._item_completed(item)

    # ------------------------------------------------------------------ for compaction (CompactionTurn, ModelCaller)

    @property
    def hooks(self) -> HookRunner:
        return self.services.hooks

    @property
    def context_settings(self) -> ContextConfig:
        return self.runtime.options.config.context

    def model_profile(self) -> ModelProfile:
        return self.runtime.model_profile(self.provider, self.model)

    async def record(self, item: Item) -> None:
        await self._item(item)

    async def complete_history(self) -> None:
        await self.state.complete_history()

    async def ask_model(self, request: AgentInferenceRequest, profile: ModelProfile, *, finish: bool = False) -> str:
        """One model call outside the loop (a compaction summary): its text, its usage accounted;
        ``finish``: sent as the loop's requests are (``finish_request``)."""
        if finish:
            request = await self.finish_request(request)
        engine = self.runtime.engine(self.provider)
        ctx = self._inference_context()
        folder = StreamFolder(SilentListener())
        async for event in engine.stream_turn(ctx, request):
            await folder.feed(event)
        await folder.close()
        await self._account(folder.output.usage, profile, request)
        return folder.output.text

    # ------------------------------------------------------------------ lifecycle

    async def run(self, started: asyncio.Future[None]) -> Turn:
        self.services = self.runtime.services.hold()
        try:
            return await self._run(started)
        finally:
            await self.services.release()

    async def _run(self, started: asyncio.Future[None]) -> Turn:
        runtime = self.runtime
        await runtime.emit(TurnStarted(thread_id=self.tid, turn_id=self.turn.id, started_at=self.turn.started_at))
        self.turn = self.thread.turns[-1]
        if not started.done():
            started.set_result(None)
        await runtime.set_status(self.state, ThreadStatus.ACTIVE)
        status: TurnStatus = TurnStatus.COMPLETED
        error: TurnError | None = None
        try:
            await self._body()
        except asyncio.CancelledError:
            status = TurnStatus.INTERRUPTED
        except TurnInterrupted:
            status = TurnStatus.INTERRUPTED
        except HookBlocked as exc:
            status, error = TurnStatus.FAILED, TurnError(message=str(exc), kind="hook_denied")
        except InferenceError as exc:
            status, error = TurnStatus.FAILED, TurnError(message=str(exc), kind=exc.kind)
        except TurnFailed as exc:
            status, error = TurnStatus.FAILED, TurnError(message=str(exc), kind=exc.kind)
        except Exception as exc:  # an unexpected bug still ends the turn cleanly
            log.exception("turn failed")
            status, error = TurnStatus.FAILED, TurnError(message=f"{type(exc).__name__}: {exc}", kind="internal")
        await asyncio.shield(self._finish(status, error))
        return self.turn

    async def _body(self) -> None:
        """The turn's work. A failure inside a task group (tool calls run in one) arrives as an
        ExceptionGroup: it is re-raised as its first leaf, so ``run`` classifies the real error
        (an interrupt, a provider error, a bug by its type and message) and the user never reads
        "unhandled errors in a TaskGroup"."""
        try:
            await self._accept_user_message()
            await self._loop()
        except BaseExceptionGroup as group:
            raise first_leaf(group) from group

    async def _finish(self, status: TurnStatus, error: TurnError | None) -> None:
        runtime = self.runtime
        for request in runtime.approvals.pending(self.tid):
            runtime.approvals.resolve(request.approval_id, ApprovalDecision(decision="deny", reason="turn ended"))
        if status != "completed":
            await self._settle_calls(status)
        if error is not None:
            await self._item(ErrorItem(message=error.message, kind=error.kind))
        if status is TurnStatus.INTERRUPTED:
            self.turn.stop_reason = "cancelled"
            await self._item(interrupted_item(self.turn.id))
        summary = self.turn.model_copy(update={"items": [], "status": status, "error": error, "completed_at": now()})
        unsent, self.state.steers[:] = list(self.state.steers), []
        await runtime.emit(TurnCompleted(thread_id=self.tid, turn=summary, unsent_steers=unsent))
        if self.hooks.has(HookPoint.TURN_END):
            try:
                ended = TurnEndPayload(thread_id=self.tid, turn_id=self.turn.id, status=status)
                await self.hooks.run(HookPoint.TURN_END, ended)
            except Exception as exc:
                log.warning("turn_end hook: %s", exc)
        if runtime.store is not None and not self.state.ephemeral:
            try:
                await runtime.store.sync(self.tid)
            except Exception as exc:
                log.error("could not sync thread %s: %s", self.tid, exc)
        await runtime.set_status(self.state, ThreadStatus.ERROR if status is TurnStatus.FAILED else ThreadStatus.IDLE)

    async def _settle_calls(self, status: str) -> None:
        """Give every call of this turn a terminal, persisted state, so no client shows it as
        running forever (live or after resume): an approval left unanswered becomes a denial, a
        call without a result gets one saying it was denied, interrupted or never run."""
        answered = {i.call_id for i in self.turn.items if isinstance(i, ToolResultItem)}
        denied: set[str] = set()
        #: Calls whose approval nobody answered (the user quit or interrupted with the dialog
        #: open): they were not denied by the user, and the model must not read that they were.
        unanswered: set[str] = set()
        for item in list(self.turn.items):
            if not isinstance(item, ApprovalItem):
                continue
            if item.decision is None:
                decision = ApprovalDecision(decision="deny", reason="the turn ended before an answer")
                await self.runtime.emit(
                    ApprovalResolved(
                        thread_id=self.tid, turn_id=self.turn.id, approval_id=item.request.approval_id, decision=decision
                    )
                )
                await self._item_completed(item.model_copy(update={"decision": decision}))
                unanswered.add(item.request.call_id)
            elif not item.decision.allowed:
                denied.add(item.request.call_id)
        for item in list(self.turn.items):
            if not isinstance(item, ToolCallItem) or item.call_id in answered:
                continue
            if item.call_id in unanswered:
                text, data = "not run: the turn ended before the user answered its approval", {"interrupted": True}
            elif item.call_id in denied:
                text, data = "denied by the user; the turn was interrupted", {"policy_denied": True, "interrupted": True}
            elif status == "interrupted":
                text, data = "interrupted before it finished", {"interrupted": True}
            else:
                text, data = "not run: the turn failed first", {"failed": True}
            await self._item(ToolResultItem(call_id=item.call_id, name=item.name, text=text, data=data, is_error=True))

    async def _accept_user_message(self) -> None:
        item = self.user_item
        if self.hooks.has(HookPoint.BEFORE_TURN):
            payload = await self.hooks.run(
                HookPoint.BEFORE_TURN,
                BeforeTurnPayload(
                    thread_id=self.tid,
                    turn_id=self.turn.id,
                    text=item.text,
                    cwd=self.thread.cwd,
                    mode=self.mode,
                    parent_thread_id=self.thread.parent.thread_id if self.thread.parent else None,
                ),
            )
            item = item.model_copy(update={"text": payload.text})
        commands = self.runtime.command_conditions()
        query = ContextQuery(
            thread_id=self.tid,
            cwd=Path(self.thread.cwd),
            prompt=item.text,
            model=self.runtime.model_profile(self.provider, self.model),
            mode=self.mode,
            approver=self.runtime.thread_interactive(self.tid),
            sandbox=commands.sandbox,
            network=commands.network,
        )
        item = item.model_copy(update={"context": await self.runtime.context.turn_context(query)})
        await self._item(item)
        if not self.thread.title:
            # Only what the user typed names a thread; a sent message (a team's briefing) says who sent it.
            title = item.sender or " ".join(item.text.split())[:80] or "untitled"
            await self.runtime.emit(ThreadTitleChanged(thread_id=self.tid, title=title))

    # ------------------------------------------------------------------ the loop

    async def _loop(self) -> None:
        runtime = self.runtime
        while True:
            self._announce_reserve()
            await self._deliver_steers()
            if self.iterations >= self.max_iterations:
                raise TurnFailed(
                    f"stopped after {self.iterations} model calls (max_iterations); raise it in config.toml or split the task",
                    "max_iterations",
                )
            self.iterations += 1
            self.turn.model_calls = self.iterations
            tools = self.services.registry.tool_registry(
                on_error=lambda source, exc: log.warning("tools from %s unavailable: %s", source, exc)
            )
            if self.state.allowed_tools is not None:
                tools = tools.restricted(self.state.allowed_tools)
            if runtime.team_channel(self.tid) is None:
                tools = tools.outside_teams()
            tools = tools.for_mode(self.mode)
            output = await self._call_fitting(tools)
            self.compactor.observe(output.usage)
            self.turn.stop_reason = output.stop_reason
            if not output.tool_calls:
                if self.state.steers or await self._stop_hook_continues():
                    continue
                return
            await self._run_tools(tools, output.tool_calls)

    async def _call_fitting(self, tools: ToolRegistry) -> ModelOutput:
        """The model call, answering a context overflow by learning the server's real window
        (stated in the error, else below the refused prompt), compacting to fit, and trying
        again: up to MAX_OVERFLOW_RETRIES times, each with a smaller window."""
        runtime = self.runtime
        for attempt in range(MAX_OVERFLOW_RETRIES + 1):
            try:
                return await self._call_model(tools)
            except InferenceError as exc:
                if exc.kind != "context_overflow" or attempt == MAX_OVERFLOW_RETRIES:
                    raise
                learned = runtime.learn_context_limit(self.provider, self.model, exc, self._last_prompt_tokens)
                profile = runtime.model_profile(self.provider, self.model)
                if not await self.compactor.after_overflow(profile, smaller_window=learned):
                    raise
        raise AssertionError("unreachable")

    def _announce_reserve(self) -> None:
        """Once the deadline passes, ask the model (once) to wrap up within the reserve (seed 004)."""
        if self.deadline is None or self._reserve_announced or time.time() < self.deadline:
            return
        self._reserve_announced = True
        text = RESERVE_NOTICE + (LEDGER_NOTICE if self.task_ledger_required else "")
        self.state.steers.append(UserMessageItem(text=text, steer=True))

    async def _stop_hook_continues(self) -> bool:
        """Stop hooks may send the model back to work once more (``continue_with`` carries the
        reason, given to the model as a message). Bounded, so a hook can never loop forever."""
        if not self.hooks.has(HookPoint.STOP) or self.stop_continuations >= MAX_STOP_CONTINUATIONS:
            return False
        last = next((i.text for i in reversed(self.turn.items) if isinstance(i, AgentMessageItem)), "")
        parent = self.thread.parent
        payload = await self.hooks.run(
            HookPoint.STOP,
            StopPayload(
                thread_id=self.tid,
                turn_id=self.turn.id,
                cwd=self.thread.cwd,
                mode=self.mode,
                stop_hook_active=self.stop_continuations > 0,
                last_message=last,
                # Subagent threads (restricted by the task tool) name their parent: SubagentStop.
                parent_thread_id=parent.thread_id if parent and self.state.allowed_tools is not None else None,
                task_ledger_required=self.task_ledger_required,
                deadline=self.deadline,
            ),
        )
        reason = (payload.continue_with or "").strip()
        if not reason:
            return False
        self.stop_continuations += 1
        self.state.steers.append(UserMessageItem(text=reason, steer=True))
        return True

    async def _deliver_steers(self) -> None:
        while self.state.steers:
            await self._item(self.state.steers.pop(0))

    async def _request(self, tools: ToolRegistry, profile: ModelProfile) -> Any:
        runtime = self.runtime
        query = ContextQuery(
            thread_id=self.tid,
            cwd=Path(self.thread.cwd),
            prompt=self.user_item.text,
            model=profile,
        )
        turn_start = self.turn.items[0].id if self.turn.items else None
        # While automatic compaction may run, it alone makes room near the window (rarely, and
        # deep); the planner's shortening is the fallback when it cannot.
        verbatim = self.compactor.can_compact()

        async def build(shorten: bool) -> AgentInferenceRequest:
            items = recent_items(self.thread.turns)
            return await runtime.context.build(query, items, tools.specs(), profile, turn_start, shorten=shorten)

        request = await build(not verbatim)
        # Resumed from its recent turns, and the model would see older ones too: when even the
        # recent ones are over budget, compaction reads the rest; otherwise read it now.
        partial = not (self.state.history_complete or shows_all_visible(recent_items(self.thread.turns)))
        if partial and not self.compactor.would_compact(request, profile):
            await self.state.complete_history()
            request = await build(not verbatim)
        loaded_all = self.state.history_complete
        if await self.compactor.maybe_compact(request, profile) or self.state.history_complete != loaded_all:
            request = await build(True)
        elif verbatim and self.compactor.over_budget(request, profile):
            request = await build(True)  # compaction found nothing to summarize, or failed
        self.compactor.sending(request)
        return await self.finish_request(request)

    async def finish_request(self, request: AgentInferenceRequest) -> AgentInferenceRequest:
        """The planned request as it is sent: configured defaults, then the request hooks. A
        compaction request that extends the conversation goes through the same steps, so its
        prefix is byte for byte the one the provider cached."""
        runtime = self.runtime
        if request.reasoning_effort is None and runtime.options.config.reasoning_effort:
            request.reasoning_effort = runtime.options.config.reasoning_effort  # providers/select, config.toml
        if request.logprobs is None:
            request.logprobs = runtime.options.config.logprobs  # config.toml or a batch task
        request.token_ids = request.token_ids or runtime.options.config.token_ids
        for point in (HookPoint.CONTEXT, HookPoint.BEFORE_PROVIDER_REQUEST):
            if self.hooks.has(point):
                payload = await self.hooks.run(
                    point,
                    RequestPayload(
                        thread_id=self.tid,
                        turn_id=self.turn.id,
                        request=request,
                        deadline=self.deadline,
                        mode=self.mode,
                        task_ledger_required=self.task_ledger_required,
                        turn_started_at=self.turn.started_at,
                    ),
                )
                request = payload.request
        return request

    def _inference_context(self) -> InferenceTurnContext:
        limits = self.runtime.options.config.limits
        return InferenceTurnContext(
            thread_id=self.tid,
            turn_id=self.turn.id,
            deadline=self.deadline,
            max_response_bytes=int(limits.response_mb * 1024 * 1024),
            max_response_seconds=limits.response_seconds,
        )

    async def _call_model(self, tools: ToolRegistry) -> ModelOutput:
        runtime = self.runtime
        provider, model = self.provider, self.model
        engine = runtime.engine(provider)
        profile = runtime.model_profile(provider, model)
        request = await self._request(tools, profile)
        from roder_core.turn.tokens import request_tokens

        self._last_prompt_tokens = request_tokens(request)
        ctx = self._inference_context()
        view = _TurnStreamView(self)
        folder = view.folder = StreamFolder(view)
        stream = engine.stream_turn(ctx, request)
        try:
            async for event in stream:
                await folder.feed(event)
        finally:
            # A partial answer (interrupt, dropped stream) is still kept as a completed item.
            await asyncio.shield(folder.close())
            close_stream = getattr(stream, "aclose", None)
            if close_stream is not None:  # close the HTTP stream now, not when garbage collected
                await asyncio.shield(close_stream())
        await self._account(folder.output.usage, profile, request, folder.output.logprobs, folder.output.token_ids)
        return folder.output

    def _announce_retry(self, retry: dict[str, Any]) -> None:
        """Tell every client that the engine is backing off before sending the call again."""
        self.runtime.publish_live(
            ModelRetrying(
                thread_id=self.tid,
                turn_id=self.turn.id,
                attempt=int(retry.get("attempt") or 0),
                max_attempts=int(retry.get("max_attempts") or 0),
                wait=float(retry.get("wait") or 0.0),
                reason=str(retry.get("reason") or ""),
                kind=str(retry.get("kind") or "server"),
            )
        )

    async def _checkpoint(self, item: AgentMessageItem | ReasoningItem, folder: StreamFolder) -> None:
        """Save a snapshot of a streaming item now and then, so a crash keeps most of its text:
        at most once a second, and only once the text has doubled or ten seconds have passed, so
        the snapshots of one item add up to about twice its final size."""
        now_ = time.monotonic()
        size = folder.open_size
        last_at, last_size = self._checkpoints.get(item.id, (now_, 0))
        if item.id not in self._checkpoints:
            self._checkpoints[item.id] = (now_, 0)
            return
        if now_ - last_at < CHECKPOINT_MIN_SECONDS or size <= last_size:
            return
        if size < 2 * last_size and now_ - last_at < CHECKPOINT_MAX_SECONDS:
            return
        self._checkpoints[item.id] = (now_, size)
        folder.settle()
        await self.runtime.emit(ItemUpdated(thread_id=self.tid, turn_id=self.turn.id, item=item))

    async def _account(
        self,
        usage: Usage,
        profile: ModelProfile,
        request: Any,
        logprobs: list[dict[str, Any]] | None = None,
        token_ids: dict[str, list[int]] | None = None,
    ) -> None:
        if usage.total_tokens == 0:  # the provider said nothing: estimate the prompt (tools included)
            from roder_core.turn.tokens import request_tokens

            usage = Usage(input_tokens=request_tokens(request), estimated=True)
        usage = usage.model_copy(update={"cost_usd": usage.cost_usd or profile.cost(usage)})
        self.turn.usage = self.turn.usage + usage
        await self.runtime.emit(
            TokenUsageUpdated(
                thread_id=self.tid,
                turn_id=self.turn.id,
                usage=usage,
                total=self.thread.usage + usage,
                context_tokens=usage.input_tokens + usage.output_tokens,
                context_window=profile.context_window,
                logprobs=logprobs or None,
                token_ids=token_ids or None,
            )
        )

    # ------------------------------------------------------------------ tools

    async def _run_tools(self, tools: ToolRegistry, calls: list[ToolCallEvent]) -> None:
        """Run the calls of one model response concurrently; 'deny and interrupt' in any of them
        cancels the others and interrupts the turn."""
        try:
            async with asyncio.TaskGroup() as group:
                for call in calls:
                    group.create_task(self._run_call(tools, call))
        except* TurnInterrupted:
            raise TurnInterrupted() from None

    async def _run_call(self, tools: ToolRegistry, event: ToolCallEvent) -> None:
        call = ToolCall(id=event.call_id, name=event.name, arguments=dict(event.arguments))
        started = time.monotonic()
        if event.truncated:
            result = ToolResult.error(call, f"{call.name} was not run: {event.arguments_error}")
        else:
            result = await self._execute(tools, call, event.arguments_error)
        # The call's own time: waiting for a person's approval is not part of it.
        took = time.monotonic() - started - self._approval_wait.pop(call.id, 0.0)
        text, attachments = result.text, result.attachments
        ran_as = self._ran_as.pop(call.id, None)
        if ran_as is not None:
            text = f"[this {call.name} call ran as the {ran_as} tool]\n{text}"
        text, attachments = await self._store_result_media(call, text, attachments)
        item = ToolResultItem(
            call_id=call.id,
            name=call.name,
            text=text,
            data=result.data,
            is_error=result.is_error,
            attachments=attachments,
            duration_ms=max(int(took * 1000), 0),
        )
        await self._item(item)

    async def _store_result_media(self, call: ToolCall, text: str, attachments: list[Attachment]) -> tuple[str, list[Attachment]]:
        """Screenshots, images and audio a tool returns become media items of the thread, one by
        one: an attachment the store refuses is dropped alone, with a line saying which and why."""
        kept: list[Attachment] = []
        source = f"tool:{call.name}"
        for attachment in attachments:
            try:
                kept.extend(await self.runtime.store_media(self.tid, [attachment], source=source, turn_id=self.turn.id))
            except MediaError as exc:
                text = f"{text}\n[an attachment of this result was dropped: {exc}]"
        return text, kept

    def _context(self, tools: ToolRegistry, call: ToolCall) -> ToolExecutionContext:
        runtime = self.runtime
        source = tools.source_of(call.name)
        extension_id = self.services.registry.extension_of(self.services.registry.service("ToolProvider", source)) or ""
        workspace = Path(self.thread.cwd)
        return ToolExecutionContext(
            thread_id=self.tid,
            turn_id=self.turn.id,
            call_id=call.id,
            workspace=workspace,
            mode=self.mode,
            brokers=_LazyBrokers(runtime, workspace, extension_id, self.tid),  # type: ignore[arg-type]
            deadline=self.deadline,
            model=runtime.model_profile(self.provider, self.model),
            capabilities=self.services.registry.granted_capabilities(extension_id),
            emit_output=lambda text: runtime.publish_live(
                ToolOutputDelta(thread_id=self.tid, turn_id=self.turn.id, call_id=call.id, delta=text)
            ),
            host=runtime.tool_host(self.tid, self.turn.id, workspace, self.provider, self.model, self.await_decision),
            extra=dict(self.state.tool_extra),
            files=self.state.files,
        )

    async def _execute(self, tools: ToolRegistry, call: ToolCall, arguments_error: str | None) -> ToolResult:
        runtime = self.runtime
        tool = tools.get(call.name)
        if tool is None:
            return ToolResult.error(call, tools.missing(call.name))
        if arguments_error:
            return ToolResult.error(call, f"invalid arguments JSON for {call.name}: {arguments_error}")
        if self.hooks.has(HookPoint.TOOL_CALL_BEFORE):
            try:
                payload = await self.hooks.run(
                    HookPoint.TOOL_CALL_BEFORE,
                    ToolCallPayload(
                        thread_id=self.tid,
                        turn_id=self.turn.id,
                        tool=call.name,
                        arguments=call.arguments,
                        call_id=call.id,
                        cwd=self.thread.cwd,
                        mode=self.mode,
                    ),
                )
            except HookBlocked as exc:
                return ToolResult.error(call, f"blocked: {exc}")
            call.arguments = dict(payload.arguments)
            hook_permission = payload.permission
        else:
            hook_permission = None
        redirected = _redirected(tools, tool, call)
        if redirected is not None:
            tool, call = redirected
            self._ran_as[call.id] = call.name
        # Arguments that do not fit the tool's model are the model's to fix: no policy check,
        # no approval prompt, an error result naming each wrong field.
        problem = argument_problem(tool, call)
        if problem is not None:
            return problem
        ctx = self._context(tools, call)
        try:
            decision = _with_hook_permission(await runtime.policy.evaluate(tool, call, ctx), hook_permission)
        except Exception as exc:  # a path that vanished mid-check fails this call, never the turn
            log.debug("policy check of %s raised", call.name, exc_info=True)
            return ToolResult(
                id=call.id,
                name=call.name,
                data={"policy_denied": True},
                is_error=True,
                text=f"denied by policy: the check itself failed ({type(exc).__name__}: {exc})",
            )
        if decision.verdict is PolicyVerdict.DENY:
            return ToolResult(
                id=call.id,
                name=call.name,
                text=f"denied by policy: {decision.reason}",
                data={"policy_denied": True},
                is_error=True,
            )
        if decision.verdict is PolicyVerdict.ASK:
            approved = await self._ask(tool, call, ctx, decision.reason)
            if approved is not None:
                return approved
        # a person approved this very call (or the mode bypasses asking): only then may its
        # commands change files that run code at the user's next action
        person = decision.verdict is PolicyVerdict.ASK or ctx.mode == Mode.BYPASS
        paths = _mutated_paths(tool, call, ctx)
        try:
            async with runtime.mutations.hold(paths):
                runtime.publish_live(ToolCallStarted(thread_id=self.tid, turn_id=self.turn.id, call_id=call.id, name=call.name))
                with next_action.writes_allowed(person):
                    result = with_ignored_note(tool, call, await tool.execute(ctx, call))
        except asyncio.CancelledError:
            raise
        except ToolArgumentError as exc:
            result = ToolResult.error(call, str(exc))
        except Exception as exc:
            log.debug("tool %s raised", call.name, exc_info=True)
            result = ToolResult.error(call, f"{call.name} failed: {type(exc).__name__}: {exc}")
        for view in result.views:
            await self._item(view)
        # redacted as it leaves the tool, before anything sees it: a hook (a command, an HTTP
        # endpoint, a log it keeps) gets what the transcript gets, never a secret a file held
        result.text = runtime.redact(result.text)
        if self.hooks.has(HookPoint.TOOL_RESULT_AFTER):
            after = await self.hooks.run(
                HookPoint.TOOL_RESULT_AFTER,
                ToolResultPayload(
                    thread_id=self.tid, tool=call.name, arguments=call.arguments, text=result.text, is_error=result.is_error
                ),
            )
            result.text = runtime.redact(after.text)
            result.is_error = after.is_error
        return result

    def _headless_remedy(self, tool: Any, call: ToolCall, ctx: ToolExecutionContext, subjects: list[PolicySubject]) -> str:
        """What would let this call run without a person: the first stricter-to-looser mode whose
        policy allows it (never the mode in use), else the exact [policy] allow rules, else the
        truth that this target always needs a person."""
        for mode in HEADLESS_MODES:
            if mode == ctx.mode:
                continue
            if self.runtime.policy.allows_in(mode, tool, call, ctx.workspace):
                if self.runtime.policy.has_floor(subjects, ctx.workspace):
                    return f"rerun with --mode {mode}"  # no rule lifts a floor
                return f"rerun with --mode {mode}, or add an allow rule to [policy]"
        policy = self.runtime.policy
        rules = [] if policy.has_floor(subjects, ctx.workspace) else policy.suggest_rules(subjects, ctx.workspace)
        if rules:
            shown = ", ".join(f'"{rule}"' for rule in rules)
            return f"add [policy] allow = [{shown}] to config.toml"
        return "this target (protected, or outside the workspace) always needs a person's approval; run interactively"

    async def _ask(self, tool: Any, call: ToolCall, ctx: ToolExecutionContext, reason: str) -> ToolResult | None:
        """Ask the user; returns an error result when denied, None when allowed. A call that
        cannot apply (its preview says so: an edit whose old_string is not in the file, a write
        to a file changed on disk since it was read) fails at once with the tool's own error:
        nobody is asked to approve what would fail anyway."""
        runtime = self.runtime
        subjects = subjects_of(tool, call, ctx.workspace)
        preview: dict[str, Any] = {}
        make_preview = getattr(tool, "preview", None)
        if make_preview is not None:
            try:
                preview = await make_preview(ctx, call)
            except ToolArgumentError as exc:
                return ToolResult.error(call, str(exc))
            except Exception as exc:
                preview = {"diff": f"(no preview: {exc})"}
        if not runtime.thread_interactive(self.tid):
            return ToolResult(
                id=call.id,
                name=call.name,
                is_error=True,
                data={"policy_denied": True},
                text=headless_denial(call.name, reason, self._headless_remedy(tool, call, ctx, subjects)),
            )
        # The exact rules "always" saves, one per line (a compound command may need several);
        # none for protected or outside-workspace targets, which always ask.
        rules = runtime.policy.suggest_rules(subjects, ctx.workspace)
        rule = "\n".join(rules)
        options = [
            ApprovalOption(id="allow_once", label="Allow once"),
            ApprovalOption(id="allow_session", label="Allow for this session"),
        ]
        if rules:
            options.append(ApprovalOption(id="allow_always", label=f"Always allow: {', '.join(rules)}", rule=rule))
        options += [
            ApprovalOption(id="deny", label="Deny"),
            ApprovalOption(id="deny_interrupt", label="Deny and interrupt"),
        ]
        request = ApprovalRequest(
            thread_id=self.tid,
            turn_id=self.turn.id,
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            reason=reason,
            command=preview.get("command"),
            cwd=preview.get("cwd"),
            diff=preview.get("diff"),
            options=options,
        )
        asked = time.monotonic()
        decision = await self.await_decision(request)
        self._approval_wait[call.id] = time.monotonic() - asked
        if decision.decision == "allow_session":
            runtime.policy.allow_for_session(subjects)
        elif decision.decision == "allow_always":
            runtime.policy.allow_for_session(subjects)
            if (decision.rule or rule) and (unsaved := runtime.persist_rule(decision.rule or rule)):
                await runtime.emit(ErrorEvent(thread_id=self.tid, turn_id=self.turn.id, message=unsaved, kind="config"))
        if decision.allowed:
            return None
        if decision.decision == "deny_interrupt":
            raise TurnInterrupted()
        why = f": {decision.reason}" if decision.reason else ""
        return ToolResult(
            id=call.id,
            name=call.name,
            is_error=True,
            data={"policy_denied": True},
            text=f"the user denied this {call.name} call{why}",
        )

    async def await_decision(self, request: ApprovalRequest) -> ApprovalDecision:
        """Show an approval request to the user and wait for the answer (one at a time per turn).

        Tools that need a person's decision (exit_plan's plan review) use this too, so every
        client renders and answers them like any approval."""
        runtime = self.runtime
        if self.state.agent and not request.agent:
            request = request.model_copy(update={"agent": self.state.agent})
        async with self._approval_lock:
            item = ApprovalItem(request=request)

            async def announce() -> None:
                await self._item_started(item)
                await runtime.emit(ApprovalRequested(thread_id=self.tid, turn_id=self.turn.id, request=request))
                await runtime.set_status(self.state, ThreadStatus.WAITING_APPROVAL)

            try:
                decision = await runtime.approvals.ask(
                    request.approval_id, self.tid, request, announce, runtime.options.config.approval_timeout
                )
            except TimeoutError:
                decision = ApprovalDecision(decision="deny", reason="approval timed out")
            await runtime.emit(
                ApprovalResolved(thread_id=self.tid, turn_id=self.turn.id, approval_id=request.approval_id, decision=decision)
            )
            await self._item_completed(item.model_copy(update={"decision": decision}))
            await runtime.set_status(self.state, ThreadStatus.ACTIVE)
        return decision


#: Snapshots of a streaming item are saved at most this often, and at least this often while
#: its text grows (see TurnRunner._checkpoint).
CHECKPOINT_MIN_SECONDS = 1.0
CHECKPOINT_MAX_SECONDS = 10.0
#: A context overflow is answered by compacting and trying again at most this many times a call.
MAX_OVERFLOW_RETRIES = 3
#: Stop hooks may send the model back to work at most this many times per turn.
MAX_STOP_CONTINUATIONS = 3


def _with_hook_permission(decision: PolicyDecision, permission: Any) -> PolicyDecision:
    """A pre-tool hook's ``permission`` ("ask" or "allow") adjusts the policy decision.

    "ask" makes an allowed call ask; "allow" lets a call through that would only have asked.
    Neither overrides a deny (rules, plan mode, contributors): deny always wins, and "allow"
    never lifts the policy floors (protected or outside-workspace targets, repeated calls)."""
    if permission == "ask" and decision.verdict is PolicyVerdict.ALLOW:
        return PolicyDecision(PolicyVerdict.ASK, "a hook asked for approval", "hook")
    if permission == "allow" and decision.verdict is PolicyVerdict.ASK and decision.source not in ("floor", "repeat"):
        return PolicyDecision(PolicyVerdict.ALLOW, "allowed by a hook", "hook")
    return decision


def headless_denial(tool: str, reason: str, remedy: str) -> str:
    """What the model is told when a call needs approval in a run nobody can approve: that it
    was not run, not to retry or route around it, and what to tell the user (the remedy is the
    user's to apply)."""
    return (
        f"denied: {tool} needs approval ({reason}) and nobody can approve in this headless run, so it was not "
        "run. Do not retry it or get around it with another tool: do what you can without it, and tell the "
        f"user what was left undone and how they can allow it ({remedy})."
    )


def _redirected(tools: ToolRegistry, tool: Any, call: ToolCall) -> tuple[Any, ToolCall] | None:
    """The tool and call to run instead when ``call`` is really another tool's (``Tool.redirect``)
    and that tool is offered to this thread; its result says it ran that way."""
    redirect = getattr(tool, "redirect", None)
    target = redirect(call.arguments) if redirect is not None else None
    if target is None or target.name not in tools:
        return None
    return tools.get(target.name), ToolCall(id=call.id, name=target.name, arguments=target.arguments)


def _mutated_paths(tool: Any, call: ToolCall, ctx: ToolExecutionContext) -> list[str]:
    describe = getattr(tool, "mutated_paths", None)
    if describe is None:
        return []
    try:
        return list(describe(call.arguments, ctx.workspace))
    except Exception:
        return []


class _TurnStreamView:
    """What a client sees of a model call: the folder's items as runtime events, deltas live,
    long streaming items checkpointed now and then."""

    def __init__(self, runner: TurnRunner) -> None:
        self.runner = runner
        self.folder: StreamFolder | None = None

    async def item_started(self, item: StreamedItem) -> None:
        await self.runner._item_started(item)

    async def item_delta(self, item: StreamedItem, delta: str, kind: DeltaKind) -> None:
        runner = self.runner
        runner.runtime.publish_live(
            AgentMessageDelta(
                thread_id=runner.tid,
                turn_id=runner.turn.id,
                item_id=item.id,
                delta=delta,
                kind=kind,
            )
        )
        if self.folder is not None:
            await runner._checkpoint(item, self.folder)

    async def item_completed(self, item: Item) -> None:
        await self.runner._item_completed(item)

    async def item_recorded(self, item: ToolCallItem) -> None:
        await self.runner._item(item)

    def retrying(self, retry: dict[str, Any]) -> None:
        self.runner._announce_retry(retry)


class _LazyBrokers:
    """Builds the broker set on first use, so tools that need none cost nothing."""

    def __init__(self, runtime: TurnHost, workspace: Any, extension_id: str, thread_id: str) -> None:
        self._args = (runtime, workspace, extension_id, thread_id)
        self._brokers: Any = None

    def _get(self) -> Any:
        if self._brokers is None:
            runtime, workspace, extension_id, thread_id = self._args
            self._brokers = runtime.thread_brokers(thread_id, workspace, extension_id)
        return self._brokers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a task group's failure stands for: its first leaf, nested groups opened."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf
