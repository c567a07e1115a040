"""Plan review methods: the plans ``exit_plan`` proposed, reviewed through the runtime's book."""

from __future__ import annotations

from roder_core.ir import Mode
from roder_core.policy.plan_review_book import PlanReviewError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.protocol_plan_review import (
    PLAN_REVIEW_APPROVE,
    PLAN_REVIEW_COMMENT,
    PLAN_REVIEW_READ,
    PLAN_REVIEW_REJECT,
    PLAN_REVIEW_REWRITE,
    PlanReviewApproveParams,
    PlanReviewCommentParams,
    PlanReviewCommentResult,
    PlanReviewReadParams,
    PlanReviewRejectParams,
    PlanReviewResult,
    PlanReviewRewriteParams,
)


@handles(PLAN_REVIEW_READ)
async def read(app: Dispatcher, params: PlanReviewReadParams, ctx: CallContext) -> PlanReviewResult:
    try:
        review = await app.runtime.plan_reviews.read(params.review_id, params.thread_id)
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None
    return PlanReviewResult(review=review)


@handles(PLAN_REVIEW_COMMENT)
async def comment(app: Dispatcher, params: PlanReviewCommentParams, ctx: CallContext) -> PlanReviewCommentResult:
    book = app.runtime.plan_reviews
    try:
        added = await book.comment(
            params.review_id,
            params.text,
            line=params.line,
            end_line=params.end_line,
            section=params.section,
            version=params.version,
        )
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None
    return PlanReviewCommentResult(review=book.get(params.review_id), comment=added)


@handles(PLAN_REVIEW_REWRITE)
async def rewrite(app: Dispatcher, params: PlanReviewRewriteParams, ctx: CallContext) -> PlanReviewResult:
    try:
        return PlanReviewResult(review=await app.runtime.plan_reviews.rewrite(params.review_id, params.instructions))
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None


@handles(PLAN_REVIEW_APPROVE)
async def approve(app: Dispatcher, params: PlanReviewApproveParams, ctx: CallContext) -> PlanReviewResult:
    try:
        return PlanReviewResult(review=await app.runtime.plan_reviews.approve(params.review_id, Mode(params.mode), params.note))
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None


@handles(PLAN_REVIEW_REJECT)
async def reject(app: Dispatcher, params: PlanReviewRejectParams, ctx: CallContext) -> PlanReviewResult:
    try:
        return PlanReviewResult(review=await app.runtime.plan_reviews.reject(params.review_id, params.reason))
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None
