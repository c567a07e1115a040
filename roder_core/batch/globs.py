"""Workspace paths for scoring: glob matching, listing every file, and writing a file back
without following anything the agent put on the way.

Glob rules: a pattern without ``/`` matches a name at any depth (``conftest.py``); a pattern
with ``/`` matches from the workspace root (``tests/**``, ``src/pkg/test_*.py``); a pattern
that names a folder covers everything in it; a leading ``/`` anchors even a bare name at the root
(only Roder's own patterns: task globs are relative). ``.git`` is never matched.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from roder_core.brokers import repairs


@functools.cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    body = pattern.strip("/")
    if "/" not in body and not pattern.startswith("/"):  # a leading "/" anchors a name at the root
        body = "**/" + body
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?")


def matches(relative: str, patterns: Iterable[str]) -> bool:
    """Whether a workspace-relative POSIX path is covered by one of the globs."""
    return any(_glob_regex(p).fullmatch(relative) for p in patterns)


def files_under(root: Path) -> Iterator[str]:
    """Every file and symlink under ``root`` as a relative POSIX path (``.git`` left out)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" or Path(folder) != root]
        base = Path(folder).relative_to(root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            yield (base / name).as_posix()


def remove_file(root: Path, relative: str) -> None:
    """Remove a file found by ``files_under``, through folder handles (``brokers.repairs``): a
    folder on the way that became a link since is never followed out of the workspace."""
    repairs.remove_file(root, Path(relative))
