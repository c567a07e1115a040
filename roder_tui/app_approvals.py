"""The app's approvals and plan reviews: queued, shown one at a time, answered through the client."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from roder_tui.app_state import PLAN_TOOL
from roder_tui.app_threads import AppThreads

if TYPE_CHECKING:
    from roder_core.ir import ApprovalDecision, ApprovalRequest
    from roder_core.server.protocol_attach import ThreadLive


class AppApprovals(AppThreads):
    """Approval requests and plan reviews, shown one at a time and answered through the client."""

    def _on_approval_event(self, event: Any) -> None:
        """Approvals of the visible thread and of subagents it (or a thread left running) started."""
        from roder_core.threads import events as ev

        if isinstance(event, ev.ApprovalRequested):
            self._queue_approval(event.request)
            return
        self._approvals = [r for r in self._approvals if r.approval_id != event.approval_id]
        if self._approval_open == event.approval_id:
            from roder_tui.screens.approval import ApprovalScreen
            from roder_tui.screens.plan_review import PlanReviewScreen

            if isinstance(self.screen, ApprovalScreen | PlanReviewScreen):
                self._approval_open = None
                self.pop_screen()
                self._next_approval()
        if self.turn_id:
            self._set_activity("working")
        elif not self._approvals:  # a workflow step's or a thread left running: nothing waits now
            self._set_activity("idle")

    def _queue_approval(self, request: ApprovalRequest) -> None:
        """Show an approval once, however many ways it arrived (live, replayed, caught up)."""
        if request.approval_id == self._approval_open or any(r.approval_id == request.approval_id for r in self._approvals):
            return
        self._approvals.append(request)
        self._set_activity("waiting for approval")
        self._next_approval()

    async def _catch_up(self, live: ThreadLive) -> None:
        """A thread opened while its turn runs (another client's, or from before this one
        attached): the text streamed so far, running tools' output, queued messages, and the
        approvals waiting for a person."""
        await self.coalescer.drain()
        for streaming in live.streaming:
            await self.transcript.resume_stream(streaming.item_id, streaming.text)
        for call_id, output in live.tool_output.items():
            self.transcript.resume_tool_output(f"call:{call_id}", output)
        for steer in live.queued_steers:
            self.queued.add(steer.id, steer.text)
        if live.turn_id is not None and self.turn_id != live.turn_id:
            # The counter goes on from the turn's age on the host, not from when we attached.
            self.turn_id, self.turn_started = live.turn_id, time.monotonic() - (live.turn_elapsed_ms or 0) / 1000
            self._set_activity("working")
        for request in live.pending_approvals:
            self._queue_approval(request)

    def _next_approval(self) -> None:
        if self._approval_open is not None or not self._approvals:
            return
        from roder_tui.screens.approval import ApprovalScreen

        request = self._approvals.pop(0)
        self._approval_open = request.approval_id
        if request.tool == PLAN_TOOL and "reviewId" in request.arguments:
            self.run_worker(self.open_plan_review(str(request.arguments["reviewId"]), request), group="plan-review")
            return

        def answered(decision: ApprovalDecision | None) -> None:
            self._approval_open = None
            if decision is not None:
                self.run_worker(self._resolve(request, decision), group="approval", exit_on_error=False)
            self._next_approval()

        self.push_screen(ApprovalScreen(request), answered)

    async def _resolve(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        from roder_core.server.protocol import SESSION_RESOLVE_APPROVAL, ResolveApprovalParams

        params = ResolveApprovalParams(approval_id=request.approval_id, decision=decision.decision, rule=decision.rule)
        await self._client().call(SESSION_RESOLVE_APPROVAL, params)

    async def open_plan_review(self, review_id: str | None = None, request: ApprovalRequest | None = None) -> None:
        """Show a plan review (the thread's latest without an id): rendered blocks, comments, keys."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_plan_review import PLAN_REVIEW_READ, PlanReviewReadParams
        from roder_tui.screens.plan_review import PlanReviewScreen

        params = PlanReviewReadParams(review_id=review_id) if review_id else PlanReviewReadParams(thread_id=self.open_thread())
        try:
            review = (await self._client().call(PLAN_REVIEW_READ, params)).review
        except RpcError as exc:
            if request is not None:
                self._approval_open = None
            self.notify(exc.message, title="plan review", severity="error", timeout=10)
            return

        def closed(outcome: str | None) -> None:
            if request is not None and self._approval_open == request.approval_id:
                self._approval_open = None
                if outcome is None:
                    self.notify("The plan waits for your review; /plan-review opens it again.", title="plan review")
                self._next_approval()

        self.push_screen(PlanReviewScreen(review, self._client(), agent=request.agent if request else None), closed)

    async def _on_plan_review(self, event: Any) -> None:
        from roder_tui.screens.plan_review import PlanReviewScreen

        screen = self.screen
        if isinstance(screen, PlanReviewScreen) and screen.review.review_id == event.review.review_id:
            if event.change == "abandoned":
                self.pop_screen()
                self.notify("The plan's turn ended before an answer.", title="plan review")
            else:
                await screen.show(event.review)
