"""Policy: decides allow / ask / deny for every tool call before it runs.

Layers, combined so that deny wins over ask over allow:
1. configured rules (``[policy]`` allow / ask / deny, see ``policy_rules``): a deny rule always
   denies; an ask rule asks (except in bypass mode); a call is allowed by rules only when every
   subject (every part of a compound shell command, every redirect target) is allowed;
2. the session mode (plan, ask, auto-edit, bypass) for whatever the rules leave open;
3. approvals the user granted for this session;
4. floors no mode or rule can lift: file tools never write protected paths or outside the
   workspace (denied), shell redirects to such paths always ask, and the same call repeated
   three times in a row within a turn asks even in auto-edit and bypass;
5. PolicyContributor extensions, which may only make a decision stricter.
Every decision is written to the audit log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from roder_core.brokers import BrokerDenied
from roder_core.brokers.fs import settled_realpath
from roder_core.brokers.git_dirs import git_refusal
from roder_core.brokers.next_action import next_action_reason
from roder_core.brokers.protected_names import protected_reason
from roder_core.ir import Mode
from roder_core.kernel.services import PolicyContributor, PolicyDecision, PolicyVerdict
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolExecutor, is_read_only, tool_kind
from roder_core.policy.commandline import HARMLESS_TARGETS, UNKNOWN_COMMAND
from roder_core.policy.rules import RuleSet, escape_command

_EDIT_KINDS = {"edit", "delete", "move"}
_RANK = {PolicyVerdict.ALLOW: 0, PolicyVerdict.ASK: 1, PolicyVerdict.DENY: 2}
#: The same call this many times in a row asks, whatever the mode.
REPEAT_LIMIT = 3
_UNKNOWABLE = ("$", "`", "*", "?", "[", "{")

AuditFn = Callable[[str, dict[str, Any]], None]


def stricter(a: PolicyDecision, b: PolicyDecision | None) -> PolicyDecision:
    if b is None:
        return a
    return b if _RANK[b.verdict] > _RANK[a.verdict] else a


def subjects_of(tool: ToolExecutor, call: ToolCall, workspace: Path) -> list[PolicySubject]:
    describe = getattr(tool, "policy_subjects", None)
    if describe is None:
        return [PolicySubject(tool=call.name, writes=not is_read_only(tool))]
    subjects: list[PolicySubject] = describe(call.arguments, workspace)
    return subjects


def mode_decision(
    mode: str, tool: ToolExecutor, subjects: list[PolicySubject], arguments: dict[str, Any] | None = None
) -> PolicyDecision:
    read_only = is_read_only(tool)
    if mode == Mode.BYPASS:
        return PolicyDecision(PolicyVerdict.ALLOW, "bypass mode", "mode")
    if read_only:
        return PolicyDecision(PolicyVerdict.ALLOW, "read-only tool", "mode")
    if mode == Mode.PLAN:
        return PolicyDecision(PolicyVerdict.DENY, "plan mode allows read-only tools only", "mode")
    if mode == Mode.AUTO_EDIT and tool_kind(tool) in _EDIT_KINDS:
        # A tool whose write reaches past this workspace (global memory, recalled in every
        # project) says so; auto-edit covers workspace edits only.
        beyond = getattr(tool, "beyond_workspace", None)
        reason = beyond(arguments or {}) if callable(beyond) else None
        if reason:
            return PolicyDecision(PolicyVerdict.ASK, f"auto-edit mode allows workspace edits only; {reason}", "mode")
        return PolicyDecision(PolicyVerdict.ALLOW, "auto-edit mode allows workspace edits", "mode")
    return PolicyDecision(PolicyVerdict.ASK, f"{mode} mode asks before {tool_kind(tool)} tools", "mode")


def _path_forms(value: str, workspace: Path) -> tuple[Path, Path]:
    """(lexical, real) absolute forms of a path a tool or redirect names."""
    lexical = Path(os.path.normpath(Path(workspace) / os.path.expanduser(value)))
    try:
        return lexical, settled_realpath(lexical)
    except BrokerDenied:
        return lexical, lexical  # the broker refuses it when the call runs


def _relative(path: Path, workspace: Path) -> str:
    return path.relative_to(workspace).as_posix() if path.is_relative_to(workspace) else str(path)


class PolicyEngine:
    """One per runtime. Holds the mode, the rules and what the user allowed for this session."""

    def __init__(
        self,
        mode: str = "ask",
        contributors: list[PolicyContributor] | None = None,
        rules: RuleSet | None = None,
        audit: AuditFn | None = None,
        extra_roots: Iterable[str] = (),
    ) -> None:
        self.mode = mode
        self._contributors = contributors or []
        self.rules = rules or RuleSet()
        self._audit = audit
        self._extra_roots = [Path(os.path.realpath(os.path.expanduser(r))) for r in extra_roots]
        self._session_allowed: set[tuple[str, str]] = set()
        #: Per thread: the turn, the last call's key and how many times in a row it came.
        self._streaks: dict[str, tuple[str, str, int]] = {}
        self._forms_memo: dict[tuple[str, str], tuple[Path, Path]] = {}

    # ------------------------------------------------------------------ session state

    def allow_for_session(self, subjects: list[PolicySubject]) -> None:
        self._session_allowed.update((s.tool, s.value) for s in subjects)

    def _session_allows(self, subjects: list[PolicySubject]) -> bool:
        return bool(subjects) and all((s.tool, s.value) in self._session_allowed for s in subjects)

    def _repeat_count(self, thread_id: str, turn_id: str, call: ToolCall) -> int:
        """How many times in a row this turn made this exact call: a new prompt starts over (the
        user asking again for the same change is no loop)."""
        key = call.name + "\0" + json.dumps(call.arguments, sort_keys=True, default=str)
        turn, last, count = self._streaks.get(thread_id, ("", "", 0))
        count = count + 1 if (turn, last) == (turn_id, key) else 1
        self._streaks[thread_id] = (turn_id, key, count)
        return count

    # ------------------------------------------------------------------ subjects

    def _forms(self, value: str, workspace: Path) -> tuple[Path, Path]:
        """``_path_forms``, resolved once per decision (rules and floors both need them)."""
        key = (value, str(workspace))
        found = self._forms_memo.get(key)
        if found is None:
            found = self._forms_memo[key] = _path_forms(value, workspace)
        return found

    def _roots(self, workspace: Path) -> list[Path]:
        return [Path(os.path.realpath(workspace)), *self._extra_roots]

    def _write_floor(self, subject: PolicySubject, workspace: Path, mode: str = Mode.ASK) -> PolicyDecision | None:
        """Protected paths, git dirs, paths outside the workspace and unknowable shell targets;
        outside bypass, files that run code at the user's next action (``next_action``)."""
        if subject.kind != "path" or not subject.writes:
            return None
        shell = subject.tool == "bash"
        if shell and any(c in subject.value for c in _UNKNOWABLE):
            return PolicyDecision(
                PolicyVerdict.ASK, f"the redirect target {subject.value!r} is only known when the command runs", "floor"
            )
        lexical, real = self._forms(subject.value, workspace)
        reason = None
        roots = self._roots(workspace)
        for form in (lexical, real):
            root = next((r for r in roots if form == r or form.is_relative_to(r)), None)
            if root is None:
                reason = f"{subject.value} is outside the workspace"
                break
            found = protected_reason(form.relative_to(root).parts)
            if found:
                reason = f"{subject.value}: {found}"
                break
        if reason is None:
            root = next((r for r in roots if real == r or real.is_relative_to(r)), None)
            found = git_refusal(real, root) if root is not None else None
            if found:
                reason = f"{subject.value}: {found} (git-dir protection)"
        if reason is None:
            return self._next_action_floor(subject, workspace, mode)
        if shell:
            return PolicyDecision(PolicyVerdict.ASK, f"a shell redirect writes to {reason}; never auto-approved", "floor")
        return PolicyDecision(PolicyVerdict.DENY, f"{reason}; file tools never write there", "floor")

    def _next_action_floor(self, subject: PolicySubject, workspace: Path, mode: str) -> PolicyDecision | None:
        """A write to a file that runs code at the user's next ordinary action asks a person in
        every mode but bypass (a headless run refuses it)."""
        if mode == Mode.BYPASS:
            return None
        for form in self._forms(subject.value, workspace):
            root = next((r for r in self._roots(workspace) if form == r or form.is_relative_to(r)), None)
            found = next_action_reason(form.relative_to(root).parts, root) if root is not None else None
            if found:
                return PolicyDecision(PolicyVerdict.ASK, f"{subject.value}: {found}; never auto-approved", "floor")
        return None

    def _unknowable_floor(self, subjects: list[PolicySubject]) -> PolicyDecision | None:
        """Deny and ask rules must hold wherever a command hides; a command only known when it
        runs (``$(which rm) -rf x``, ``eval "$X"``) cannot be checked against them, so while any
        such rule exists for the tool it always asks, even in bypass."""
        for subject in subjects:
            if subject.kind != "command" or UNKNOWN_COMMAND not in subject.opaque:
                continue
            rule = self.rules.restricting(subject.tool)
            if rule is not None:
                return PolicyDecision(
                    PolicyVerdict.ASK,
                    f"{subject.value!r} runs {UNKNOWN_COMMAND}, so the rule {rule} cannot be checked against it",
                    "floor",
                )
        return None

    def _rule_verdict(self, subject: PolicySubject, workspace: Path) -> tuple[PolicyVerdict | None, str]:
        if subject.kind != "path":
            verdict, rule = self.rules.verdict(subject, workspace)
            if verdict is PolicyVerdict.ALLOW and subject.opaque:
                return None, ""  # only plain commands can be allowed by a rule
            return verdict, rule.text if rule else ""
        found: list[tuple[PolicyVerdict | None, str]] = []
        for form in self._forms(subject.value, workspace):
            form_subject = PolicySubject(subject.tool, _relative(form, workspace), subject.kind, subject.writes)
            verdict, rule = self.rules.verdict(form_subject, workspace)
            found.append((verdict, rule.text if rule else ""))
        for strongest in (PolicyVerdict.DENY, PolicyVerdict.ASK):
            for verdict, text in found:
                if verdict is strongest:
                    return verdict, text
        if all(verdict is PolicyVerdict.ALLOW for verdict, _ in found):
            return PolicyVerdict.ALLOW, found[0][1]
        return None, ""

    # ------------------------------------------------------------------ decision

    def use_contributors(self, contributors: list[PolicyContributor]) -> None:
        """The contributors of the registry now in use (a plugin's process extension came or went)."""
        self._contributors = contributors

    async def evaluate(self, tool: ToolExecutor, call: ToolCall, ctx: ToolExecutionContext) -> PolicyDecision:
        workspace = Path(ctx.workspace)
        mode = ctx.mode or self.mode
        subjects = self._subjects(tool, call, workspace)
        decision = self._decide(mode, tool, call, subjects, workspace)
        if self._repeat_count(ctx.thread_id, ctx.turn_id, call) >= REPEAT_LIMIT:
            repeat = PolicyDecision(PolicyVerdict.ASK, f"the same {call.name} call {REPEAT_LIMIT} times in a row", "repeat")
            if _RANK[repeat.verdict] >= _RANK[decision.verdict]:
                decision = repeat
        for contributor in self._contributors:
            decision = stricter(decision, await contributor.review(ctx, call))
        if self._audit is not None:
            self._audit(
                "policy.decision",
                {
                    "thread": ctx.thread_id,
                    "turn": ctx.turn_id,
                    "call": ctx.call_id,
                    "tool": call.name,
                    "mode": mode,
                    "subjects": [f"{s.kind}:{s.value}" for s in subjects],
                    "verdict": decision.verdict.value,
                    "reason": decision.reason,
                    "source": decision.source,
                },
            )
        return decision

    def allows_in(self, mode: str, tool: ToolExecutor, call: ToolCall, workspace: Path) -> bool:
        """Whether rules, ``mode`` and the floors would allow this call without asking (no side
        effects: nothing is counted or audited); used to hint a way out of a headless denial."""
        subjects = self._subjects(tool, call, Path(workspace))
        return self._decide(mode, tool, call, subjects, Path(workspace)).verdict is PolicyVerdict.ALLOW

    def has_floor(self, subjects: list[PolicySubject], workspace: Path) -> bool:
        """Whether a protected, outside-workspace or unknowable target keeps asking whatever the
        rules and the mode say."""
        self._forms_memo.clear()
        if self._unknowable_floor(subjects) is not None:
            return True
        return any(self._write_floor(subject, Path(workspace)) is not None for subject in subjects)

    def _subjects(self, tool: ToolExecutor, call: ToolCall, workspace: Path) -> list[PolicySubject]:
        self._forms_memo.clear()
        return [s for s in subjects_of(tool, call, workspace) if not (s.kind == "path" and s.value in HARMLESS_TARGETS)]

    def _decide(
        self, mode: str, tool: ToolExecutor, call: ToolCall, subjects: list[PolicySubject], workspace: Path
    ) -> PolicyDecision:
        """Rules, then the mode, then the floors (protected, git-dir and outside-workspace writes,
        commands only known when they run)."""
        verdicts = [self._rule_verdict(s, workspace) for s in subjects]
        denied = next((text for verdict, text in verdicts if verdict is PolicyVerdict.DENY), None)
        asked = next((text for verdict, text in verdicts if verdict is PolicyVerdict.ASK), None)
        base = mode_decision(mode, tool, subjects, call.arguments)
        if denied is not None:
            decision = PolicyDecision(PolicyVerdict.DENY, f"denied by the rule {denied}", "rule")
        elif asked is not None and mode != Mode.BYPASS:
            decision = PolicyDecision(PolicyVerdict.ASK, f"the rule {asked} asks", "rule")
        elif subjects and all(v is PolicyVerdict.ALLOW for v, _ in verdicts) and base.verdict is not PolicyVerdict.DENY:
            decision = PolicyDecision(PolicyVerdict.ALLOW, f"allowed by the rule {verdicts[0][1]}", "rule")
        else:
            decision = base
            opaque = next((s.opaque for s in subjects if s.opaque), "")
            if opaque and decision.verdict is PolicyVerdict.ASK:
                decision = PolicyDecision(
                    PolicyVerdict.ASK,
                    f"the shell parser found {opaque}; only plain commands of literal words can be allowed by a "
                    f"rule, so this one needs approval ({mode} mode)",
                    "parser",
                )
        if decision.verdict is PolicyVerdict.ASK and self._session_allows(subjects):
            decision = PolicyDecision(PolicyVerdict.ALLOW, "allowed for this session", "session")
        floors = [self._write_floor(subject, workspace, mode) for subject in subjects]
        floors.append(self._unknowable_floor(subjects))
        for floor in floors:
            # A floor replaces an equal verdict too: its reason is the one the user must see, and
            # its source tells hooks it cannot be lifted.
            if floor is not None and _RANK[floor.verdict] >= _RANK[decision.verdict]:
                decision = floor
        return decision

    # ------------------------------------------------------------------ rules from approvals

    def suggest_rules(self, subjects: list[PolicySubject], workspace: Path) -> list[str]:
        """The exact rules an "always" approval saves: one per subject that rules do not allow
        yet. Protected and outside-workspace targets get none (they always ask), and a command
        the shell parser does not fully understand gets none at all (no rule could allow it)."""
        rules: list[str] = []
        self._forms_memo.clear()
        if any(subject.opaque for subject in subjects):
            return rules
        for subject in subjects:
            if subject.kind == "path" and subject.value in HARMLESS_TARGETS:
                continue
            if self._write_floor(subject, Path(workspace)) is not None:
                continue
            if self._rule_verdict(subject, Path(workspace))[0] is PolicyVerdict.ALLOW:
                continue
            rule = _rule_for(subject, Path(workspace))
            if rule not in rules:
                rules.append(rule)
        return rules

    def add_rule(self, verdict: str, text: str) -> None:
        self.rules.add(verdict, text)


def _rule_for(subject: PolicySubject, workspace: Path) -> str:
    if subject.kind == "command":
        return f"{subject.tool}({escape_command(subject.value)})"
    if subject.kind == "path":
        lexical, _ = _path_forms(subject.value, workspace)
        shown = _relative(lexical, workspace)
        if "/" not in shown:
            shown = "./" + shown  # exactly this file, not every file of that name
        return f"{'edit' if subject.writes else 'read'}({shown})"
    if subject.kind == "domain":
        return f"{subject.tool}(domain:{subject.value})"
    return f"{subject.tool}({subject.value})" if subject.value else subject.tool
