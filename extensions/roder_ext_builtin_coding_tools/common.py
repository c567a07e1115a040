"""Helpers shared by the built-in tools: the base class, text decoding, diffs, path keys.

Nothing here touches the machine; the tools do that through ``ctx.brokers``.
"""

from __future__ import annotations

import difflib
import posixpath
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
        except (ToolArgumentError, FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError) as exc:
            return ToolResult.error(call, str(exc))

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        raise NotImplementedError  # abstract: every built-in tool overrides this


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


def looks_binary(data: bytes) -> bool:
    """NUL bytes or mostly undecodable bytes in the first 8 KB."""
    sample = data[:8192]
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the sample's end is fine
        return exc.start < len(sample) - 4


@dataclass
class TextFile:
    """A text file's content normalized for editing, with what is needed to write it back as it was."""

    text: str  # LF line endings, no BOM
    bom: bool
    crlf: bool
    #: The file's bytes as read (empty for a file that does not exist yet).
    source: bytes = b""

    @classmethod
    def decode(cls, data: bytes) -> TextFile:
        source = data
        bom = data.startswith(b"\xef\xbb\xbf")
        if bom:
            data = data[3:]
        text = data.decode("utf-8")
        crlf = "\r\n" in text and text.count("\r\n") >= text.count("\n") / 2
        if crlf:
            text = text.replace("\r\n", "\n")
        return cls(text, bom, crlf, source)

    def encode(self, text: str | None = None) -> bytes:
        body = self.text if text is None else text
        if self.crlf:
            body = body.replace("\r\n", "\n").replace("\n", "\r\n")
        return (b"\xef\xbb\xbf" if self.bom else b"") + body.encode("utf-8")


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
