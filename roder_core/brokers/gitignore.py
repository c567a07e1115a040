"""A .gitignore matcher, so listing and search tools skip what git skips even without git.

Implements the gitignore pattern rules (comments, ``!`` negation, trailing ``/`` for folders,
anchoring when a ``/`` appears, ``*``, ``?``, ``[...]`` and ``**``). Rules from nested
``.gitignore`` files apply below their folder; the last matching rule wins, and a path inside an
ignored folder stays ignored whatever rule names it (git never looks inside such a folder, so a
``!`` cannot bring a file back from it). A pattern git cannot parse (an unclosed ``[``) matches
nothing, as in git. ``tests/brokers/test_ignore_rules_vs_git.py`` checks these rules, and
ripgrep's (the ``glob`` tool's walker), against ``git check-ignore`` on the same tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class IgnoreRule:
    base: str  # posix folder the rule file lives in, relative to the walk root ("" for the root)
    #: Matches the path itself (relative to ``base``); what lies below is decided by its folders.
    exact: re.Pattern[str]
    negate: bool
    dir_only: bool


def glob_to_regex(pattern: str) -> str:
    """Glob -> regex body; ``*`` and ``?`` never cross a ``/``, ``**`` does."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        elif ch == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(ch))
            i += 1
    return "".join(out)


def parse_rule(line: str, base: str = "") -> IgnoreRule | None:
    """One .gitignore line -> a rule (None for blanks and comments)."""
    text = line.rstrip("\n").rstrip("\r")
    if not text.strip() or text.startswith("#"):
        return None
    # trailing spaces are ignored unless escaped
    while text.endswith(" ") and not text.endswith("\\ "):
        text = text[:-1]
    negate = text.startswith("!")
    if negate or text.startswith("\\!") or text.startswith("\\#"):
        text = text[1:]
    dir_only = text.endswith("/")
    text = text.rstrip("/")
    if not text or _unclosed_class(text):
        return None
    anchored = "/" in text
    text = text.lstrip("/")
    body = glob_to_regex(text)
    head = "^" if anchored else "^(?:.*/)?"
    return IgnoreRule(
        base=base,
        exact=re.compile(f"{head}{body}$", re.DOTALL),
        negate=negate,
        dir_only=dir_only,
    )


def _unclosed_class(pattern: str) -> bool:
    """Whether a ``[`` opens a class that never closes (git's matcher then matches nothing)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[" and pattern.find("]", i + 1) == -1:
            return True
        i += 1
    return False


def parse_rules(text: str, base: str = "") -> list[IgnoreRule]:
    return [rule for line in text.splitlines() if (rule := parse_rule(line, base)) is not None]


class IgnoreMatcher:
    """Rules collected from one or more ignore files, matched against root-relative paths."""

    def __init__(self, rules: list[IgnoreRule] | None = None) -> None:
        self.rules: list[IgnoreRule] = list(rules or [])

    def extend(self, rules: list[IgnoreRule]) -> IgnoreMatcher:
        return IgnoreMatcher([*self.rules, *rules])

    def ignored(self, rel_path: str, is_dir: bool, *, below: str = "") -> bool:
        """Whether ``rel_path`` (posix, relative to the walk root) is ignored: one of its folders
        is, or the last rule matching the path itself is not a ``!`` rule. Folders down to
        ``below`` are not asked (a folder named explicitly is listed as asked)."""
        parts = rel_path.split("/")
        skip = len(below.split("/")) if below not in ("", ".") else 0
        for depth in range(skip + 1, len(parts)):
            if self.excluded("/".join(parts[:depth]), True):
                return True
        return self.excluded(rel_path, is_dir)

    def excluded(self, rel_path: str, is_dir: bool) -> bool:
        """The path's own verdict, its folders taken as not ignored: what a walker asks, since it
        never descends into an ignored folder. A rule ending in ``/`` matches folders only."""
        for rule in reversed(self.rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                prefix = rule.base + "/"
                if not rel_path.startswith(prefix):
                    continue
                local = rel_path[len(prefix) :]
            else:
                local = rel_path
            if rule.exact.match(local) is not None:
                return not rule.negate
        return False
