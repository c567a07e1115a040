"""Approvals and mode changes are policy decisions: the audit log records them as they happen."""

from __future__ import annotations

from roder_core.policy.audit import AuditLog
from roder_core.threads.events import ApprovalRequested, ApprovalResolved, ModeChanged, RuntimeEvent


class PolicyEventAudit:
    """An event-bus listener writing policy decisions (approvals, mode changes) to the audit log."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def __call__(self, event: RuntimeEvent) -> None:
        if isinstance(event, ApprovalRequested):
            request = event.request
            self.audit.record(
                "approval.requested",
                {
                    "thread": event.thread_id,
                    "turn": event.turn_id,
                    "approval": request.approval_id,
                    "call": request.call_id,
                    "tool": request.tool,
                    "reason": request.reason,
                    "command": request.command,
                    "arguments": request.arguments,
                },
            )
        elif isinstance(event, ApprovalResolved):
            self.audit.record(
                "approval.resolved",
                {
                    "thread": event.thread_id,
                    "turn": event.turn_id,
                    "approval": event.approval_id,
                    "decision": event.decision.decision,
                    "rule": event.decision.rule,
                    "reason": event.decision.reason,
                },
            )
        elif isinstance(event, ModeChanged):
            self.audit.record("session.mode", {"thread": event.thread_id, "mode": event.mode, "reason": event.reason})
