"""A .gitignore matcher, so listing and search tools skip what git skips even without git.

Implements the gitignore pattern rules (comments, ``!`` negation, trailing ``/`` for folders,
anchoring when a ``/`` appears, ``*``, ``?``, ``[...]`` and ``**``). Rules from nested
``.gitignore`` files apply below their folder; the last matching rule wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class IgnoreRule:
    base: str  # posix folder the rule file lives in, relative to the walk root ("" for the root)
    #: Matches the path itself or anything below it.
    regex: re.Pattern[str]
    #: Matches the path itself only (a dir-only rule must not match a file of that name).
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
    if not text:
        return None
    anchored = "/" in text
    text = text.lstrip("/")
    body = glob_to_regex(text)
    head = "^" if anchored else "^(?:.*/)?"
    return IgnoreRule(
        base=base,
        regex=re.compile(f"{head}{body}(?:/.*)?$", re.DOTALL),
        exact=re.compile(f"{head}{body}$", re.DOTALL),
        negate=negate,
        dir_only=dir_only,
    )


def parse_rules(text: str, base: str = "") -> list[IgnoreRule]:
    return [rule for line in text.splitlines() if (rule := parse_rule(line, base)) is not None]


class IgnoreMatcher:
    """Rules collected from one or more ignore files, matched against root-relative paths."""

    def __init__(self, rules: list[IgnoreRule] | None = None) -> None:
        self.rules: list[IgnoreRule] = list(rules or [])

    def extend(self, rules: list[IgnoreRule]) -> IgnoreMatcher:
        return IgnoreMatcher([*self.rules, *rules])

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether ``rel_path`` (posix, relative to the walk root) is ignored.

        A rule ending in ``/`` only matches the folder itself; what lies inside is ignored
        because walkers do not descend into ignored folders.
        """
        verdict = False
        for rule in self.rules:
            if rule.base:
                prefix = rule.base + "/"
                if not rel_path.startswith(prefix):
                    continue
                local = rel_path[len(prefix) :]
            else:
                local = rel_path
            if rule.regex.match(local) is None:
                continue
            # A dir-only rule matches a folder itself, or a path below a matched folder.
            if rule.dir_only and not is_dir and rule.exact.match(local) is not None:
                continue
            verdict = not rule.negate
        return verdict
