"""Policy: decides allow / ask / deny for every tool call before it runs.

Layers, combined so that deny wins over ask over allow:
1. the session mode (plan, ask, auto-edit, bypass);
2. approvals the user granted for this session;
3. PolicyContributor extensions, which may only make a decision stricter.
Configured allow/ask/deny rules are a further layer added by ``roder_core.policy_rules``.
"""

from __future__ import annotations

from pathlib import Path

from roder_core.services import PolicyContributor, PolicyDecision, PolicyVerdict
from roder_core.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolExecutor, is_read_only, tool_kind

_EDIT_KINDS = {"edit", "delete", "move"}
_RANK = {PolicyVerdict.ALLOW: 0, PolicyVerdict.ASK: 1, PolicyVerdict.DENY: 2}


def stricter(a: PolicyDecision, b: PolicyDecision | None) -> PolicyDecision:
    if b is None:
        return a
    return b if _RANK[b.verdict] > _RANK[a.verdict] else a


def subjects_of(tool: ToolExecutor, call: ToolCall, workspace: Path) -> list[PolicySubject]:
    describe = getattr(tool, "policy_subjects", None)
    if describe is None:
        return [PolicySubject(tool=call.name, writes=not is_read_only(tool))]
    return describe(call.arguments, workspace)


def mode_decision(mode: str, tool: ToolExecutor, subjects: list[PolicySubject]) -> PolicyDecision:
    read_only = is_read_only(tool)
    if mode == "bypass":
        return PolicyDecision(PolicyVerdict.ALLOW, "bypass mode", "mode")
    if read_only:
        return PolicyDecision(PolicyVerdict.ALLOW, "read-only tool", "mode")
    if mode == "plan":
        return PolicyDecision(PolicyVerdict.DENY, "plan mode allows read-only tools only", "mode")
    if mode == "auto-edit" and tool_kind(tool) in _EDIT_KINDS:
        return PolicyDecision(PolicyVerdict.ALLOW, "auto-edit mode allows workspace edits", "mode")
    return PolicyDecision(PolicyVerdict.ASK, f"{mode} mode asks before {tool_kind(tool)} tools", "mode")


class PolicyEngine:
    """One per runtime. Holds the mode and what the user allowed for this session."""

    def __init__(self, mode: str = "ask", contributors: list[PolicyContributor] | None = None) -> None:
        self.mode = mode
        self._contributors = contributors or []
        self._session_allowed: set[tuple[str, str]] = set()

    def allow_for_session(self, subjects: list[PolicySubject]) -> None:
        self._session_allowed.update((s.tool, s.value) for s in subjects)

    def _session_allows(self, subjects: list[PolicySubject]) -> bool:
        return bool(subjects) and all((s.tool, s.value) in self._session_allowed for s in subjects)

    async def evaluate(self, tool: ToolExecutor, call: ToolCall, ctx: ToolExecutionContext) -> PolicyDecision:
        subjects = subjects_of(tool, call, ctx.workspace)
        decision = mode_decision(ctx.mode or self.mode, tool, subjects)
        if decision.verdict is PolicyVerdict.ASK and self._session_allows(subjects):
            decision = PolicyDecision(PolicyVerdict.ALLOW, "allowed for this session", "session")
        for contributor in self._contributors:
            decision = stricter(decision, await contributor.review(ctx, call))
        return decision
