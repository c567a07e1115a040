"""``apply_patch {patch}``: several file changes in one call, all or nothing.

The format::

    *** Begin Patch
    *** Add File: path          lines follow, each starting with "+"
    *** Delete File: path
    *** Update File: path
    *** Move to: new/path       (optional, right after Update File)
    @@ optional line to find first (a def or class header)
     context line (leading space)
    -removed line
    +added line
    *** End of File             (optional: the hunk ends at the end of the file)
    *** End Patch

A unified diff (``--- a/x`` / ``+++ b/x`` / ``@@`` hunks) and a patch in a Markdown code fence
are read as the same changes (``from_unified_diff``, ``_unfenced``).

Hunks are located after the previous hunk, matching exactly, then ignoring trailing
whitespace, then ignoring surrounding whitespace (added lines are then re-indented to the
file's indentation), then also reading typographic punctuation as ASCII; context lines keep
the file's own text. Every change is computed before anything is
written; if a write fails, the files already written are restored.
"""

from __future__ import annotations

import bisect
import posixpath
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import Field

from roder_core.brokers import FileSystemBroker
from roder_core.ir import FileChange
from roder_core.kernel.file_ledger import digest_of
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments, path_as_meant
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolResult

from .common import BuiltinTool, TextFile, ToolInputError, file_change_result, json_unescaped, path_key, unified_diff
from .edit import closest_line
from .freshness import changed_since_note, record
from .matching import IndentMismatch, Reindenter, already_there, normalize_punctuation
from .validity import syntax_regression
from .write import changeable_bytes, current_text

BEGIN, END = "*** Begin Patch", "*** End Patch"
NO_NEWLINE = "\\ No newline at end of file"
ADD, DELETE, UPDATE, MOVE, EOF = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: ", "*** End of File"


class PatchError(ToolInputError):
    """The patch is malformed or does not apply; nothing was changed."""


@dataclass
class Hunk:
    header: str | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text)
    at_eof: bool = False
    #: A unified diff's ``@@ -N,...`` start line: never trusted to place the hunk, only to
    #: choose among several places its lines match.
    line_hint: int | None = None
    #: ``\ No newline at end of file`` after its old (``-`` or context) or new (``+`` or
    #: context) last line: that side of the file ends without a line break.
    old_unterminated: bool = False
    new_unterminated: bool = False

    @property
    def new(self) -> list[str]:
        return [text for op, text in self.lines if op != "-"]

    @property
    def old(self) -> list[str]:
        return [text for op, text in self.lines if op != "+"]


@dataclass
class Operation:
    kind: str  # add | delete | update
    path: str
    move_to: str | None = None
    content: list[str] = field(default_factory=list)  # add
    unterminated: bool = False  # add: ``\ No newline at end of file`` after its last line
    hunks: list[Hunk] = field(default_factory=list)  # update


#: ``[cd DIR &&] apply_patch <<'EOF'`` or ``apply_patch "$(cat <<'EOF'``, up to the end of its line.
_HEREDOC = re.compile(
    r"""^(?:cd[ \t]+(?P<dir>'[^']*'|"[^"]*"|[^\s;&|'"]+)[ \t]*&&[ \t]*)?"""
    r"""(?P<command>apply_?patch[ \t]*)?(?P<subshell>(?P<quote>["']?)\$\([ \t]*cat[ \t]*)?"""
    r"""<<-?[ \t]*(?P<q>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)(?P=q)[ \t]*\n"""
)
#: ``apply_patch '*** Begin Patch ... *** End Patch'`` (the patch as one single-quoted word).
_QUOTED = re.compile(r"^(?:cd[ \t]+(?P<dir>[^\s;&|'\"]+)[ \t]*&&[ \t]*)?(?P<command>apply_?patch)[ \t]+'(?P<body>[^']*)'$")


_UNIFIED_RANGE = re.compile(r"^\s*-(?P<start>\d+)(?:,\d+)?\s+\+\d+(?:,\d+)?\s*@@")


@dataclass
class PatchCommand:
    """A patch found inside a shell command (or a patch argument wrapped like one)."""

    patch: str
    folder: str | None  # the ``cd`` folder before it, if any
    is_command: bool  # it ran the ``apply_patch`` command (not just a bare heredoc)


def patch_in_command(command: str) -> PatchCommand | None:
    """The patch of ``apply_patch <<'EOF' ... EOF`` (any quoting of the tag, ``<<-``), of
    ``apply_patch "$(cat <<'EOF' ... EOF\n)"``, of ``apply_patch '<patch>'``, each optionally
    after ``cd DIR &&``; None when ``command`` is anything else (or something follows)."""
    text = command.strip()
    quoted = _QUOTED.match(text)
    if quoted is not None:
        return PatchCommand(quoted["body"], quoted["dir"], True)
    opened = _HEREDOC.match(text)
    if opened is None:
        return None
    lines = text[opened.end() :].split("\n")
    end = next((i for i, line in enumerate(lines) if line.strip() == opened["tag"]), None)
    if end is None:
        return None
    after = "".join("\n".join(lines[end + 1 :]).split())
    if after != (")" + opened["quote"] if opened["subshell"] else ""):
        return None
    folder = opened["dir"].strip("'\"") if opened["dir"] else None
    return PatchCommand("\n".join(lines[:end]), folder, bool(opened["command"]))


def rebase_patch(patch: str, folder: str) -> str:
    """``patch`` with its relative file paths taken as relative to ``folder``."""
    out = []
    for line in patch.split("\n"):
        for marker in (ADD, DELETE, UPDATE, MOVE):
            if line.startswith(marker):
                path = line[len(marker) :].strip()
                line = marker + (path if posixpath.isabs(path) else posixpath.normpath(posixpath.join(folder, path)))
                break
        out.append(line)
    return "\n".join(out)


def _unfenced(patch: str) -> str:
    """The patch without a Markdown code fence around it (```diff ... ```)."""
    lines = patch.strip("\n").splitlines()
    if len(lines) >= 2 and lines[0].strip().startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1])
    return patch


def _between_markers(patch: str) -> str:
    """The patch without the same indentation before every line (a patch pasted inside a list)
    and without prose before ``*** Begin Patch`` or after ``*** End Patch`` ("Here is the
    patch:"), when each marker stands alone on its line once; else ``patch`` as it is."""
    dedented = textwrap.dedent(patch.strip("\n")).splitlines()
    begins = [i for i, line in enumerate(dedented) if line.rstrip() == BEGIN]
    ends = [i for i, line in enumerate(dedented) if line.rstrip() == END]
    if len(begins) == 1 and len(ends) == 1 and begins[0] < ends[0]:
        return "\n".join(dedented[begins[0] : ends[0] + 1])
    return patch


def _diff_path(field: str, prefix: str) -> str | None:
    """A unified diff header's path without ``prefix`` (git's ``a/``, ``b/``): None for
    /dev/null; the date after a tab is dropped."""
    path = field.split("\t", 1)[0].strip()
    return None if path == "/dev/null" else path.removeprefix(prefix)


_GIT_EXTENDED = (
    "index ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from ",
    "rename to ",
)
_GIT_HEADER = re.compile(r"^diff --git (?:\"?a/)?(?P<old>.+?)\"? (?:\"?b/)?(?P<new>.+?)\"?$")


@dataclass
class _GitBlock:
    """What a ``diff --git`` header and its extended lines say about one file, for a change
    that has no ``---``/``+++`` lines (a pure rename, an empty file added or deleted)."""

    old: str
    new: str
    kind: str = "update"  # add | delete | update
    headed: bool = False  # ``---``/``+++`` lines followed: they say it all

    def header(self) -> list[str]:
        if self.headed:
            return []
        if self.kind == "add":
            return [ADD + self.new]
        if self.kind == "delete":
            return [DELETE + self.old]
        return [UPDATE + self.old, MOVE + self.new] if self.new != self.old else []


def from_unified_diff(text: str) -> str | None:
    """A unified diff (``--- a/x`` / ``+++ b/x`` / ``@@ ... @@`` hunks, as ``git diff`` and
    ``diff -u`` write it, the form many models send) in this tool's format; None when ``text``
    is not one. Its hunks are the same lines; the ``a/`` and ``b/`` prefixes of a git diff go.
    A git diff's blocks without hunks say themselves what they do (``rename from``/``rename
    to``, ``new file mode``, ``deleted file mode``); a binary or copied file is refused."""
    lines = text.strip().splitlines()
    # git writes a/ and b/ before every path (/dev/null aside)
    git = any(line.startswith(("diff --git ", "--- a/", "+++ b/")) for line in lines)
    out = [BEGIN]
    kind: str | None = None
    block: _GitBlock | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old, new = _diff_path(line[4:], "a/" if git else ""), _diff_path(lines[index + 1][4:], "b/" if git else "")
            if old is None and new is not None:
                kind, header = "add", [ADD + new]
            elif new is None and old is not None:
                kind, header = "delete", [DELETE + old]
            elif old is not None and new is not None:
                kind, header = "update", [UPDATE + old, *([MOVE + new] if new != old else [])]
            else:
                return None
            if block is not None:
                block.headed = True
            out += header
            index += 2
            continue
        index += 1
        git_header = _GIT_HEADER.match(line)
        if git_header is not None:
            if block is not None:
                out += block.header()
            block, kind = _GitBlock(git_header["old"], git_header["new"]), "git"
        elif line.startswith(("Binary files ", "GIT binary patch")):
            raise PatchError(f"the diff changes a binary file ({line.strip()}); apply_patch changes text files only")
        elif line.startswith(("copy from ", "copy to ")):
            raise PatchError("the diff copies a file, which apply_patch cannot do; send the copy as an added file")
        elif block is not None and line.startswith(("rename from ", "rename to ")):
            path = line.split(" ", 2)[2]
            block.old, block.new = (path, block.new) if line.startswith("rename from ") else (block.old, path)
        elif block is not None and line.startswith(("new file mode", "deleted file mode")):
            block.kind = "add" if line.startswith("new") else "delete"
        elif kind is None:
            if line.strip():
                return None  # text before the first file header: not a diff
        elif line.startswith("\\"):  # "\ No newline at end of file": kept, it changes the file's end
            out.append(NO_NEWLINE)
        elif line.startswith(_GIT_EXTENDED):
            continue
        elif kind == "update" or (kind == "add" and not line.startswith("@@")):
            out.append(line)
    if block is not None:
        out += block.header()
    return "\n".join([*out, END]) if len(out) > 1 else None


def parse_patch(patch: str) -> list[Operation]:
    if "\n" not in patch.strip() and "\\n" in patch:  # a patch is lines: one line of \n escapes was escaped twice
        patch = json_unescaped(patch)
    patch = _unfenced(patch)
    wrapped = patch_in_command(patch) if not patch.strip().startswith(BEGIN) else None
    if wrapped is not None:  # the shell form pasted as the argument: <<'EOF' ... EOF around it
        patch = rebase_patch(wrapped.patch, wrapped.folder) if wrapped.folder else wrapped.patch
    else:
        diff = None if patch.strip().startswith(BEGIN) else from_unified_diff(patch)
        patch = diff or _between_markers(patch)
    lines = patch.strip().splitlines()
    if lines and lines[0].startswith("@@"):
        raise PatchError(
            f"the patch has a hunk but names no file: start it with {BEGIN!r} and '*** Update File: PATH' "
            "(or, as a unified diff, with '--- a/PATH' and '+++ b/PATH' lines)"
        )
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with {BEGIN!r}")
    if lines[-1].strip() != END:
        raise PatchError(f"the patch must end with {END!r}")
    ops: list[Operation] = []
    current: Operation | None = None
    hunk: Hunk | None = None
    for number, line in enumerate(lines[1:-1], start=2):
        if line.startswith((ADD, DELETE, UPDATE)):
            kind = "add" if line.startswith(ADD) else "delete" if line.startswith(DELETE) else "update"
            path = _patch_path(line.split(": ", 1)[1], number)
            if not path:
                raise PatchError(f"line {number}: missing file path")
            current, hunk = Operation(kind, path), None
            ops.append(current)
        elif current is None:
            if line.strip():
                raise PatchError(f"line {number}: expected '*** Add File:', '*** Update File:' or '*** Delete File:'")
        elif line.startswith(MOVE):
            if current.kind != "update" or current.hunks or current.move_to:
                raise PatchError(f"line {number}: '*** Move to:' must follow '*** Update File:' directly")
            target = _patch_path(line[len(MOVE) :], number)
            # "Move to: sub/" names a folder: as with mv, the file keeps its name in it
            current.move_to = target + posixpath.basename(current.path) if target.endswith("/") else target
        elif line.startswith("\\ "):
            _mark_unterminated(current, hunk, number)
        elif current.kind == "add":
            if not line.startswith("+"):
                raise PatchError(f"line {number}: every line of an added file starts with '+'")
            current.content.append(line[1:])
        elif current.kind == "delete":
            if line.strip():
                raise PatchError(f"line {number}: '*** Delete File:' takes no content")
        elif line.strip() == EOF:
            if hunk is None:
                raise PatchError(f"line {number}: '{EOF}' outside a hunk")
            hunk.at_eof = True
        elif line.startswith("@@"):
            # "@@ -12,4 +12,5 @@ def f():" (a unified diff's range, a common habit): the line
            # numbers only choose among several matches; the text after them is the line to find first.
            ranged = _UNIFIED_RANGE.match(line[2:])
            header = _UNIFIED_RANGE.sub("", line[2:]).strip()
            hunk = Hunk(header=header or None, line_hint=int(ranged["start"]) if ranged else None)
            current.hunks.append(hunk)
        else:
            if hunk is None:
                hunk = Hunk()
                current.hunks.append(hunk)
            op, text = (line[0], line[1:]) if line[:1] in (" ", "-", "+") else (" ", line)
            hunk.lines.append((op, text))
    if not ops:
        raise PatchError("the patch changes no files")
    for operation in ops:
        if operation.kind == "update" and not any(h.lines for h in operation.hunks) and not operation.move_to:
            raise PatchError(f"'*** Update File: {operation.path}' has no changes")
    return ops


def _mark_unterminated(operation: Operation, hunk: Hunk | None, number: int) -> None:
    r"""``\ No newline at end of file``: the line before it is its side's last, with no line break."""
    if operation.kind == "add" and operation.content:
        operation.unterminated = True
    elif hunk is not None and hunk.lines:
        op = hunk.lines[-1][0]
        hunk.old_unterminated = hunk.old_unterminated or op != "+"
        hunk.new_unterminated = hunk.new_unterminated or op != "-"
    else:
        raise PatchError(f"line {number}: {NO_NEWLINE!r} must follow the line it is about")


def _patch_path(text: str, number: int) -> str:
    """A file header's path read as the file tools read a path argument (``path_as_meant``)."""
    try:
        return path_as_meant(text)
    except ValueError as exc:
        raise PatchError(f"line {number}: {text.strip()!r} {exc}") from None


def _loose(line: str) -> str:
    return normalize_punctuation(line).strip()


#: How hunk lines are compared with the file's, strictest first; from the third on, indentation
#: differs and the added lines are re-indented.
_COMPARISONS: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip, _loose)


def _seek_all(lines: list[str], needle: list[str], start: int) -> tuple[list[int], int]:
    """(every place ``needle`` occurs in ``lines`` at or after ``start``, which comparison
    matched) at the strictest comparison that finds it at all: exact, then ignoring trailing
    whitespace, then surrounding whitespace, then also typographic punctuation; ([], 0) when
    none does."""
    if not needle:
        return [start], 0
    for level, normalize in enumerate(_COMPARISONS):
        wanted = [normalize(x) for x in needle]
        keys = [normalize(x) for x in lines]
        found = [i for i in range(start, len(lines) - len(needle) + 1) if keys[i : i + len(needle)] == wanted]
        if found:
            return found, level
    return [], 0


def _seek(lines: list[str], needle: list[str], start: int, at_eof: bool) -> tuple[int, int] | None:
    """(where ``needle`` occurs first at or after ``start`` (``at_eof``: at the end when it is
    there), which comparison matched)."""
    if not needle and at_eof:
        return len(lines), 0
    found, level = _seek_all(lines, needle, start)
    if not found:
        return None
    last = len(lines) - len(needle)
    return (last if at_eof and last in found else found[0]), level


def _place(lines: list[str], hunks: list[Hunk], cursor: int, path: str, number: int) -> tuple[int, int] | None:
    """Where the first of ``hunks`` (hunk ``number`` of the file; the others follow it) goes,
    and which comparison matched; None when its lines are nowhere. Lines that match in several
    places are placed only when something chooses one: the end of the file (``*** End of
    File``), an ``@@`` line found first (the first place after it), the later hunks (only one
    place leaves room for them all, in order), or a unified diff's line number (the nearest
    place). Otherwise the patch is refused: applying it to the first place would silently change
    the wrong lines."""
    hunk = hunks[0]
    old = hunk.old
    if hunk.at_eof or hunk.header or not old:
        return _seek(lines, old, cursor, hunk.at_eof)
    found, level = _seek_all(lines, old, cursor)
    if len(found) > 1 and len(hunks) > 1:
        # Leaving room for the later hunks holds for every place up to some line and none after
        # (each hunk is sought first-found from where the last ended), so a binary search finds
        # how many places do: one search of the file per try, not one per place (a hunk of "}"
        # lines occurs thousands of times in a large file).
        fitting = bisect.bisect_left(found, True, key=lambda start: not _fits(lines, hunks[1:], start + len(old)))
        found = found[:fitting] or found
    if len(found) <= 1:
        return (found[0], level) if found else None
    if hunk.line_hint is not None:
        nearest = sorted((abs(i + 1 - hunk.line_hint), i) for i in found)
        if nearest[0][0] != nearest[1][0]:
            return nearest[0][1], level
    where = ", ".join(str(i + 1) for i in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise PatchError(
        f"{path}, hunk {number}: its lines occur {len(found)} times in the file (at lines {where}), so the place to "
        "change is not clear; add context lines that differ, or an '@@' line with the def or class the change is in"
    )


def _fits(lines: list[str], hunks: list[Hunk], cursor: int) -> bool:
    """Whether ``hunks`` can all be found, in order, from ``cursor`` on."""
    for hunk in hunks:
        if hunk.header:
            header = _seek(lines, [hunk.header], cursor, False)
            if header is None:
                return False
            cursor = header[0] + 1
        found = _seek(lines, hunk.old, cursor, hunk.at_eof)
        if found is None:
            return False
        cursor = found[0] + len(hunk.old)
    return True


def _mismatch(lines: list[str], old: list[str]) -> str:
    """Which of a hunk's context or removed lines is not in the file (and the file's closest
    line), or that each is there but not together in this order."""
    present = {line.strip() for line in lines}
    absent = [line for line in old if line.strip() not in present]
    missing = next((line for line in absent if line.strip()), None)
    if missing is None:
        if absent:
            return "\nThe file has no empty line, and the hunk has one."
        return "\nEach of these lines is in the file, but not together in this order."
    return f"\nThe line {missing.strip()!r} is not in the file.{closest_line(chr(10).join(lines), missing)}"


def apply_hunks(text: str, hunks: list[Hunk], path: str) -> str:
    ends_with_newline = text.endswith("\n")
    lines = text.split("\n") if text else []
    if ends_with_newline:
        lines.pop()
    cursor = 0
    edits: list[tuple[int, int, list[str]]] = []
    for number, hunk in enumerate(hunks, start=1):
        if hunk.header:
            header = _seek(lines, [hunk.header], cursor, False)
            if header is None:
                raise PatchError(f"{path}, hunk {number}: cannot find the line {hunk.header!r}")
            cursor = header[0] + 1
        if not hunk.lines:
            continue
        old = hunk.old
        found = _place(lines, hunks[number - 1 :], cursor, path, number)
        if found is None:
            preview = "\n".join(old[:4])
            done = already_there(lines, hunk.new)
            if done is not None:
                raise PatchError(
                    f"{path}, hunk {number}: its lines were not found, and the lines it would produce are already "
                    f"there (line {done + 1}): the change looks made already (read the file to check)"
                )
            raise PatchError(
                f"{path}, hunk {number}: these lines were not found (read the file again):\n{preview}{_mismatch(lines, old)}"
            )
        start, level = found
        if (hunk.old_unterminated or hunk.new_unterminated) and start + len(old) != len(lines):
            # the marker says the line before it ends the file: anywhere else, honouring it would
            # take the file's own final line break away
            raise PatchError(
                f"{path}, hunk {number}: {NO_NEWLINE!r} follows line {start + len(old)}, which is not the file's last "
                f"(it has {len(lines)}); leave the marker out"
            )
        matched = lines[start : start + len(old)]
        try:
            edits.append((start, len(old), _new_lines(hunk, matched, lines if level >= 2 else None)))
        except IndentMismatch as exc:
            raise PatchError(
                f"{path}, hunk {number}: its lines match line {start + 1} only up to indentation, and no "
                f"re-indentation fits them all ({exc}); read the file and copy its indentation"
            ) from None
        cursor = start + len(old)
    for start, length, new in reversed(edits):
        lines[start : start + length] = new
    result = "\n".join(lines)
    if any(hunk.new_unterminated for hunk in hunks):
        return result
    terminated = ends_with_newline or (bool(result) and not text) or any(hunk.old_unterminated for hunk in hunks)
    return result + "\n" if terminated else result


def _new_lines(hunk: Hunk, matched: list[str], whole_file: list[str] | None) -> list[str]:
    """The hunk's new lines, with context lines kept exactly as the file has them (a fuzzy
    match must not rewrite their whitespace or punctuation). When the hunk matched only up to
    indentation (``whole_file`` given), added lines are re-indented the way the hunk's old lines
    map onto the file's."""
    added = [text for op, text in hunk.lines if op == "+"]
    if whole_file is not None:
        added = Reindenter(hunk.old, matched, added, whole_file).lines(added)
    original, fitted = iter(matched), iter(added)
    out: list[str] = []
    for op, _text in hunk.lines:
        if op == "+":
            out.append(next(fitted))
            continue
        line = next(original)
        if op == " ":
            out.append(line)
    return out


@dataclass
class PlannedChange:
    op: Operation
    shown: str
    target: str | None  # where the new content goes (None for delete)
    before: TextFile | None
    after: str | None


def plan_changes(
    fs: FileSystemBroker, ops: list[Operation], changed_since: Callable[[str, bytes], str] = lambda _path, _data: ""
) -> list[PlannedChange]:
    """Compute every file's new content without writing anything. ``changed_since(path, bytes)``
    adds to a hunk's "not found" whether the file changed since the thread last saw it."""
    seen: set[str] = set()
    planned: list[PlannedChange] = []
    for op in ops:
        real = fs.resolve(op.path, write=True)
        shown = fs.display(real)
        targets = [shown]
        if op.move_to:
            targets.append(fs.display(fs.resolve(op.move_to, write=True)))
        for target in targets:
            if target in seen:
                raise PatchError(f"{target} appears twice in the patch; combine its changes")
            seen.add(target)
        if op.kind == "add":
            if fs.exists(op.path):
                raise PatchError(f"{shown} already exists; use '*** Update File:' to change it")
            body = "\n".join(op.content) + ("\n" if op.content and not op.unterminated else "")
            planned.append(PlannedChange(op, shown, op.path, None, body))
            continue
        before = current_text(fs, op.path)
        if before is None:
            raise PatchError(f"{shown} does not exist")
        if op.kind == "delete":
            planned.append(PlannedChange(op, shown, None, before, None))
            continue
        if op.move_to and fs.exists(op.move_to):
            raise PatchError(f"cannot move {shown} to {op.move_to}: it already exists")
        try:
            after = apply_hunks(before.text, op.hunks, shown) if op.hunks else before.text
        except PatchError as exc:
            raise PatchError(f"{exc}{changed_since(op.path, before.source)}") from None
        planned.append(PlannedChange(op, shown, op.move_to or op.path, before, after))
    return planned


def commit_changes(fs: FileSystemBroker, planned: list[PlannedChange]) -> dict[str, str | None]:
    """Write every planned change; on any failure, restore what was already written. Returns
    each touched file's digest (None: deleted or moved away) for the thread's file ledger."""
    undo: list[tuple[str, bytes | None]] = []  # (path, original bytes or None = did not exist)
    digests: dict[str, str | None] = {}
    try:
        for change in planned:
            op = change.op
            if op.kind == "delete":
                undo.append((op.path, changeable_bytes(fs, op.path)))
                digests[str(fs.resolve(op.path))] = None
                fs.delete(op.path)
                continue
            assert change.target is not None and change.after is not None
            encoder = change.before or TextFile("", bom=False, crlf=False)
            data = encoder.encode(change.after)
            if op.move_to:
                undo.append((op.path, changeable_bytes(fs, op.path)))
                undo.append((op.move_to, None))
                digests[str(fs.write_bytes(op.move_to, data))] = digest_of(data)
                digests[str(fs.resolve(op.path))] = None
                fs.delete(op.path)
            else:
                undo.append((change.target, changeable_bytes(fs, change.target) if change.before else None))
                digests[str(fs.write_bytes(change.target, data))] = digest_of(data)
    except Exception:
        for path, original in reversed(undo):
            try:
                if original is None:
                    if fs.exists(path):
                        fs.delete(path)
                else:
                    fs.write_bytes(path, original)
            except Exception:  # keep restoring the others; the error below says what failed
                continue
        raise
    return digests


def _operations(arguments: dict[str, Any]) -> list[Operation]:
    try:
        return parse_patch(str(arguments.get("patch", "")))
    except PatchError:
        return []


class ApplyPatchArguments(ToolArguments):
    habit_names = {"input": "patch", "diff": "patch", "patch_text": "patch"}
    patch: NonBlank = Field(description="the patch text, *** Begin Patch ... *** End Patch")


class ApplyPatchTool(BuiltinTool):
    name = "apply_patch"
    description = (
        "Apply a multi-file patch, all or nothing. Format: '*** Begin Patch', then per file "
        "'*** Add File: path' (lines prefixed '+'), '*** Delete File: path', or '*** Update File: path' "
        "(optionally '*** Move to: new/path') with hunks of ' ' context, '-' removed and '+' added lines, "
        "optionally starting with '@@ <line to find first>'; end with '*** End Patch'. Give 3 lines "
        "of context around each change."
    )
    arguments_model = ApplyPatchArguments
    kind = "edit"

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        ops = _operations(arguments)
        if not ops:
            return [PolicySubject(tool=self.name, writes=True)]
        paths = [p for op in ops for p in (op.path, op.move_to) if p]
        return [PolicySubject(tool=self.name, value=p, kind="path", writes=True) for p in paths]

    def mutated_paths(self, arguments: dict[str, Any], workspace: PurePath) -> list[str]:
        return [path_key(s.value, workspace) for s in self.policy_subjects(arguments, workspace) if s.value]

    def _changes(self, planned: list[PlannedChange], fs: FileSystemBroker) -> list[FileChange]:
        changes = []
        for change in planned:
            old = change.before.text if change.before else ""
            if change.op.kind == "delete":
                changes.append(FileChange(path=change.shown, kind="delete", diff=unified_diff(old, "", change.shown)))
            elif change.op.kind == "add":
                changes.append(FileChange(path=change.shown, kind="add", diff=unified_diff("", change.after or "", change.shown)))
            else:
                move = fs.display(fs.resolve(change.op.move_to, write=True)) if change.op.move_to else None
                changes.append(
                    FileChange(
                        path=change.shown,
                        kind="move" if move else "update",
                        move_path=move,
                        diff=unified_diff(old, change.after or "", change.shown),
                    )
                )
        return changes

    async def show(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        fs = ctx.brokers.fs
        ops = parse_patch(parse_arguments(ApplyPatchArguments, call).patch)
        planned = plan_changes(fs, ops, lambda path, data: changed_since_note(ctx, path, data))
        return {"diff": "".join(c.diff for c in self._changes(planned, fs))}

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        fs = ctx.brokers.fs
        ops = parse_patch(parse_arguments(ApplyPatchArguments, call).patch)
        planned = plan_changes(fs, ops, lambda path, data: changed_since_note(ctx, path, data))
        changes = self._changes(planned, fs)
        digests = commit_changes(fs, planned)
        letters = {"add": "A", "delete": "D", "update": "M", "move": "R"}
        summary = "\n".join(f"{letters[c.kind]} {c.path}" + (f" -> {c.move_path}" if c.move_path else "") for c in changes)
        diffs = "".join(c.diff for c in changes)
        warnings = [
            warning
            for change, shown in zip(planned, changes, strict=True)
            if change.before is not None
            and (warning := syntax_regression(shown.move_path or shown.path, change.before.text, change.after))
        ]
        head = "".join(f"{warning}\n" for warning in warnings)
        return file_change_result(
            call,
            f"{head}applied the patch:\n{summary}\n\n{diffs}",
            changes,
            {
                "files": [c.path for c in changes],
                "kinds": [c.kind for c in changes],
                "invalid_after": len(warnings),
                **record(ctx, digests),
            },
        )
