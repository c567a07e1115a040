"""Protocol models of plan review (seed 004 ``plan/review/*``): read a plan ``exit_plan``
proposed, comment on a line range or a section, ask for a rewrite, approve it into an explicit
next mode, or reject it with a reason. ``plan/review/updated`` notifications follow each change."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from roder_core.policy.plan_review import PlanComment, PlanReview
from roder_core.server.protocol import MethodSpec, ProtocolModel, register

GROUP = "planReview"


class PlanReviewReadParams(ProtocolModel):
    """A review by id, or (with ``threadId`` alone) the thread's latest one."""

    review_id: str | None = None
    #: Needed for a review of a thread not open in this server (e.g. after a restart).
    thread_id: str | None = None


class PlanReviewResult(ProtocolModel):
    review: PlanReview


class PlanReviewCommentParams(ProtocolModel):
    """Where: ``line`` (and ``endLine`` for a range, 1-based, inclusive) or ``section`` (a
    markdown heading of the plan); of the current version unless ``version`` says otherwise."""

    review_id: str
    text: str = Field(min_length=1)
    line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    section: str | None = None
    version: int | None = Field(default=None, ge=1)


class PlanReviewCommentResult(ProtocolModel):
    review: PlanReview
    comment: PlanComment


class PlanReviewRewriteParams(ProtocolModel):
    review_id: str
    #: Said to the model with the comments not addressed yet.
    instructions: str = ""


class PlanReviewApproveParams(ProtocolModel):
    review_id: str
    #: The mode the session continues in (explicit: never read from an approval decision).
    mode: Literal["ask", "auto-edit", "bypass"]
    note: str = ""


class PlanReviewRejectParams(ProtocolModel):
    review_id: str
    reason: str = Field(min_length=1)


PLAN_REVIEW_READ = register(
    MethodSpec(
        "plan/review/read",
        GROUP,
        PlanReviewReadParams,
        PlanReviewResult,
        "A plan review: every version of the plan, the comments, its status and next mode.",
    )
)

PLAN_REVIEW_COMMENT = register(
    MethodSpec(
        "plan/review/comment",
        GROUP,
        PlanReviewCommentParams,
        PlanReviewCommentResult,
        "Comment on a line range or a section of the plan (kept for the next rewrite).",
    )
)

PLAN_REVIEW_REWRITE = register(
    MethodSpec(
        "plan/review/rewrite",
        GROUP,
        PlanReviewRewriteParams,
        PlanReviewResult,
        "Send the plan back to the model with the open comments; its revision becomes the next version.",
    )
)

PLAN_REVIEW_APPROVE = register(
    MethodSpec(
        "plan/review/approve",
        GROUP,
        PlanReviewApproveParams,
        PlanReviewResult,
        "Approve the plan; the session continues in the given mode (ask, auto-edit or bypass).",
    )
)

PLAN_REVIEW_REJECT = register(
    MethodSpec(
        "plan/review/reject",
        GROUP,
        PlanReviewRejectParams,
        PlanReviewResult,
        "Reject the plan with a reason (the model stays in plan mode).",
    )
)
