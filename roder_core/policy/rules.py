"""Configured policy rules: ``[policy]`` allow / ask / deny lists in config.toml.

A rule is ``tool`` or ``tool(spec)``; the tool part is a glob over tool names
(``mcp__server__*``). What the spec matches depends on the subject a tool reports:

- commands (``bash(git status*)``): a glob over one command part; ``*`` matches anything,
  ``\\*`` a literal star; a trailing ``:*`` also means "this prefix, then a space and anything"
  (``bash(npm run test:*)`` matches ``npm run test``, ``npm run test -- -x`` and
  ``npm run test:unit``);
- paths (``edit(src/**)``, ``read(.env)``): gitignore-style globs; relative to the workspace,
  ``/abs/...`` absolute, ``~/...`` in your home; a pattern without ``/`` matches that name at any
  depth (``./name`` only at the top). ``edit(...)`` covers every write to a path (write, edit, apply_patch, shell redirects);
  ``read(...)`` every read of one (read, grep, glob, ls, ``<`` redirects);
- domains (``web_fetch(domain:*.python.org)``): a glob over the host name.

Deny wins over ask, ask over allow.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from roder_core.brokers.path_rules import RULE_SYNTAX, path_matches
from roder_core.kernel.services import PolicyVerdict
from roder_core.kernel.tools import PolicySubject
from roder_core.settings.config import ConfigError

#: Strongest first: the first verdict with a matching rule wins.
VERDICTS = (PolicyVerdict.DENY, PolicyVerdict.ASK, PolicyVerdict.ALLOW)


class PolicyRuleError(ConfigError):
    """A rule in [policy] that cannot be parsed; the message quotes it."""


@lru_cache(maxsize=1024)
def _command_regex(spec: str) -> re.Pattern[str]:
    spec = " ".join(spec.split())
    out: list[str] = []
    i = 0
    while i < len(spec):
        if spec.startswith("\\*", i):
            out.append(re.escape("*"))
            i += 2
        elif spec[i] == "*":
            out.append(".*")
            i += 1
        else:
            out.append(re.escape(spec[i]))
            i += 1
    alternatives = ["".join(out)]
    if spec.endswith(":*") and not spec.endswith("\\:*"):
        alternatives.append(re.escape(spec[:-2]) + "(?: .*)?")
    return re.compile("^(?:" + "|".join(alternatives) + ")$", re.DOTALL)


#: Commands that run the command given in their arguments (``sudo rm ...``).
_WRAPPERS = frozenset(
    {
        "env",
        "coproc",
        "command",
        "exec",
        "nohup",
        "nice",
        "timeout",
        "sudo",
        "doas",
        "xargs",
        "time",
        "builtin",
        "stdbuf",
        "setsid",
        "chroot",
        "unbuffer",
        "ionice",
        "taskset",
        "watch",
        "busybox",
    }
)
#: Options after which ``find`` and friends run the rest as a command.
_EXEC_OPTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_forms(command: str) -> list[str]:
    """The ways a deny or ask rule may see one command part: as written, without ``VAR=x``
    prefixes, with the command word's folder dropped (``/bin/rm`` -> ``rm``), and, after a
    wrapper command (``sudo -u x``, ``env``, ``timeout 5``, ``xargs``...), every tail of its
    arguments, since any of them may be the command it runs."""
    forms = [" ".join(command.split())]
    pending = [command.split()]
    while pending:
        words = pending.pop()
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            continue
        if "/" in words[0]:
            words = [words[0].rsplit("/", 1)[1], *words[1:]]
        forms.append(" ".join(words))
        for index, word in enumerate(words[:-1]):
            if word in _EXEC_OPTIONS and len(forms) < 64:  # find -exec rm {} ;
                pending.append(words[index + 1 :])
        if words[0] in _WRAPPERS and len(forms) < 64:
            pending.extend(words[i:] for i in range(len(words) - 1, 0, -1))
    return list(dict.fromkeys(f for f in forms if f))


def folder_spelled_out(spec: str, command: str) -> bool:
    """When the command word is a path (``ls/../../bin/sh``, ``./scripts/x``), an allow rule must
    spell out its folder literally, so ``ls*`` never runs a program from a folder that merely
    starts with ``ls``."""
    word = command.split(" ", 1)[0] if command.strip() else ""
    if "/" not in word:
        return True
    folder = word[: word.rindex("/") + 1]
    literal = " ".join(spec.split()).replace("\\*", "\0").split("*", 1)[0].replace("\0", "*")
    return literal.startswith(folder)


def escape_command(command: str) -> str:
    """A command as an exact rule spec (its stars made literal)."""
    return " ".join(command.split()).replace("*", "\\*")


@dataclass(frozen=True)
class Rule:
    text: str
    tool: str
    spec: str | None

    @classmethod
    def parse(cls, text: str) -> Rule:
        match = RULE_SYNTAX.match(text)
        if match is None:
            raise PolicyRuleError(f"policy rule {text!r}: expected tool or tool(pattern), e.g. bash(git status*)")
        tool, spec = match.group(1), match.group(2)
        if spec is not None and not spec.strip():
            raise PolicyRuleError(f"policy rule {text!r}: empty pattern in ()")
        return cls(text.strip(), tool, spec.strip() if spec is not None else None)

    def _tool_matches(self, subject: PolicySubject) -> bool:
        if subject.kind == "path" and self.tool in ("edit", "read"):
            return subject.writes == (self.tool == "edit")
        if subject.kind == "path" and subject.tool == "bash":
            return False  # bash(...) patterns are about commands; redirects are edit()/read()
        return fnmatchcase(subject.tool, self.tool)

    def matches(self, subject: PolicySubject, workspace: Path) -> bool:
        if not self._tool_matches(subject):
            return False
        if self.spec is None:
            return True
        if self.spec.startswith("domain:"):
            return subject.kind == "domain" and fnmatchcase(subject.value.lower(), self.spec[7:].strip().lower())
        if subject.kind == "command":
            return _command_regex(self.spec).match(" ".join(subject.value.split())) is not None
        if subject.kind == "path":
            return path_matches(self.spec, subject.value, workspace)
        return subject.kind != "domain" and fnmatchcase(subject.value, self.spec)


class RuleSet:
    """The allow / ask / deny rules in effect (user config plus a trusted project's)."""

    def __init__(self, allow: list[str] = (), ask: list[str] = (), deny: list[str] = ()) -> None:  # type: ignore[assignment]
        self.rules: dict[PolicyVerdict, list[Rule]] = {verdict: [] for verdict in PolicyVerdict}
        for verdict, texts in ((PolicyVerdict.ALLOW, allow), (PolicyVerdict.ASK, ask), (PolicyVerdict.DENY, deny)):
            for text in texts:
                self.add(verdict, text)

    def add(self, verdict: PolicyVerdict | str, text: str) -> Rule:
        verdict = PolicyVerdict(verdict)  # config and callers may still say "allow"
        rule = Rule.parse(text)
        if all(r.text != rule.text for r in self.rules[verdict]):
            self.rules[verdict].append(rule)
        return rule

    def restricting(self, tool: str) -> str | None:
        """The text of a deny or ask rule with a pattern for ``tool``, if any."""
        for verdict in (PolicyVerdict.DENY, PolicyVerdict.ASK):
            for rule in self.rules[verdict]:
                if rule.spec is not None and fnmatchcase(tool, rule.tool):
                    return rule.text
        return None

    def has_refusals(self) -> bool:
        return bool(self.rules[PolicyVerdict.DENY] or self.rules[PolicyVerdict.ASK])

    def gate_key(self) -> Hashable:
        """Live rules (``add`` changes them): a shared content gate is keyed by this object."""
        return self

    def read_rule(self, path: str, workspace: Path) -> tuple[str, str] | None:
        """The strongest deny or ask rule about reading ``path`` (workspace-relative posix or
        absolute), as ("deny" | "ask", its text): what ``brokers.content_gate`` withholds."""
        subject = PolicySubject(tool="read", value=path, kind="path", writes=False)
        for verdict in (PolicyVerdict.DENY, PolicyVerdict.ASK):
            for rule in self.rules[verdict]:
                if rule.matches(subject, workspace):
                    return verdict.value, rule.text
        return None

    def verdict(self, subject: PolicySubject, workspace: Path) -> tuple[PolicyVerdict | None, Rule | None]:
        """The strongest verdict any rule gives this subject (deny > ask > allow), or None.

        Deny and ask rules see every form of a command (see ``command_forms``); an allow rule
        sees it only as written, and must spell out a command path's folder."""
        forms = [subject]
        if subject.kind == "command":
            forms = [replace(subject, value=form) for form in command_forms(subject.value)] or [subject]
        for verdict in VERDICTS:
            for rule in self.rules[verdict]:
                if verdict is PolicyVerdict.ALLOW:
                    if rule.matches(subject, workspace) and (
                        subject.kind != "command" or rule.spec is None or folder_spelled_out(rule.spec, subject.value)
                    ):
                        return verdict, rule
                elif any(rule.matches(form, workspace) for form in forms):
                    return verdict, rule
        return None, None
