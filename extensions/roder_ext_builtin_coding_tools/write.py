"""``write {path, content}``: create or replace a whole file (parent folders are created)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from roder_core.brokers import FileSystemBroker
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
    diff_stats,
    escaped_twice,
    file_change_result,
    looks_binary,
    unified_diff,
    without_line_numbers,
)
from .freshness import check_whole_write, record
from .validity import syntax_regression


class BinaryFileError(ToolInputError):
    """The file is not UTF-8 text, so text tools cannot change it."""


#: The largest file edit, write and apply_patch change: its whole text (and a diff of it) is held
#: in memory to change it, a few times its size; larger files are changed by commands.
MAX_CHANGED_BYTES = 32 * 1024 * 1024


class FileTooLargeError(ToolInputError):
    """A file too large for the text tools to hold; nothing was read whole or written."""


def changeable_bytes(fs: FileSystemBroker, path: str) -> bytes:
    """The bytes of a file a text tool will change, at most ``MAX_CHANGED_BYTES``: the one read
    of an existing file by edit, write and apply_patch. Read with that limit (never stat first),
    so a file that grows meanwhile cannot make Roder hold more."""
    data = fs.read_bytes(path, max_bytes=MAX_CHANGED_BYTES + 1)
    if len(data) > MAX_CHANGED_BYTES:
        raise FileTooLargeError(
            f"{path} is larger than {MAX_CHANGED_BYTES // (1024 * 1024)} MiB, the most edit, write and apply_patch "
            "change (they hold the whole text); change it with a command instead (sed -i, a script); nothing was written"
        )
    return data


def current_text(fs: FileSystemBroker, path: str) -> TextFile | None:
    """The file as text, None when it does not exist; a binary file raises BinaryFileError."""
    if not fs.exists(path):
        return None
    data = changeable_bytes(fs, path)
    if looks_binary(data):
        raise BinaryFileError(f"{path} is a binary file; edit changes text files only")
    try:
        return TextFile.decode(data)
    except UnicodeDecodeError as exc:
        raise BinaryFileError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def previous_text(fs: FileSystemBroker, path: str) -> tuple[TextFile | None, bool]:
    """For whole-file writes: (the old text or None, whether a file existed)."""
    try:
        before = current_text(fs, path)
    except BinaryFileError:
        return None, True
    return before, before is not None


class WriteArguments(ToolArguments):
    path: PathArgument = Field(description="file to write (relative to the workspace, or absolute)")
    content: str = Field(description="the complete new content")


class WriteTool(FileEditTool):
    name = "write"
    description = (
        "Create a file or replace its whole content; missing parent folders are created. Prefer edit "
        "for changing part of an existing file. Replacing an existing file needs a read of it first in this "
        "conversation, and is refused if the file changed on disk since you last read or wrote it. Returns "
        "a summary of the change."
    )
    arguments_model = WriteArguments

    def _plan(self, ctx: ToolExecutionContext, call: ToolCall) -> tuple[str, str, TextFile | None, bool]:
        """(path, content, the old text or None, whether a file existed), after the checks that
        refuse the call: the preview and the run share them, so a write that would be refused
        is refused before anyone is asked to approve it."""
        args = parse_arguments(WriteArguments, call)
        if args.path.endswith(("/", "\\")):
            raise ToolInputError(f"{args.path} names a folder (it ends with '/'); give the path of the file to write")
        fs = ctx.brokers.fs
        exists = fs.exists(args.path)
        if exists and fs.stat(args.path).kind == "dir":
            raise ToolInputError(f"{args.path} is a folder; give the path of the file to write")
        data = changeable_bytes(fs, args.path) if exists else None
        check_whole_write(ctx, args.path, fs.display(fs.resolve(args.path, write=True)), data)
        before, existed = previous_text(fs, args.path)
        return args.path, args.content, before, existed

    @staticmethod
    def _content(content: str) -> tuple[str, str]:
        """The content to write, and a note when it was escaped twice (``escaped_twice``) or read's
        line numbers were taken out of it."""
        unescaped = escaped_twice(content)
        if unescaped is not None:
            return unescaped, f" ({ESCAPED_TWICE}; check the file)"
        plain = without_line_numbers(content)
        return (content, "") if plain is None else (plain, f" ({LINE_NUMBERS_LEFT_OUT}; check the file)")

    async def show(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        path, content, before, _existed = self._plan(ctx, call)
        content, _note = self._content(content)
        return {"diff": unified_diff(before.text if before else "", content, path)}

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        path, content, before, existed = self._plan(ctx, call)
        content, note = self._content(content)
        fs = ctx.brokers.fs
        # An existing file keeps its line endings and byte order mark.
        encoder = before or TextFile(text="", bom=False, crlf=False)
        new_text = content.replace("\r\n", "\n") if encoder.crlf else content
        written = encoder.encode(new_text)
        real = fs.write_bytes(path, written)
        shown = fs.display(real)
        old_text = before.text if before else ""
        added, removed = diff_stats(old_text, new_text)
        lines = new_text.count("\n") + (0 if new_text.endswith("\n") or not new_text else 1)
        if not existed:
            summary = f"created {shown} ({lines} lines, {len(content.encode())} bytes)"
        elif before is None:
            summary = f"replaced the binary file {shown} with {lines} lines of text"
        elif old_text == new_text:
            summary = f"{shown} already had this content; nothing changed"
        else:
            summary = f"updated {shown}: +{added} -{removed} lines (now {lines} lines)"
        summary += note
        warning = syntax_regression(shown, before.text if before else None, new_text)
        if warning:
            summary = f"{warning}\n{summary}"
        change = FileChange(path=shown, kind="update" if existed else "add", diff=unified_diff(old_text, new_text, shown))
        return file_change_result(
            call,
            summary,
            [change],
            {
                "path": shown,
                "created": not existed,
                "added": added,
                "removed": removed,
                "invalid_after": warning is not None,
                **record(ctx, {str(real): digest_of(written)}),
            },
        )
