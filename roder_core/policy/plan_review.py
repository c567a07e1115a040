"""Plan reviews: the ``exit_plan`` tool asks the user to approve a plan; clients answer here.

A plan review is an approval request whose tool is ``exit_plan`` (so every client already
renders it: the plan is in ``arguments["plan"]``). ``session/exit_plan`` resolves it by request
id with approved / rejected, an optional mode to continue in and optional feedback for the model.
"""

from __future__ import annotations

from typing import Protocol

from roder_core.errors import RoderError
from roder_core.ir import PLAN_TOOL as PLAN_TOOL  # re-exported: plan mode names it here
from roder_core.ir import ApprovalDecision, ApprovalDecisionKind, ApprovalRequest


class ApprovalTable(Protocol):
    """Where approvals wait for an answer (the ``Runtime`` provides it)."""

    def pending_approvals(self, thread_id: str | None = None) -> list[ApprovalRequest]: ...

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool: ...


#: The mode the session continues in after approval, encoded as the approval's decision kind.
MODE_BY_DECISION: dict[str, str] = {"allow_once": "ask", "allow_session": "auto-edit", "allow_always": "bypass"}
_DECISION_BY_MODE: dict[str, ApprovalDecisionKind] = {"ask": "allow_once", "auto-edit": "allow_session", "bypass": "allow_always"}


def pending_plans(runtime: ApprovalTable, thread_id: str | None = None) -> list[ApprovalRequest]:
    return [r for r in runtime.pending_approvals(thread_id) if r.tool == PLAN_TOOL]


def resolve_plan(runtime: ApprovalTable, request_id: str, approved: bool, *, mode: str | None = None, feedback: str = "") -> None:
    """Approve (continuing in ``mode``: ask by default, auto-edit or bypass) or reject a plan."""
    if not any(r.approval_id == request_id for r in pending_plans(runtime)):
        raise RoderError(f"no plan review {request_id!r} is waiting (it may have been answered or timed out)")
    if approved:
        target = mode or "ask"
        if target not in _DECISION_BY_MODE:
            raise RoderError(f"after a plan, continue in ask, auto-edit or bypass mode, not {target!r}")
        decision = ApprovalDecision(decision=_DECISION_BY_MODE[target], reason=feedback)
    else:
        decision = ApprovalDecision(decision="deny", reason=feedback)
    runtime.resolve_approval(request_id, decision)
