"""Helpers shared by the built-in tools: the base class, text decoding, diffs, path keys.

Nothing here touches the machine; the tools do that through ``ctx.brokers``.
"""

from __future__ import annotations

import difflib
import itertools
import posixpath
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from roder_core.brokers import BrokerDenied
from roder_core.ir import FileChange, FileChangeItem
from roder_core.kernel.tool_args import ToolArgumentError
from roder_core.kernel.tools import PolicySubject, Tool, ToolCall, ToolExecutionContext, ToolResult

MAX_DIFF_CHARS = 30_000


class ToolInputError(ToolArgumentError):
    """Bad input from the model beyond what the argument model checks (a file that must exist,
    a URL without a scheme); the message says what to send instead."""


#: File failures a built-in tool reports as a plain error (the message says what is wrong).
FILE_FAILURES = (FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError)


class BuiltinTool(Tool):
    """Base of the built-in tools: expected failures become error results the model can act on.

    Subclasses implement ``run``. A broker refusal reads ``refused: <why>`` and is marked in
    ``data`` so clients and tests can tell containment from an ordinary error.
    """

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        try:
            return await self.run(ctx, call)
        except BrokerDenied as exc:
            return ToolResult(id=call.id, name=call.name, text=f"refused: {exc}", data={"refused": True}, is_error=True)
        except FileNotFoundError as exc:
            return ToolResult.error(call, f"{exc}{found_elsewhere(ctx, call)}")
        except (ToolArgumentError, *FILE_FAILURES) as exc:
            return ToolResult.error(call, str(exc))

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        raise NotImplementedError  # abstract: every built-in tool overrides this

    async def preview(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        """The approval preview (``show``); a file failure the run would report (a folder where
        a file is meant, a missing parent) refuses the call as the run would, so nobody is asked
        to approve it."""
        try:
            return await self.show(ctx, call)
        except FILE_FAILURES as exc:
            raise ToolInputError(str(exc)) from None

    async def show(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        """Preview fields for the approval (``diff``, ``command``, ``cwd``), after the same checks
        as ``run``; none by default."""
        return {}


def found_elsewhere(ctx: ToolExecutionContext, call: ToolCall) -> str:
    """For a ``path`` that does not exist: where files of that name are in the workspace (a
    path meant relative to a folder an earlier command ``cd``'ed into, or a folder left out),
    "" when there are none (or the search cannot run)."""
    path = str(call.arguments.get("path") or "").rstrip("/")
    name = posixpath.basename(path)
    if not name or any(char in name for char in "*?[{"):
        return ""
    try:
        found, total = ctx.brokers.fs.find_files(".", f"**/{name}", limit=3)
    except (OSError, BrokerDenied, ValueError):
        return ""
    if not found:
        return ""
    names = ", ".join(info.display for info in found) + (f" and {total - 3} more" if total > 3 else "")
    return (
        f". Files named {name} in the workspace: {names} (paths are relative to the workspace, not to a folder a "
        "command moved to)"
    )


class FileEditTool(BuiltinTool):
    """A tool that changes the one file named by its ``path`` argument."""

    kind = "edit"

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        return [path_subject(self.name, str(arguments.get("path", "")), writes=True)]

    def mutated_paths(self, arguments: dict[str, Any], workspace: PurePath) -> list[str]:
        return [path_key(str(arguments.get("path", "")), workspace)]


def path_key(path: str, workspace: PurePath) -> str:
    """A lexical absolute key for a path, used to serialize mutations of one file."""
    if path.startswith("~"):
        return path
    return posixpath.normpath(posixpath.join(str(workspace), path))


def path_subject(tool: str, path: str, *, writes: bool) -> PolicySubject:
    return PolicySubject(tool=tool, value=path, kind="path", writes=writes)


#: Tried in order when a file is not UTF-8: Windows' Western code page, then ISO 8859-1 (which
#: decodes any byte, so it is last).
FALLBACK_ENCODINGS = ("cp1252", "latin-1")
_CONTROL = bytes(set(range(32)) - {8, 9, 10, 12, 13, 27})


def text_encoding(sample: bytes) -> str | None:
    """The encoding a file starting with ``sample`` (its first 8 KB) is text in, or None for
    binary: UTF-8 (with or without a BOM), UTF-16 with a BOM, else a single-byte fallback
    when the bytes look like text (few control bytes, mostly ASCII)."""
    sample = sample[:8192]
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if b"\x00" in sample:
        return None
    try:
        sample.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4 and exc.reason == "unexpected end of data":
            return "utf-8"  # a multi-byte character cut at the sample's end
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    high = sum(1 for byte in sample if byte >= 0x80)
    if controls * 20 > len(sample) or high * 3 > len(sample):
        return None
    return decode_fallback(sample)[0]


def decode_fallback(data: bytes) -> tuple[str, str]:
    """(encoding, text) of text that is not UTF-8, in the first fallback encoding that fits."""
    for encoding in FALLBACK_ENCODINGS:
        try:
            return encoding, data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return "latin-1", data.decode("latin-1")  # latin-1 decodes every byte: never reached


def looks_binary(data: bytes) -> bool:
    """Not text in any encoding ``text_encoding`` knows (NUL bytes, control bytes)."""
    return text_encoding(data) is None


def encoding_note(encoding: str) -> str:
    """What a result says about a file that is not UTF-8."""
    return f"[not UTF-8: decoded as {encoding}; edit and write keep this encoding]"


@dataclass
class TextFile:
    """A text file's content normalized for editing, with what is needed to write it back as it was."""

    text: str  # LF line endings, no BOM
    bom: bool
    crlf: bool
    #: The file's bytes as read (empty for a file that does not exist yet).
    source: bytes = b""
    #: What the bytes are in (see ``text_encoding``); writes use it again.
    encoding: str = "utf-8"
    #: For a file with both CRLF and LF line endings: each line's own, so that lines a change
    #: leaves alone keep theirs (new lines get the more common one, ``crlf``).
    endings: list[str] | None = None

    @classmethod
    def decode(cls, data: bytes) -> TextFile:
        """UTF-8, else the encoding ``text_encoding`` finds (UnicodeDecodeError for binary)."""
        source = data
        bom = data.startswith(b"\xef\xbb\xbf")
        if bom:
            data = data[3:]
        encoding = "utf-16" if data.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8"
        try:
            text = data.decode(encoding).removeprefix("\ufeff")
        except UnicodeDecodeError:
            if encoding == "utf-16" or looks_binary(data):
                raise
            encoding, text = decode_fallback(data)
        pairs = text.count("\r\n")
        crlf = pairs > 0 and pairs >= text.count("\n") / 2
        endings = None
        if pairs and pairs < text.count("\n"):  # mixed: remember each line's
            endings = ["\r\n" if line.endswith("\r") else "\n" for line in text.split("\n")[:-1]]
        if crlf or endings:
            text = text.replace("\r\n", "\n")
        return cls(text, bom, crlf, source, encoding, endings)

    def encode(self, text: str | None = None) -> bytes:
        body = self.text if text is None else text
        if self.endings is not None:
            body = _own_endings(self.text, body.replace("\r\n", "\n"), self.endings, "\r\n" if self.crlf else "\n")
        elif self.crlf:
            body = body.replace("\r\n", "\n").replace("\n", "\r\n")
        if self.encoding != "utf-8":
            try:
                return body.encode(self.encoding)
            except UnicodeEncodeError as exc:
                raise ToolInputError(
                    f"the new text has {exc.object[exc.start : exc.end]!r}, which this file's encoding "
                    f"({self.encoding}) cannot hold; nothing was written"
                ) from None
        return (b"\xef\xbb\xbf" if self.bom else b"") + body.encode("utf-8")


#: A line-number prefix as read writes it (``     12\t``: right-aligned in six columns, then a
#: tab), or ``    12→`` (the numbered form another agent's read tool shows, which models
#: trained on it copy), which some models follow with a tab (``    12→\t``).
_READ_PREFIX = re.compile(r"^(?:(?P<padded> *\d+)\t|(?P<arrow> *\d+)\u2192(?P<tab>\t)?)")
LINE_NUMBERS_LEFT_OUT = "the line numbers copied from read's output were left out"


def without_line_numbers(text: str, *, strict: bool = True) -> str | None:
    """``text`` without the line-number prefixes a numbered listing puts before each line, when
    every non-empty line has one; None otherwise. ``strict`` (for text that is written:
    ``new_string``, ``write``'s content) also wants read's own form, numbers padded to six
    columns (in either form) and counting up by one, so a tab-separated file's ``1\tAlice``
    lines and a list of steps ``1→2 add a column`` stay as they are; without it
    (``old_string``, only tried when it is not in the file) any prefix goes, and a tab after
    ``→`` goes with it (with ``strict``, it may be a tab-indented line's own)."""
    kept: list[str] = []
    numbers: list[int] = []
    for line in text.split("\n"):
        if not line:
            kept.append(line)
            continue
        prefix = _READ_PREFIX.match(line)
        if prefix is None:
            return None
        padded = prefix["padded"] or prefix["arrow"]
        if strict and len(padded) < 6 and not padded.startswith(" "):
            return None
        numbers.append(int(padded.strip()))
        end = prefix.end("arrow") + 1 if strict and prefix["tab"] else prefix.end()
        kept.append(line[end:])
    if not numbers or (strict and any(b != a + 1 for a, b in itertools.pairwise(numbers))):
        return None
    return "\n".join(kept)


#: An escape as JSON writes it inside a string: ``\n``, ``\t``, ``\r``, ``\"``, ``\\``, ``\/``.
_JSON_ESCAPE = re.compile(r'\\(["\\/nrt])')
#: ``\n`` as an escape (an odd number of backslashes before the ``n``).
_ESCAPED_BREAK = re.compile(r"(?<!\\)(?:\\\\)*\\n")
#: An escape pair, or a string literal closed on its line (``"\\n\\n"``, ``'a\\n  b'``): the escapes
#: inside a literal are the code's own, so the literals are set aside before looking for breaks.
_LITERAL = re.compile(r"""\\.|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`""")
ESCAPED_TWICE = "its \\n escapes were read as line breaks, since it had no real ones (it was escaped twice)"


def json_unescaped(text: str) -> str:
    """``text`` with JSON's string escapes read once more (``\\n`` a line break, ``\\\\`` one backslash)."""
    return _JSON_ESCAPE.sub(lambda match: {"n": "\n", "t": "\t", "r": "\r"}.get(match[1], match[1]), text)


def escaped_twice(text: str) -> str | None:
    """``text`` as meant when a model escaped it twice (its JSON held ``\\\\n`` for a line break):
    no real line break, but ``\\n`` escapes that end it or start an indented line
    (``def f():\\n    return 1\\n``); None otherwise. A one-line text's own escapes
    (``print("a\\nb")``, ``"\\n\\n".join(parts)``: escapes inside a string literal) are no
    such sign and stay as written."""
    if "\n" in text:
        return None
    code = _LITERAL.sub(lambda match: match[0] if match[0].startswith("\\") else '""', text)
    for match in _ESCAPED_BREAK.finditer(code):
        after = code[match.end() :]
        if not after or after.startswith(("  ", "\\t", "\\n")):
            return json_unescaped(text)
    return None


def _own_endings(old: str, new: str, endings: list[str], default: str) -> str:
    """``new`` (LF endings) with the line endings of a file that mixes them: a line kept from
    ``old``, or changed in place, keeps its own; an added line gets ``default``."""
    old_lines, new_lines = old.split("\n"), new.split("\n")
    out = [default] * (len(new_lines) - 1)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for offset in range(min(i2 - i1, j2 - j1)):
                if i1 + offset < len(endings) and j1 + offset < len(out):
                    out[j1 + offset] = endings[i1 + offset]
    return "".join(line + end for line, end in zip(new_lines, out, strict=False)) + new_lines[-1]


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3)
    diff = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n... diff truncated ({len(diff)} characters in total)\n"
    return diff


def diff_stats(old: str, new: str) -> tuple[int, int]:
    """(lines added, lines removed)."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    added = removed = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def file_change_result(call: ToolCall, text: str, changes: list[FileChange], data: dict[str, Any]) -> ToolResult:
    view = FileChangeItem(call_id=call.id, changes=changes)
    return ToolResult(id=call.id, name=call.name, text=text, data=data, views=[view])
