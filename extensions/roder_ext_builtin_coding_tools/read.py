"""``read {path, offset?, limit?}``: a text file with line numbers, in windows."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from pathlib import PurePath
from typing import Any

from pydantic import Field

from roder_core.ir import Attachment
from roder_core.kernel.tool_args import PathArgument, ToolArguments, parse_arguments
from roder_core.kernel.tools import CLIENT_TEXT_READER, PolicySubject, ToolCall, ToolExecutionContext, ToolResult
from roder_core.media.images import MAX_INPUT_BYTES, measure, sniff_image

from .common import BuiltinTool, TextFile, ToolInputError, decode_fallback, encoding_note, path_subject, text_encoding
from .freshness import digest_on_disk, key_of, record

DEFAULT_LIMIT = 2000
#: A path with a line location after it: ``a.py:12``, ``a.py:12:5``, ``a.py:10-20``, ``a.py#L10-L20``.
_LINE_SUFFIX = re.compile(r"(?P<path>.+?)(?::|#L)(?P<line>\d+)(?::\d+|-L?\d+)?")
MAX_BYTES = 50_000
MAX_LINE_CHARS = 2000
#: A UTF-16 file is decoded whole, up to this size.
MAX_WHOLE_BYTES = 16 * 1024 * 1024
#: Larger images are refused; smaller ones are stored as media items and scaled to what every
#: vision API accepts (``roder_core.media.images``).
MAX_IMAGE_BYTES = MAX_INPUT_BYTES


#: Characters that make a path a glob (``src/*.py``), which read does not expand.
_GLOB_MARKS = frozenset("*?[{")


class ReadArguments(ToolArguments):
    path: PathArgument = Field(description="file to read (relative to the workspace, or absolute)")
    offset: int = Field(1, ge=1, description="first line to return (1-based)")
    limit: int = Field(DEFAULT_LIMIT, ge=1, description="how many lines to return")


class ReadTool(BuiltinTool):
    name = "read"
    description = (
        "Read a file from the workspace. Returns numbered lines (cat -n style): by default the first "
        f"{DEFAULT_LIMIT} lines or {MAX_BYTES // 1000} KB; pass offset (1-based line number) and limit to read "
        f"other parts. Lines longer than {MAX_LINE_CHARS} characters are cut. Text that is not UTF-8 is decoded "
        "(Latin-1, Windows-1252, UTF-16) and the result says which encoding; binary files are refused; "
        "images are returned as attachments when the model accepts images. Paths are relative to the workspace."
    )
    arguments_model = ReadArguments
    kind = "read"
    read_only = True

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        return [path_subject(self.name, str(arguments.get("path", "")), writes=False)]

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        result = await self._read(ctx, call)
        if not result.is_error and not result.attachments:  # the thread has now seen this text file
            path = parse_arguments(ReadArguments, call).path
            seen = record(ctx, {key_of(ctx.brokers.fs, path): digest_on_disk(ctx.brokers.fs, path)})
            result.data = {**(result.data or {}), **seen}
        return result

    async def _read(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(ReadArguments, call)
        path, offset, limit = args.path, args.offset, args.limit
        fs = ctx.brokers.fs
        real = fs.resolve(path)
        shown = fs.display(real)
        located = _LINE_SUFFIX.fullmatch(path)
        if located and not fs.exists(path) and fs.exists(located["path"]):
            # "a.py:12", "a.py#L10-L20": a location copied from grep's output or a link
            raise ToolInputError(
                f"{path}: no such file; to read {located['path']} from line {located['line']}, send "
                f"path={located['path']!r} and offset={located['line']}"
            )
        if _GLOB_MARKS.intersection(path) and not fs.exists(path):
            raise ToolInputError(f"{path}: no such file; read takes one file: find the files with glob, then read each")
        with fs.open_read(path) as handle:
            head = handle.read(8192)
            mime = sniff_image(head)
            if mime is not None:
                return self._image(ctx, call, shown, mime, head + handle.read(MAX_IMAGE_BYTES + 1 - len(head)))
            encoding = text_encoding(head)
            if encoding is None:
                size = fs.stat(path).size
                return ToolResult.error(
                    call,
                    f"{shown} looks like a binary file ({size} bytes); read shows text only. Inspect it with "
                    f"bash instead, e.g. `file {shown}` or `xxd {shown} | head`.",
                )
            # The broker resolved and opened the file (scope, symlinks, file type); an editor
            # client then supplies the text as it shows it, unsaved changes included.
            reader = ctx.extra.get(CLIENT_TEXT_READER)
            text = await reader(real) if reader is not None else None
            if text is not None:
                data = text.encode("utf-8")
                lines = _memory_lines(data)
                return self._window(call, shown, lines, lambda: sum(1 for _ in lines), offset, limit)
            handle.seek(0)
            if encoding == "utf-16":  # not line-by-line in bytes: decode it whole (bounded)
                data = TextFile.decode(handle.read(MAX_WHOLE_BYTES)).text.encode("utf-8")
                lines = _memory_lines(data)
                result = self._window(call, shown, lines, lambda: sum(1 for _ in lines), offset, limit)
            else:
                result = self._window(call, shown, iter(handle), lambda: _count_lines(handle), offset, limit, encoding)
            if encoding != "utf-8" and not result.is_error:
                result.text = f"{encoding_note(encoding)}\n{result.text}"
                result.data["encoding"] = encoding
            return result

    def _image(self, ctx: ToolExecutionContext, call: ToolCall, shown: str, mime: str, data: bytes) -> ToolResult:
        if ctx.model is None or not ctx.model.images:
            model = ctx.model.id if ctx.model is not None else "this model"
            return ToolResult.error(call, f"{shown} is an image ({mime}); {model} does not accept images, so read cannot show it")
        if len(data) > MAX_IMAGE_BYTES:
            return ToolResult.error(call, f"{shown} is an image larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MB")
        if measure(data) is None:  # never "attached" and then dropped for being unreadable
            return ToolResult.error(
                call,
                f"{shown} starts like an image ({mime}) but cannot be decoded (damaged or cut short); "
                f"inspect it with bash (`file {shown}`)",
            )
        attachment = Attachment(name=shown, mime_type=mime, data_base64=base64.b64encode(data).decode("ascii"), path=shown)
        return ToolResult(
            id=call.id,
            name=call.name,
            text=f"image {shown} ({mime}, {len(data)} bytes) is attached",
            data={"path": shown, "mime_type": mime, "bytes": len(data)},
            attachments=[attachment],
        )

    def _window(
        self,
        call: ToolCall,
        shown: str,
        lines: Iterator[bytes],
        count_rest: Callable[[], int],
        offset: int,
        limit: int,
        encoding: str = "utf-8",
    ) -> ToolResult:
        """Numbered lines ``offset``.. of ``lines``; ``count_rest`` counts the lines not consumed."""
        out: list[str] = []
        used = 0
        last = offset - 1
        capped = cut_lines = False
        total = 0
        #: (number, encoding) of the first line that is not UTF-8 in a file whose start is UTF-8
        late: tuple[int, str] | None = None
        for total, raw in enumerate(lines, start=1):
            if total < offset:
                continue
            if total >= offset + limit:
                total += count_rest()
                break
            line, fallback = _decode_line(raw, encoding)
            line = line.rstrip("\r\n")
            if fallback and late is None:
                late = (total, fallback)
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} characters]"
                cut_lines = True
            rendered = f"{total:>6}\t{line}"
            if used + len(rendered) + 1 > MAX_BYTES and out:
                capped = True
                total += count_rest()
                break
            out.append(rendered)
            used += len(rendered) + 1
            last = total
        data = {"path": shown, "start_line": offset, "end_line": last, "total_lines": total}
        if total == 0:
            return ToolResult(id=call.id, name=call.name, text=f"{shown} is empty", data=data)
        if offset > total:
            return ToolResult.error(call, f"offset {offset} is past the end of {shown} ({total} lines)")
        text = "\n".join(out)
        if last < total:
            why = f"{MAX_BYTES // 1000} KB" if capped else f"{limit} lines"
            text += f"\n\n[showing lines {offset}-{last} of {total} ({why}); continue with offset={last + 1}]"
        if cut_lines:
            text += "\n[some lines were longer than 2000 characters and were cut]"
        data["truncated"] = last < total
        if late is not None:
            text = f"[not UTF-8 from line {late[0]} on: decoded as {late[1]}; edit and write keep this encoding]\n{text}"
            data["encoding"] = late[1]
        return ToolResult(id=call.id, name=call.name, text=text, data=data)


def _decode_line(raw: bytes, encoding: str) -> tuple[str, str | None]:
    """A line's text, and the fallback encoding used when a file that starts as UTF-8 has a
    line that is not (the start decided the encoding: a Latin-1 byte far down a file)."""
    if encoding == "utf-8":
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError:
            fallback, text = decode_fallback(raw)
            return text, fallback
    try:
        return raw.decode(encoding), None
    except UnicodeDecodeError:  # cp1252 leaves five bytes undefined
        return raw.decode("latin-1"), None


def _memory_lines(data: bytes) -> Iterator[bytes]:
    """``data`` split after each LF, like iterating over a file opened in binary mode."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _count_lines(handle: Any) -> int:
    """Lines left in the file, counted in large blocks (the current line is already counted)."""
    count = 0
    tail = b"\n"
    while block := handle.read(1 << 20):
        count += block.count(b"\n")
        tail = block
    return count + (0 if tail.endswith(b"\n") else 1)
