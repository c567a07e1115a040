"""The ``ToolHost`` a tool call receives: the runtime's services, scoped to one call.

Built by the turn runner for each call from its ``TurnHost`` (the runtime) and its own approval
queue, so a tool can emit an item, ask for an approval or the user's input, run a child thread
and read or set the mode, and never needs ``Runtime`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.ir import ApprovalDecision, ApprovalOption, ApprovalRequest, Item, ParentRef
from roder_core.kernel.tools import ChildThreadRun
from roder_core.policy.plan_review import PLAN_TOOL, PlanVerdict
from roder_core.threads.events import ItemCompleted, ItemStarted, RuntimeEvent

if TYPE_CHECKING:
    from roder_core.customization.subagents import TraceRecord
    from roder_core.kernel.teams import TeamChannel
    from roder_core.turn.host import TurnHost

Approver = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]


async def refuse_outside_a_turn(request: ApprovalRequest) -> ApprovalDecision:
    """Calls outside a turn (``tools/call``) have no approval queue: nobody is asked."""
    return ApprovalDecision(decision="deny", reason=f"{request.tool} runs outside a turn; nobody can approve it")


class TurnToolHost:
    """``ToolHost`` for the calls of one turn (see ``roder_core.kernel.tools.ToolHost``)."""

    def __init__(
        self,
        host: TurnHost,
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
        return self._host.options.interactive

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
