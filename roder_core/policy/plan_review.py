"""Plan reviews: the plan ``exit_plan`` proposes, as a document the user reviews before any edit.

A review holds every version of the plan (the model's first draft, then each rewrite), the
user's comments (on a line range or a markdown section of one version), and how it ended:
approved into an explicit next mode, or rejected with a reason. ``roder_core.policy.plan_review_book``
keeps the reviews of a runtime and drives them; this module is only the vocabulary, so the event
module can name it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field

from roder_core.ir import PLAN_TOOL as PLAN_TOOL  # re-exported: plan mode names it here
from roder_core.ir import IRModel, Mode, empty_list, new_id, now

#: The modes a plan may be approved into (plan mode itself is what the review leaves).
NEXT_MODES: tuple[Mode, ...] = (Mode.ASK, Mode.AUTO_EDIT, Mode.BYPASS)

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class PlanReviewStatus(StrEnum):
    #: The model's ``exit_plan`` call waits for the user's answer.
    PENDING = "pending"
    #: The user asked for a rewrite; the model is revising (its next ``exit_plan`` is the new version).
    REWRITING = "rewriting"
    APPROVED = "approved"
    REJECTED = "rejected"
    #: The turn ended (interrupted, failed, or the model did not resubmit) before an answer.
    ABANDONED = "abandoned"


class PlanVersion(IRModel):
    version: int
    text: str
    source: Literal["model", "rewrite"] = "model"
    #: Comments the user asked this version to address, and the instructions given (rewrites only).
    addresses: list[str] = Field(default_factory=empty_list)
    instructions: str = ""
    created_at: float = Field(default_factory=now)


class PlanComment(IRModel):
    comment_id: str = Field(default_factory=lambda: new_id("pcom"))
    #: The version commented on, and where: lines ``line``..``end_line`` (1-based) of its text.
    version: int
    line: int
    end_line: int
    #: The heading of the section commented on, when the comment was made on a section.
    section: str | None = None
    #: The commented lines as they read then (a later version may have moved them).
    quote: str = ""
    text: str
    created_at: float = Field(default_factory=now)


class PlanReview(IRModel):
    review_id: str = Field(default_factory=lambda: new_id("plan"))
    thread_id: str
    turn_id: str
    status: PlanReviewStatus = PlanReviewStatus.PENDING
    versions: list[PlanVersion] = Field(default_factory=empty_list)
    comments: list[PlanComment] = Field(default_factory=empty_list)
    #: The approval the current version waits on (answerable by ``session/resolve_approval`` too).
    approval_id: str | None = None
    #: Set on approval: the mode the session continues in. Explicit, never read from a decision kind.
    next_mode: Mode | None = None
    #: The rejection reason, or the note given with the approval.
    reason: str = ""
    #: While rewriting: the comments and instructions the next version is asked to address.
    rewrite_asked: list[str] = Field(default_factory=empty_list)
    rewrite_instructions: str = ""
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)

    @property
    def current(self) -> PlanVersion:
        return self.versions[-1]

    @property
    def open(self) -> bool:
        return self.status in (PlanReviewStatus.PENDING, PlanReviewStatus.REWRITING)

    def unaddressed(self) -> list[PlanComment]:
        """Comments no rewrite was asked to address yet."""
        done = {c for v in self.versions for c in v.addresses}
        return [c for c in self.comments if c.comment_id not in done]


class PlanVerdict(IRModel):
    """How a review round ended, as the ``exit_plan`` tool sees it."""

    outcome: Literal["approved", "rejected", "rewrite"]
    #: For ``approved``: the mode to continue in.
    next_mode: Mode | None = None
    #: Rejection reason, approval note, or the rewrite request (comments and instructions).
    feedback: str = ""
    review_id: str = ""
    version: int = 1


def sections(text: str) -> list[tuple[str, int, int]]:
    """The markdown sections of a plan: (heading, first line, last line), 1-based, in order.
    A section runs from its heading to the line before the next heading of the same or a
    higher level (or the end)."""
    lines = text.splitlines()
    heads = [(i + 1, len(m.group(1)), m.group(2)) for i, line in enumerate(lines) if (m := _HEADING.match(line))]
    found = []
    for index, (start, level, title) in enumerate(heads):
        end = len(lines)
        for later_start, later_level, _ in heads[index + 1 :]:
            if later_level <= level:
                end = later_start - 1
                break
        found.append((title, start, end))
    return found


def _open_comments(review: PlanReview) -> list[str]:
    """Each comment no rewrite addressed yet, with the lines it is about."""
    parts = []
    for comment in review.unaddressed():
        where = f"section {comment.section!r}" if comment.section else f"lines {comment.line}-{comment.end_line}"
        if comment.line == comment.end_line and not comment.section:
            where = f"line {comment.line}"
        quote = "\n".join(f"> {line}" for line in comment.quote.splitlines()[:12])
        parts.append(f"Comment on {where} (version {comment.version}):\n{quote}\n{comment.text}".strip())
    return parts


def rewrite_request(review: PlanReview, instructions: str) -> str:
    """What the model is asked to change: each comment with the lines it is about, then the
    user's own instructions."""
    parts = [f"The user reviewed version {review.current.version} of your plan and asks you to revise it."]
    parts += _open_comments(review)
    if instructions.strip():
        parts.append(f"Instructions: {instructions.strip()}")
    parts.append(f"Call {PLAN_TOOL} again with the complete revised plan (not only the changes).")
    return "\n\n".join(parts)


def approval_note(review: PlanReview, note: str) -> str:
    """What the model is told with an approval: the user's note, then every comment no rewrite
    addressed, as instructions for the implementation (an approval never drops a comment)."""
    comments = _open_comments(review)
    parts = [note.strip()] if note.strip() else []
    if comments:
        parts.append("The user approved the plan with these comments; follow them while implementing it:")
        parts += comments
    return "\n\n".join(parts)
