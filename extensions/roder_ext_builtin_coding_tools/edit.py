"""``edit {path, old_string, new_string, replace_all?}``: exact string replacement in a file.

The exact text must occur once (or ``replace_all``). When it does not occur at all, a match
that differs only in whitespace is tried and reported as such. Edits that change nothing are
refused. Line endings (CRLF) and a UTF-8 byte order mark are kept.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import Field

from roder_core.ir import FileChange
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolCall, ToolExecutionContext, ToolResult

from .common import FileEditTool, ToolInputError, file_change_result, unified_diff
from .write import current_text


def whitespace_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Spans of ``text`` equal to ``needle`` up to the amount and kind of whitespace."""
    tokens = needle.split()
    if not tokens:
        return []
    pattern = re.compile(r"\s+".join(re.escape(token) for token in tokens))
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def closest_line(text: str, needle: str) -> str:
    first = next((line for line in needle.splitlines() if line.strip()), "")
    lines = text.splitlines()
    match = difflib.get_close_matches(first.strip(), [line.strip() for line in lines], n=1, cutoff=0.6)
    if not match:
        return ""
    number = next(i for i, line in enumerate(lines, start=1) if line.strip() == match[0])
    return f" The closest line is {number}: {lines[number - 1].strip()!r}; read the file to copy the text exactly."


def apply_edit(text: str, old: str, new: str, replace_all: bool, shown: str) -> tuple[str, int, bool]:
    """(new text, replacements, whether whitespace had to be normalized); ToolInputError if not applicable."""
    if not old:
        raise ToolInputError("old_string is empty; use write to create a file or to replace all of it")
    if old == new:
        raise ToolInputError("old_string and new_string are identical; the edit would change nothing")
    count = text.count(old)
    if count == 1 or (count > 1 and replace_all):
        return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), count, False
    if count > 1:
        raise ToolInputError(
            f"old_string occurs {count} times in {shown}; include more surrounding lines to make it unique, "
            "or set replace_all to change every occurrence"
        )
    spans = whitespace_spans(text, old)
    if not spans:
        raise ToolInputError(f"old_string was not found in {shown}.{closest_line(text, old)}")
    if len(spans) > 1 and not replace_all:
        raise ToolInputError(
            f"old_string was not found exactly, and {len(spans)} places match it up to whitespace; "
            "include more surrounding lines or set replace_all"
        )
    result = text
    for start, end in reversed(spans):
        result = result[:start] + new + result[end:]
    if result == text:
        raise ToolInputError("the edit would change nothing")
    return result, len(spans), True


class EditArguments(ToolArguments):
    path: NonBlank = Field(description="file to edit (relative to the workspace, or absolute)")
    old_string: str = Field(description="exact text to replace")
    new_string: str = Field(description="text to put in its place")
    replace_all: bool = Field(False, description="replace every occurrence (default false)")


class EditTool(FileEditTool):
    name = "edit"
    description = (
        "Replace text in a file: old_string must match the file exactly (including indentation) and be "
        "unique, unless replace_all is true. If no exact match exists, a match differing only in "
        "whitespace is used and reported. Keeps the file's line endings. Returns a unified diff."
    )
    arguments_model = EditArguments

    def _plan(self, ctx: ToolExecutionContext, call: ToolCall) -> tuple[str, str, str, Any, int, bool]:
        args = parse_arguments(EditArguments, call)
        path, replace_all = args.path, args.replace_all
        old = args.old_string.replace("\r\n", "\n")
        new = args.new_string.replace("\r\n", "\n")
        fs = ctx.brokers.fs
        shown = fs.display(fs.resolve(path, write=True))
        before = current_text(fs, path)
        if before is None:
            raise ToolInputError(f"{shown} does not exist; use write to create it")
        after, count, fuzzy = apply_edit(before.text, old, new, replace_all, shown)
        return path, shown, after, before, count, fuzzy

    async def preview(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        _path, shown, after, before, _count, _fuzzy = self._plan(ctx, call)
        return {"diff": unified_diff(before.text, after, shown)}

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        path, shown, after, before, count, fuzzy = self._plan(ctx, call)
        ctx.brokers.fs.write_bytes(path, before.encode(after))
        diff = unified_diff(before.text, after, shown)
        head = f"edited {shown}: {count} replacement{'s' if count != 1 else ''}"
        if fuzzy:
            head += " (no exact match; matched after normalizing whitespace, check the result)"
        return file_change_result(
            call,
            f"{head}\n\n{diff}",
            [FileChange(path=shown, kind="update", diff=diff)],
            {"path": shown, "replacements": count, "whitespace_normalized": fuzzy},
        )
