"""``edit {path, old_string, new_string, replace_all?}``: exact string replacement in a file.

The exact text must occur once (or ``replace_all``). When it does not occur at all, the
tolerant passes of ``matching`` are tried (indentation and spacing with re-indentation, then
typographic punctuation) and the result says which one matched; a match that cannot be fitted
safely is refused. Edits that change nothing are
refused. Line endings (CRLF) and a UTF-8 byte order mark are kept.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from roder_core.ir import FileChange
from roder_core.kernel.file_ledger import digest_of
from roder_core.kernel.tool_args import PathArgument, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolCall, ToolExecutionContext, ToolResult

from .common import (
    ESCAPED_TWICE,
    LINE_NUMBERS_LEFT_OUT,
    FileEditTool,
    TextFile,
    ToolInputError,
    escaped_twice,
    file_change_result,
    unified_diff,
    without_line_numbers,
)
from .freshness import changed_since_note, record
from .matching import (
    IndentMismatch,
    Reindenter,
    already_there,
    collapse,
    has_special_punctuation,
    in_file_style,
    keep_file_characters,
    line_blocks,
    normalize_punctuation,
    punctuation_spans,
    whitespace_spans,
)
from .validity import syntax_regression
from .write import current_text


def closest_line(text: str, needle: str) -> str:
    first = next((line for line in needle.splitlines() if line.strip()), "")
    lines = text.splitlines()
    match = difflib.get_close_matches(first.strip(), [line.strip() for line in lines], n=1, cutoff=0.6)
    if not match:
        return ""
    number = next(i for i, line in enumerate(lines, start=1) if line.strip() == match[0])
    return f" The closest line is {number}: {lines[number - 1].strip()!r}; read the file to copy the text exactly."


@dataclass
class EditOutcome:
    text: str
    count: int
    #: None for an exact match; else how the match was found, said in the result.
    tolerance: str | None = None


def _too_many(count: int, what: str) -> ToolInputError:
    return ToolInputError(
        f"old_string was not found exactly, and {count} places match it {what}; include more surrounding lines or set replace_all"
    )


def _line_edit(text: str, old: str, new: str, replace_all: bool, *, loose: bool) -> EditOutcome | None:
    """Replace whole lines that match ``old`` up to indentation and spacing (``loose``: and
    punctuation), re-indenting ``new`` the way the quoted lines map onto the file's. Lines that
    ``new`` keeps from ``old`` are written exactly as the file has them."""
    quoted = (old[:-1] if old.endswith("\n") else old).split("\n")
    replacement = (new[:-1] if old.endswith("\n") and new.endswith("\n") else new).split("\n")
    lines = text.split("\n")
    starts: list[int] = []
    for start in line_blocks(lines, quoted, loose=loose):
        if not starts or start >= starts[-1] + len(quoted):
            starts.append(start)
    if not starts:
        return None
    what = "up to indentation, spacing and punctuation" if loose else "up to indentation and spacing"
    if len(starts) > 1 and not replace_all:
        raise _too_many(len(starts), what)
    keys = [collapse(normalize_punctuation(line)) for line in quoted]
    new_keys = [collapse(normalize_punctuation(line)) for line in replacement]
    kept = difflib.SequenceMatcher(None, keys, new_keys, autojunk=False).get_opcodes()
    for start in reversed(starts):
        found = lines[start : start + len(quoted)]
        try:
            fitted = Reindenter(quoted, found, replacement, lines).lines(replacement)
        except IndentMismatch as exc:
            raise ToolInputError(
                f"old_string matches line {start + 1} only {what}, and was not changed: {exc}. "
                "Read the file and copy the lines exactly."
            ) from None
        out: list[str] = []
        for tag, i1, i2, j1, j2 in kept:
            out += found[i1:i2] if tag == "equal" else fitted[j1:j2]
        if start + len(quoted) == len(lines) and lines[-1] == "" and out[-1:] != [""]:
            # a blank line quoted at the end matched the "" after the final line break: the
            # file keeps that line break
            out.append("")
        lines[start : start + len(quoted)] = out
    first, last = starts[0] + 1, starts[0] + len(quoted)
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    if len(starts) > 1:
        where += f" and {len(starts) - 1} more place{'s' if len(starts) > 2 else ''}"
    note = f"old_string matched {where} only {what}; new_string was re-indented to the file's indentation"
    return EditOutcome("\n".join(lines), len(starts), note)


def apply_edit(text: str, old: str, new: str, replace_all: bool, shown: str) -> EditOutcome:
    """The file's text after the edit (``_unnumbered_edit``), with text escaped twice read as
    meant (``escaped_twice``): a one-line ``new_string`` with ``\\n`` escapes replacing lines
    (it would write them into the file as backslashes), or both strings so escaped when
    ``old_string`` as written is not in the file."""
    restyled = in_file_style(text, old, new, shown) if old and old in text else None
    if restyled is not None:
        return _noted(_unnumbered_edit(text, old, restyled[0], replace_all, shown), restyled[1])
    plain_new = escaped_twice(new) if "\n" in old else None
    if plain_new is not None:
        return _noted(_unnumbered_edit(text, old, plain_new, replace_all, shown), f"new_string: {ESCAPED_TWICE}")
    try:
        return _unnumbered_edit(text, old, new, replace_all, shown)
    except ToolInputError:
        plain_old = escaped_twice(old)
        if plain_old is None:
            raise
        as_meant = escaped_twice(new) or new
    return _noted(_unnumbered_edit(text, plain_old, as_meant, replace_all, shown), f"old_string: {ESCAPED_TWICE}")


def _noted(outcome: EditOutcome, said: str) -> EditOutcome:
    """``outcome`` whose result also says ``said``, first."""
    outcome.tolerance = f"{said}; {outcome.tolerance}" if outcome.tolerance else said
    return outcome


def _unnumbered_edit(text: str, old: str, new: str, replace_all: bool, shown: str) -> EditOutcome:
    """The file's text after the edit (``_apply_edit``), with read's line numbers taken out of
    a ``new_string`` that has them when ``old_string`` has none (they would be written into the
    file)."""
    plain = without_line_numbers(new) if without_line_numbers(old, strict=False) is None else None
    if plain is None:
        return _apply_edit(text, old, new, replace_all, shown)
    return _noted(
        _apply_edit(text, old, plain, replace_all, shown),
        "the line numbers copied from read's output into new_string were left out",
    )


def _apply_edit(text: str, old: str, new: str, replace_all: bool, shown: str) -> EditOutcome:
    """The file's text after the edit; ToolInputError when it cannot be applied safely.

    Tried in order: the exact text; whole lines up to indentation and spacing (re-indented); a
    fragment of one line up to spacing; then the same with typographic punctuation read as
    ASCII (the file's own characters kept in what does not change)."""
    if not old:
        raise ToolInputError("old_string is empty; use write to create a file or to replace all of it")
    if old == new:
        raise ToolInputError("old_string and new_string are identical; the edit would change nothing")
    count = text.count(old)
    if count == 1 or (count > 1 and replace_all):
        return EditOutcome(text.replace(old, new) if replace_all else text.replace(old, new, 1), count)
    if count > 1:
        raise ToolInputError(
            f"old_string occurs {count} times in {shown}; include more surrounding lines to make it unique, "
            "or set replace_all to change every occurrence"
        )
    numbered = without_line_numbers(old, strict=False)
    if numbered is not None:  # copied from read's output with its line numbers
        unnumbered = _apply_edit(text, numbered, without_line_numbers(new, strict=False) or new, replace_all, shown)
        unnumbered.tolerance = (
            f"{LINE_NUMBERS_LEFT_OUT}; {unnumbered.tolerance}" if unnumbered.tolerance else LINE_NUMBERS_LEFT_OUT
        )
        return unnumbered
    outcome = _line_edit(text, old, new, replace_all, loose=False)
    if outcome is None and "\n" not in old and "\n" not in new:
        outcome = _spans_edit(text, old, new, replace_all, whitespace_spans(text, old), "up to spacing", keep=False)
    if outcome is None and (has_special_punctuation(text) or has_special_punctuation(old)):
        spans = punctuation_spans(text, old)
        outcome = _spans_edit(
            text,
            old,
            new,
            replace_all,
            spans,
            "with typographic punctuation read as ASCII and accented letters composed or not",
            keep=True,
        )
        if outcome is None:
            outcome = _line_edit(text, old, new, replace_all, loose=True)
    if outcome is None:
        raise ToolInputError(f"old_string was not found in {shown}.{_made_already(text, new) or closest_line(text, old)}")
    if outcome.text == text:
        raise ToolInputError("the edit would change nothing")
    return outcome


def _made_already(text: str, new: str) -> str:
    """What the error adds when ``new_string`` already stands in the file (an edit sent twice,
    or made by a command since): the model is to check, not to retry."""
    at = text.find(new) if new.strip() else -1
    line = text.count("\n", 0, at) if at >= 0 else already_there(text.split("\n"), new.split("\n"))
    if line is None:
        return ""
    return f" new_string is already there (line {line + 1}), so the edit looks made already; read the file to check."


def _spans_edit(
    text: str, old: str, new: str, replace_all: bool, spans: list[tuple[int, int]], what: str, *, keep: bool
) -> EditOutcome | None:
    if not spans:
        return None
    if len(spans) > 1 and not replace_all:
        raise _too_many(len(spans), what)
    result = text
    for start, end in reversed(spans):
        replacement = keep_file_characters(text[start:end], old, new) if keep else new
        result = result[:start] + replacement + result[end:]
    note = f"old_string matched only {what}"
    if keep:
        note += "; the file's own characters were kept where the text did not change"
    return EditOutcome(result, len(spans), note)


class EditArguments(ToolArguments):
    path: PathArgument = Field(description="file to edit (relative to the workspace, or absolute)")
    old_string: str = Field(description="exact text to replace")
    new_string: str = Field(description="text to put in its place")
    replace_all: bool = Field(False, description="replace every occurrence (default false)")


class EditTool(FileEditTool):
    name = "edit"
    description = (
        "Replace text in a file: old_string must match the file exactly (including indentation) and be "
        "unique, unless replace_all is true. Without an exact match, whole lines matching up to "
        "indentation and spacing are replaced with new_string re-indented to the file's indentation, "
        "and typographic quotes, dashes and special spaces match their ASCII forms; the result says so. "
        "Keeps the file's line endings. Returns a unified diff."
    )
    arguments_model = EditArguments

    def _plan(self, ctx: ToolExecutionContext, call: ToolCall) -> tuple[str, str, TextFile, EditOutcome]:
        args = parse_arguments(EditArguments, call)
        old = args.old_string.replace("\r\n", "\n")
        new = args.new_string.replace("\r\n", "\n")
        fs = ctx.brokers.fs
        shown = fs.display(fs.resolve(args.path, write=True))
        before = current_text(fs, args.path)
        if before is None:
            raise FileNotFoundError(f"{shown} does not exist; use write to create it")
        try:
            outcome = apply_edit(before.text, old, new, args.replace_all, shown)
        except ToolInputError as exc:
            raise ToolInputError(f"{exc}{changed_since_note(ctx, args.path, before.source)}") from None
        return args.path, shown, before, outcome

    async def show(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        _path, shown, before, outcome = self._plan(ctx, call)
        return {"diff": unified_diff(before.text, outcome.text, shown)}

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        path, shown, before, outcome = self._plan(ctx, call)
        written = before.encode(outcome.text)
        real = ctx.brokers.fs.write_bytes(path, written)
        diff = unified_diff(before.text, outcome.text, shown)
        count = outcome.count
        head = f"edited {shown}: {count} replacement{'s' if count != 1 else ''}"
        if outcome.tolerance:
            head += f" ({outcome.tolerance}; check the diff)"
        warning = syntax_regression(shown, before.text, outcome.text)
        if warning:
            head = f"{warning}\n{head}"
        return file_change_result(
            call,
            f"{head}\n\n{diff}",
            [FileChange(path=shown, kind="update", diff=diff)],
            {
                "path": shown,
                "replacements": count,
                "tolerance": outcome.tolerance,
                "invalid_after": warning is not None,
                **record(ctx, {str(real): digest_of(written)}),
            },
        )
