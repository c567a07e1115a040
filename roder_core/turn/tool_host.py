"""The ``ToolHost`` a tool call receives: the runtime's services, scoped to one call.

Built by the runtime for each call of a turn (``TurnHost.tool_host``, with the turn's approval
queue) and by the control plane's ``tools/call``, so a tool can emit an item, ask for an
approval or the user's input, run a child thread and read or set the mode, and never needs
``Runtime`` itself: it sees the runtime as the narrow ``ThreadHost`` below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.ir import PLAN_TOOL, ApprovalDecision, ApprovalOption, ApprovalRequest, Item, ParentRef, Thread, Turn
from roder_core.kernel.tools import ChildThreadRun
from roder_core.threads.events import EventBus, ItemCompleted, ItemStarted, RuntimeEvent
from roder_core.threads.starter import ThreadStarter
from roder_core.turn.host import Approver

if TYPE_CHECKING:
    from roder_core.customization.subagents import TraceRecord
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.kernel.tasks import TaskBoard, TaskBoards
    from roder_core.kernel.teams import TeamChannel
    from roder_core.policy.plan_review import PlanVerdict
    from roder_core.policy.plan_review_book import PlanReviewBook
    from roder_core.runtime.options import RuntimeOptions


class ThreadHost(ThreadStarter, Protocol):
    """The runtime as a tool call's host sees it: events, questions, mode and child threads."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def registry(self) -> ExtensionRegistry: ...

    @property
    def redact(self) -> Callable[[str], str]: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def subagent_traces(self) -> dict[str, TraceRecord]: ...

    async def emit(self, event: RuntimeEvent) -> None: ...

    async def ask_user(self, thread_id: str, turn_id: str, questions: list[dict[str, Any]]) -> dict[str, Any]: ...

    async def set_mode(self, mode: str, reason: str = "") -> None: ...

    def tool_names(self) -> list[str]: ...

    @property
    def plan_reviews(self) -> PlanReviewBook: ...

    def team_channel(self, thread_id: str) -> TeamChannel | None: ...

    async def run_turn(self, thread_id: str, text: str) -> Turn: ...

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool: ...

    def thread(self, thread_id: str) -> Thread: ...

    def thread_interactive(self, thread_id: str) -> bool: ...

    @property
    def tasks(self) -> TaskBoards: ...

    async def close_thread(self, thread_id: str) -> None: ...


async def refuse_outside_a_turn(request: ApprovalRequest) -> ApprovalDecision:
    """Calls outside a turn (``tools/call``) have no approval queue: nobody is asked."""
    return ApprovalDecision(decision="deny", reason=f"{request.tool} runs outside a turn; nobody can approve it")


class TurnToolHost:
    """``ToolHost`` for the calls of one turn (see ``roder_core.kernel.tools.ToolHost``)."""

    def __init__(
        self,
        host: ThreadHost,
        thread_id: str,
        turn_id: str,
        workspace: Path,
        provider: str,
        model: str,
        approve: Approver = refuse_outside_a_turn,
    ) -> None:
        self._host = host
        self._thread_id = thread_id
        self._turn_id = turn_id
        self._workspace = workspace
        self._provider = provider
        self._model = model
        self._approve = approve

    @property
    def mode(self) -> str:
        return self._host.thread_mode(self._thread_id)

    @property
    def interactive(self) -> bool:
        return self._host.thread_interactive(self._thread_id)

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model(self) -> str:
        return self._model

    def redact(self, text: str) -> str:
        return self._host.redact(text)

    async def emit_item(self, item: Item) -> None:
        await self._host.emit(ItemStarted(thread_id=self._thread_id, turn_id=self._turn_id, item=item))
        await self._host.emit(ItemCompleted(thread_id=self._thread_id, turn_id=self._turn_id, item=item))

    async def request_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        return await self._approve(request)

    async def request_user_input(self, questions: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._host.ask_user(self._thread_id, self._turn_id, questions)

    async def set_mode(self, mode: str, reason: str) -> None:
        await self._host.set_mode(mode, reason=reason)

    def tool_names(self) -> list[str]:
        return self._host.tool_names()

    async def start_child_thread(self, *, title: str, provider: str, model: str, tools: frozenset[str], mode: str) -> str:
        child = await self._host.start_thread(
            self._workspace,
            provider,
            model,
            title=title,
            ephemeral=True,
            parent=ParentRef(thread_id=self._thread_id, turn_id=self._turn_id),
        )
        self._host.restrict_thread(child.id, tools=tools, mode=mode)
        return child.id

    async def run_child_thread(self, thread_id: str, text: str, on_event: Callable[[RuntimeEvent], None]) -> ChildThreadRun:
        def forward(event: RuntimeEvent) -> None:
            if event.thread_id == thread_id:
                on_event(event)

        remove = self._host.bus.add_listener(forward)
        try:
            turn = await self._host.run_turn(thread_id, text)
        except asyncio.CancelledError:
            await asyncio.shield(self._host.interrupt(thread_id))
            raise
        finally:
            remove()
        items = list(self._host.thread(thread_id).items())
        await self._host.close_thread(thread_id)
        return ChildThreadRun(turn=turn, items=items)

    def register_subagent(self, record: TraceRecord) -> None:
        self._host.subagent_traces[record.trace_id] = record

    @property
    def tasks(self) -> TaskBoard:
        return self._host.tasks.board(self._thread_id, self._turn_id)

    async def review_plan(self, call_id: str, plan: str) -> PlanVerdict:
        book = self._host.plan_reviews
        request = ApprovalRequest(
            thread_id=self._thread_id,
            turn_id=self._turn_id,
            call_id=call_id,
            tool=PLAN_TOOL,
            reason="The agent finished planning: approve the plan into a mode, comment on it, ask for a rewrite or reject it.",
            options=[
                ApprovalOption(id="allow_once", label="Approve the plan (continue in ask mode)"),
                ApprovalOption(id="deny", label="Reject the plan (say why)"),
            ],
        )
        review = await book.submit(self._thread_id, self._turn_id, plan, request.approval_id)
        request.arguments = {"plan": plan, "reviewId": review.review_id, "version": review.current.version}
        decision = await self._approve(request)
        return await book.settle(review.review_id, decision)

    def team(self) -> TeamChannel | None:
        return self._host.team_channel(self._thread_id)
