"""``allowed-tools`` of a skill or slash command: the calls it pre-approves.

Claude Code spells them ``Read``, ``Grep``, ``Bash(git log:*)``. A bare tool name pre-approves
every call of that tool; a ``Bash(...)`` pattern pre-approves a shell command only when every
part of it (read with the same parser as policy rules) is a plain command the pattern matches,
so ``git log; rm -rf x`` or ``git log > notes.txt`` are never pre-approved. Denies still win:
this only turns an "ask" into "allow".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roder_core.kernel.services import PolicyVerdict
from roder_core.policy.commandline import shell_subjects
from roder_core.policy.rules import PolicyRuleError, Rule, RuleSet


def _rule(entry: str) -> Rule | None:
    """``Bash(git log:*)`` -> rule ``bash(git log:*)`` (``git log`` and ``git log ...``);
    ``Read`` -> ``read``."""
    tool, paren, rest = entry.partition("(")
    text = tool.strip().lower() + (paren + rest if paren else "")
    try:
        return Rule.parse(text)
    except PolicyRuleError:
        return None


def allowed_by(allowed_tools: list[str] | None, tool: str, arguments: dict[str, Any], cwd: str) -> bool:
    """Whether ``allowed_tools`` pre-approve calling ``tool`` with ``arguments`` in ``cwd``."""
    rules = [rule for rule in map(_rule, allowed_tools or []) if rule is not None]
    for rule in rules:
        if rule.spec is None and rule.tool == tool.lower():
            return True
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        return False
    patterns = RuleSet(allow=[rule.text for rule in rules if rule.spec is not None])
    subjects = shell_subjects(tool, command, str(arguments.get("workdir") or ""))
    return all(
        subject.kind == "command" and not subject.opaque and patterns.verdict(subject, Path(cwd))[0] is PolicyVerdict.ALLOW
        for subject in subjects
    )
