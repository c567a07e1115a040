"""The plan reviews of one runtime: opened by ``exit_plan``, answered by the ``plan/review/*`` methods.

Each round of a review is an ordinary approval request (tool ``exit_plan``), so every client
that answers approvals can answer a plan too (``session/resolve_approval``: allow approves into
ask mode, deny rejects). The review methods answer it with more: an explicit next mode, a
reason, or a rewrite (the model gets the comments back and its next ``exit_plan`` call becomes
the review's next version, so the history of the plan is kept). Reviews are saved in their
thread (custom state ``roder.plan-reviews``) at every change and announced live as
``plan/review/updated``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from roder_core.errors import RoderError
from roder_core.ir import ApprovalDecision, ApprovalRequest, Mode, Thread, now
from roder_core.policy.plan_review import (
    NEXT_MODES,
    PlanComment,
    PlanReview,
    PlanReviewStatus,
    PlanVerdict,
    PlanVersion,
    approval_note,
    rewrite_request,
    sections,
)
from roder_core.threads.events import PlanReviewUpdated, RuntimeEvent, TurnCompleted

log = logging.getLogger(__name__)

NAMESPACE = "roder.plan-reviews"


class PlanReviewHost(Protocol):
    """What the book needs from the runtime (``Runtime`` provides it)."""

    async def emit(self, event: RuntimeEvent) -> None: ...

    async def save_custom(self, thread_id: str, namespace: str, data: Any, version: int = 1) -> Any: ...

    def pending_approvals(self, thread_id: str | None = None) -> list[ApprovalRequest]: ...

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool: ...

    def active_turn_id(self, thread_id: str) -> str | None: ...

    async def start_turn(self, thread_id: str, text: str) -> Any: ...

    async def resume_thread(self, thread_id: str) -> Thread: ...


class PlanReviewError(RoderError):
    """A review method that does not apply (unknown review, closed review, bad anchor)."""


class PlanReviewBook:
    def __init__(self, host: PlanReviewHost, add_listener: Any) -> None:
        self._host = host
        self._reviews: dict[str, PlanReview] = {}
        #: Answers given through the review methods, read by the waiting ``exit_plan`` call.
        self._verdicts: dict[str, PlanVerdict] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        add_listener(self._on_event)

    # ------------------------------------------------------------------ the exit_plan side

    async def submit(self, thread_id: str, turn_id: str, plan: str, approval_id: str) -> PlanReview:
        """A plan from the model: the next version of the thread's review being rewritten, or a
        new review. It then waits for an answer on ``approval_id``."""
        review = next(
            (r for r in self._reviews.values() if r.thread_id == thread_id and r.status is PlanReviewStatus.REWRITING), None
        )
        if review is None:
            review = PlanReview(thread_id=thread_id, turn_id=turn_id, versions=[PlanVersion(version=1, text=plan)])
            self._reviews[review.review_id] = review
            change = "opened"
        else:
            review.versions.append(
                PlanVersion(
                    version=review.current.version + 1,
                    text=plan,
                    source="rewrite",
                    addresses=review.rewrite_asked,
                    instructions=review.rewrite_instructions,
                )
            )
            review.rewrite_asked, review.rewrite_instructions = [], ""
            review.turn_id = turn_id
            change = "revised"
        review.status = PlanReviewStatus.PENDING
        review.approval_id = approval_id
        await self._changed(review, change)
        return review

    async def settle(self, review_id: str, decision: ApprovalDecision) -> PlanVerdict:
        """The verdict for the waiting ``exit_plan`` call, once its approval was answered: the
        one a review method gave, else read from a plain approval answer (allow: approved into
        ask mode; deny: rejected, with the denial's reason)."""
        review = self._reviews[review_id]
        verdict = self._verdicts.pop(review_id, None)
        review.approval_id = None
        if verdict is None:
            if decision.allowed:
                feedback = approval_note(review, decision.reason)
                verdict = PlanVerdict(outcome="approved", next_mode=Mode.ASK, feedback=feedback)
                review.status, review.next_mode, review.reason = PlanReviewStatus.APPROVED, Mode.ASK, decision.reason
            else:
                verdict = PlanVerdict(outcome="rejected", feedback=decision.reason)
                review.status, review.reason = PlanReviewStatus.REJECTED, decision.reason
            await self._changed(review, verdict.outcome)
        return verdict.model_copy(update={"review_id": review.review_id, "version": review.current.version})

    # ------------------------------------------------------------------ the methods' side

    def get(self, review_id: str) -> PlanReview:
        review = self._reviews.get(review_id)
        if review is None:
            raise PlanReviewError(f"no plan review {review_id!r} (give threadId to read one from a stored thread)")
        return review

    def waiting_on(self, approval_id: str) -> PlanReview:
        """The review whose current version waits on this approval (``session/exit_plan``)."""
        review = next((r for r in self._reviews.values() if r.approval_id == approval_id and r.open), None)
        if review is None:
            raise PlanReviewError(f"no plan review {approval_id!r} is waiting (it may have been answered or timed out)")
        return review

    async def read(self, review_id: str | None, thread_id: str | None) -> PlanReview:
        """A review by id, or the latest of a thread; a thread not open here is read from its
        saved state (after a restart)."""
        if review_id is not None and review_id in self._reviews:
            return self._reviews[review_id]
        if thread_id is None:
            if review_id is None:
                raise PlanReviewError("give reviewId or threadId")
            return self.get(review_id)
        reviews = await self.of_thread(thread_id)
        if review_id is None:
            if not reviews:
                raise PlanReviewError(f"thread {thread_id} has no plan review")
            return reviews[-1]
        found = next((r for r in reviews if r.review_id == review_id), None)
        if found is None:
            raise PlanReviewError(f"no plan review {review_id!r} in thread {thread_id}")
        return found

    async def of_thread(self, thread_id: str) -> list[PlanReview]:
        """Every review of a thread, oldest first (live ones as they are now)."""
        thread = await self._host.resume_thread(thread_id)
        stored = thread.custom.get(NAMESPACE)
        rows = {}
        if stored is not None and isinstance(stored.data, dict):
            for data in stored.data.get("reviews", []):
                review = PlanReview.model_validate(data)
                rows[review.review_id] = review
        for review in self._reviews.values():
            if review.thread_id == thread.id:
                rows[review.review_id] = review
        for review_id, review in rows.items():
            if review.open and review_id not in self._reviews:
                # Saved open by a process that is gone: nothing waits for it any more.
                review.status = PlanReviewStatus.ABANDONED
            self._reviews.setdefault(review_id, review)
        return sorted(rows.values(), key=lambda r: r.created_at)

    async def comment(
        self,
        review_id: str,
        text: str,
        *,
        line: int | None = None,
        end_line: int | None = None,
        section: str | None = None,
        version: int | None = None,
    ) -> PlanComment:
        review = self.get(review_id)
        if review.status in (PlanReviewStatus.APPROVED, PlanReviewStatus.REJECTED):
            raise PlanReviewError(f"plan review {review_id} is {review.status}; comments go on an open review")
        if not text.strip():
            raise PlanReviewError("a comment needs text")
        target = self._version(review, version)
        lines = target.text.splitlines()
        if section is not None:
            found = [s for s in sections(target.text) if s[0].strip().lower() == section.strip().lower()]
            if not found:
                names = ", ".join(repr(s[0]) for s in sections(target.text)) or "none"
                raise PlanReviewError(f"version {target.version} has no section {section!r} (sections: {names})")
            title, start, end = found[0]
            section = title
        elif line is not None:
            start, end = line, end_line if end_line is not None else line
            if not 1 <= start <= end <= len(lines):
                raise PlanReviewError(f"lines {start}-{end} are outside version {target.version} (it has {len(lines)} lines)")
        else:
            raise PlanReviewError("say where the comment goes: line (and endLine) or section")
        comment = PlanComment(
            version=target.version,
            line=start,
            end_line=end,
            section=section,
            quote="\n".join(lines[start - 1 : end]),
            text=text.strip(),
        )
        review.comments.append(comment)
        await self._changed(review, "commented")
        return comment

    async def approve(self, review_id: str, mode: Mode, note: str = "") -> PlanReview:
        if mode not in NEXT_MODES:
            raise PlanReviewError(f"a plan is approved into ask, auto-edit or bypass mode, not {mode!r}")
        review, approval_id = self._waiting(review_id, "approve")
        review.status, review.next_mode, review.reason = PlanReviewStatus.APPROVED, Mode(mode), note
        verdict = PlanVerdict(outcome="approved", next_mode=Mode(mode), feedback=approval_note(review, note))
        self._verdicts[review_id] = verdict
        await self._changed(review, "approved")
        self._host.resolve_approval(approval_id, ApprovalDecision(decision="allow_once", reason=note))
        return review

    async def reject(self, review_id: str, reason: str) -> PlanReview:
        review, approval_id = self._waiting(review_id, "reject")
        review.status, review.reason = PlanReviewStatus.REJECTED, reason
        self._verdicts[review_id] = PlanVerdict(outcome="rejected", feedback=reason)
        await self._changed(review, "rejected")
        self._host.resolve_approval(approval_id, ApprovalDecision(decision="deny", reason=reason))
        return review

    async def rewrite(self, review_id: str, instructions: str = "") -> PlanReview:
        """Send the plan back to the model with the comments not addressed yet (and the
        instructions). A waiting ``exit_plan`` call returns them to the model at once; a review
        whose turn is over (abandoned, or after a restart) gets a new turn on its thread."""
        review = self.get(review_id)
        if review.status in (PlanReviewStatus.APPROVED, PlanReviewStatus.REJECTED, PlanReviewStatus.REWRITING):
            raise PlanReviewError(f"plan review {review_id} is {review.status}; only a pending or abandoned plan is rewritten")
        asked = review.unaddressed()
        if not asked and not instructions.strip():
            raise PlanReviewError("nothing to rewrite with: add a comment or give instructions")
        request = rewrite_request(review, instructions)
        waiting = review.approval_id if review.status is PlanReviewStatus.PENDING else None
        if waiting is None and self._host.active_turn_id(review.thread_id) is not None:
            raise PlanReviewError(f"a turn is running on thread {review.thread_id}; rewrite once it ends")
        review.status = PlanReviewStatus.REWRITING
        review.rewrite_asked = [c.comment_id for c in asked]
        review.rewrite_instructions = instructions.strip()
        await self._changed(review, "rewriting")
        if waiting is not None:
            self._verdicts[review_id] = PlanVerdict(outcome="rewrite", feedback=request)
            self._host.resolve_approval(waiting, ApprovalDecision(decision="deny", reason=request))
        else:
            await self._host.start_turn(review.thread_id, request)
        return review

    # ------------------------------------------------------------------ internals

    def _version(self, review: PlanReview, version: int | None) -> PlanVersion:
        if version is None:
            return review.current
        found = next((v for v in review.versions if v.version == version), None)
        if found is None:
            raise PlanReviewError(f"plan review {review.review_id} has versions 1-{review.current.version}, not {version}")
        return found

    def _waiting(self, review_id: str, action: str) -> tuple[PlanReview, str]:
        review = self.get(review_id)
        approval_id = review.approval_id
        live = {r.approval_id for r in self._host.pending_approvals(review.thread_id)}
        if review.status is not PlanReviewStatus.PENDING or approval_id is None or approval_id not in live:
            raise PlanReviewError(
                f"cannot {action} plan review {review_id}: it is {review.status}, not waiting for an answer"
                + (" (its turn ended; ask for a rewrite to continue)" if review.status is PlanReviewStatus.ABANDONED else "")
            )
        return review, approval_id

    async def _changed(self, review: PlanReview, change: str) -> None:
        review.updated_at = now()
        thread_reviews = [r.wire() for r in self._reviews.values() if r.thread_id == review.thread_id]
        try:
            await self._host.save_custom(review.thread_id, NAMESPACE, {"reviews": thread_reviews})
        except RoderError as exc:  # the thread was closed meanwhile: the live review still counts
            log.warning("plan review %s not saved: %s", review.review_id, exc)
        await self._host.emit(
            PlanReviewUpdated(thread_id=review.thread_id, change=change, review=review.model_copy(deep=True))  # type: ignore[arg-type]
        )

    def _on_event(self, event: RuntimeEvent) -> None:
        """A turn that ended leaves none of its thread's reviews waiting."""
        if not isinstance(event, TurnCompleted):
            return
        stale = [r for r in self._reviews.values() if r.thread_id == event.thread_id and r.open]
        if stale:
            task = asyncio.get_running_loop().create_task(self._abandon(stale))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _abandon(self, reviews: list[PlanReview]) -> None:
        for review in reviews:
            if review.open:
                review.status, review.approval_id = PlanReviewStatus.ABANDONED, None
                await self._changed(review, "abandoned")
