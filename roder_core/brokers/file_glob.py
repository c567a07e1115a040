"""Finding files by name pattern: ripgrep's walker, started at the pattern's literal folder.

A Python walk of the whole workspace costs a ``stat`` per file whatever the pattern; in a
100,000-file tree that is seconds. ``rg --files`` walks the same tree in parallel with the same
ignore rules (``tests/brokers/test_ignore_rules_vs_git.py`` checks both against ``git
check-ignore``), so the brokers ask it for the candidate files and keep the exact matching here:

- the walk starts at the pattern's leading folders without glob characters (``pkg7/mod777``
  for ``pkg7/mod777/*.py``) and goes no deeper than the pattern can reach;
- ripgrep's own ``--glob`` is never used to pick files: it overrides the ignore rules (a
  ``--glob '*.py'`` lists a git-ignored ``secret.py``). A file-name filter goes through a
  ripgrep *type*, which applies after them, and only when ripgrep's glob syntax reads the name
  pattern exactly as ours does;
- ripgrep is given absolute paths: ripgrep 13 drops anchored rules (``/build``, ``a/b``) of
  ignore files above a relative start folder.

ripgrep lists regular files only (it neither follows nor lists symbolic links), like the grep
tool that searches them. Without ripgrep the callers walk in Python from the same folder.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

from roder_core.brokers import BrokerDenied, FileInfo, FileSystemBroker
from roder_core.brokers.gitignore import glob_to_regex
from roder_core.brokers.host_programs import system_program

#: Characters that make a pattern segment a glob rather than a literal name.
_GLOB_CHARS = frozenset("*?[{\\")
#: A name pattern ripgrep's glob syntax reads exactly as ``glob_to_regex`` does.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._*?+@%=,~ -]+")
#: How long a listing may take before the caller is told to narrow it.
LIST_TIMEOUT = 60.0


class ListingTimeout(TimeoutError):
    """ripgrep did not finish listing within ``LIST_TIMEOUT``."""


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A gitignore-style glob: without ``/`` it matches a name at any depth, ``**`` spans
    folders, ``{a,b}`` is either (as in a shell: ``src/*.{ts,tsx}``, ``{src,test}/**``), and a
    leading ``!`` matches every path the rest does not (``!*.txt``, as ripgrep's ``--glob``)."""
    text = pattern.strip()
    negated = text.startswith("!")  # ripgrep's and gitignore's "every file but these"
    bodies = []
    for alternative in expand_braces(text.removeprefix("!").removeprefix("./")):
        body = alternative.removeprefix("./")
        bodies.append(("" if "/" in body else "(?:.*/)?") + glob_to_regex(body))
    either = "(?:" + "|".join(bodies) + ")"
    return re.compile(f"^(?!{either}$).*$" if negated else f"^{either}$", re.DOTALL)


#: How many patterns one with braces may stand for (``{a,b}{c,d}`` is four).
MAX_BRACE_ALTERNATIVES = 256


def expand_braces(pattern: str) -> list[str]:
    """The patterns a shell's brace expansion makes of ``pattern`` (``*.{ts,tsx}`` is ``*.ts``
    and ``*.tsx``; nested braces too). A brace without a comma at its level, or unclosed, is a
    literal character; a backslash escapes the next one."""
    depth, start, index = 0, -1, 0
    commas: list[int] = []
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
            if depth == 1:
                start, commas = index, []
        elif char == "," and depth == 1:
            commas.append(index)
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                prefix, suffix = pattern[:start], pattern[index + 1 :]
                if not commas:  # "{x}" is literal: keep it and expand what follows
                    return [pattern[: index + 1] + rest for rest in expand_braces(suffix)]
                bounds = [start, *commas, index]
                parts = [pattern[a + 1 : b] for a, b in itertools.pairwise(bounds)]
                out: list[str] = []
                for part in parts:
                    out += expand_braces(prefix + part + suffix)
                    if len(out) > MAX_BRACE_ALTERNATIVES:
                        raise ValueError(f"{pattern!r} stands for more than {MAX_BRACE_ALTERNATIVES} patterns; use fewer braces")
                return out
        index += 1
    return [pattern]


def literal_folder(pattern: str) -> tuple[str, int | None]:
    """The pattern's leading folders without glob characters (where a walk can start, relative
    to the folder the pattern is relative to) and how many levels below it a match can lie
    (None: any depth). A pattern without ``/`` matches names at any depth: ``("", None)``."""
    body = pattern.strip().removeprefix("./")
    if "/" not in body or body.startswith(("/", "!")):  # "!...": every file but those, anywhere
        return "", None
    parts = body.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if part in ("", ".", "..") or _GLOB_CHARS & set(part):
            break
        literal.append(part)
    rest = parts[len(literal) :]
    return "/".join(literal), None if any("**" in part for part in rest) else len(rest)


class RipgrepQuery(NamedTuple):
    """How ripgrep lists the candidates of a pattern: from ``literal`` (relative to the
    pattern's folder), at most ``max_depth`` levels down, files named as ``name``; ``exact``
    when these are exactly the pattern's matches (no check of each path needed)."""

    literal: str
    max_depth: int | None
    name: str | None
    exact: bool


def ripgrep_query(pattern: str) -> RipgrepQuery:
    literal, depth = literal_folder(pattern)
    rest = pattern.strip().removeprefix("./")[len(literal) :].strip("/").split("/")
    name = name_type(rest[-1])
    return RipgrepQuery(literal, depth, name, name is not None and all(part == "**" for part in rest[:-1]))


def name_type(name: str) -> str | None:
    """The last segment of a pattern as a ripgrep type glob, when ripgrep reads it exactly as
    ``glob_to_regex`` does (no classes, braces or escapes, and no ``**``); else None."""
    if "**" in name or _PLAIN_NAME.fullmatch(name) is None:
        return None
    return name


def ripgrep() -> str | None:
    """The ``rg`` Roder lists files with on this machine, unconfined: the system's
    (``host_programs``), never one the agent's commands left in a workspace folder on the PATH."""
    return system_program("rg")


def ripgrep_files(start: Path, *, max_depth: int | None = None, name: str | None = None) -> list[str] | None:
    """Absolute paths of the files below ``start`` that the ignore rules keep (``.gitignore``
    files from the workspace down and ``.git/info/exclude``; never ``.git``), unsorted; None
    when ripgrep is not installed. ``name`` (from ``name_type``) keeps only files so named."""
    rg = ripgrep()
    if rg is None:
        return None
    argv = [
        rg,
        "--files",
        "--no-config",
        "--hidden",
        "--no-require-git",
        "--no-ignore-dot",
        "--no-ignore-global",
        "--no-messages",
        "--null",
        "--glob=!.git",
    ]
    if max_depth is not None:
        argv.append(f"--max-depth={max_depth}")
    if name is not None:
        argv += [f"--type-add=roderglob:{name}", "--type=roderglob"]
    argv += ["--", str(start)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=LIST_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ListingTimeout(f"listing the files took longer than {LIST_TIMEOUT:.0f} s") from None
    if done.returncode not in (0, 1, 2):  # 2: some folders could not be read; the rest is listed
        return None
    return os.fsdecode(done.stdout).split("\0")[:-1]  # each path ends with a NUL


def relative_to(display: str, base: str) -> str:
    """``display`` relative to the folder ``base`` (both as the broker displays them)."""
    if base == ".":
        return display
    return display[len(base) + 1 :] if display.startswith(base + "/") else display


def start_folder(base: str, literal: str) -> str:
    """Where a walk for a pattern relative to ``base`` starts (``literal_folder``'s folder)."""
    if not literal:
        return base
    return literal if base == "." else f"{base}/{literal}"


def newest_first(found: list[FileInfo], limit: int) -> tuple[list[FileInfo], int]:
    """The ``limit`` newest of ``found`` (ties by path), and how many there were."""
    found.sort(key=lambda info: (-info.mtime, info.display))
    return found[:limit], len(found)


def newest_keys(paths: list[str]) -> list[tuple[float, str]]:
    """``(-mtime, path)`` for each of ``paths`` still there: the sort key of "newest first, ties
    by path". One ``lstat`` each is all "newest first" needs; the loop is kept bare (no context
    manager, no object per path but the key), as it runs once per match of a listing."""
    keys: list[tuple[float, str]] = []
    append, lstat = keys.append, os.lstat
    for path in paths:
        try:
            append((-lstat(path).st_mtime, path))
        except OSError:  # removed since it was listed
            continue
    return keys


def walk_matches(
    fs: FileSystemBroker, path: str, pattern: str, limit: int, withheld: list[str] | None = None
) -> tuple[list[FileInfo], int]:
    """``find_files`` by the broker's own walk, from the pattern's literal folder: for a
    runner's files, and where ripgrep is not installed. Matching files the content gate refuses
    are named in ``withheld``."""
    base = fs.display(fs.resolve(path))
    literal, _depth = literal_folder(pattern)
    regex = pattern_regex(pattern)
    refused: list[str] = []
    try:
        walked = fs.walk(start_folder(base, literal), withheld=refused)
        found = [info for info in walked if regex.match(relative_to(info.display, base))]
    except (FileNotFoundError, NotADirectoryError, BrokerDenied):
        if not literal:
            raise
        found = []  # the literal folder is missing, or a symlink the walk would not follow
    if withheld is not None:
        withheld += [name for name in refused if regex.match(relative_to(name, base))]
    return newest_first(found, limit)
