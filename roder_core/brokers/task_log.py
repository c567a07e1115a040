"""A background task's output: every byte in a file, read back in capped slices.

A task can run for hours, so nothing grows in memory: output goes straight to a log file
(already redacted by the process broker), up to ``SPILL_CAP_BYTES``; past that the file starts
over and readers are told how much was discarded. Offsets are positions in the whole stream,
so ``task_output {since}`` keeps working across a restart of the file. A slice larger than the
bash tool's limits (2000 lines or 50 KB) keeps its head and tail and names the file, like
command output.
"""

from __future__ import annotations

import codecs
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from roder_core.brokers.command_output import MAX_BYTES, MAX_LINES, SPILL_CAP_BYTES, head_and_tail
from roder_core.brokers.private_files import open_private
from roder_core.brokers.terminal_text import terminal_text

#: The last line shown in task lists is cut to this many characters.
LAST_LINE_CHARS = 200


@dataclass(frozen=True)
class TaskOutputSlice:
    """Output from offset ``since`` to ``next``, as text for a model or a client."""

    text: str
    since: int
    #: Pass this as ``since`` next time to get only what came after.
    next: int
    total_bytes: int
    #: Bytes between ``since`` and ``next`` left out of ``text`` (head and tail kept).
    omitted_bytes: int
    #: Output older than this offset was discarded (the log restarted at its size cap).
    discarded_before: int
    path: str


class TaskLog:
    """Append-only output of one task. ``feed`` takes bytes (a process), ``write`` text (an agent)."""

    def __init__(self, path: Path, cap_bytes: int = SPILL_CAP_BYTES) -> None:
        self.path = path
        self._cap = cap_bytes
        self._file: BinaryIO | None = open_private(path)
        #: Stream offset of the file's first byte.
        self._base = 0
        self.total_bytes = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self.last_line = ""

    def feed(self, data: bytes) -> None:
        if not data or self._file is None:
            return
        if self.total_bytes - self._base + len(data) > self._cap:
            self._file.seek(0)
            self._file.truncate()
            self._base = self.total_bytes
        self._file.write(data)
        self._file.flush()
        self.total_bytes += len(data)
        self._track_last_line(self._decoder.decode(data))

    def write(self, text: str) -> None:
        self.feed(text.encode("utf-8"))

    def _track_last_line(self, text: str) -> None:
        lines = (self._partial + text).replace("\r", "\n").split("\n")
        self._partial = lines[-1][-LAST_LINE_CHARS:]
        complete = [line for line in lines[:-1] if line.strip()]
        if self._partial.strip():
            self.last_line = self._partial.strip()[:LAST_LINE_CHARS]
        elif complete:
            self.last_line = complete[-1].strip()[:LAST_LINE_CHARS]

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def read(self, since: int = 0) -> TaskOutputSlice:
        """Output after offset ``since`` (0: everything kept), capped like command output."""
        if since < 0:
            raise ValueError("since must be 0 or more")
        end = self.total_bytes
        start = min(max(since, self._base), end)
        size = end - start
        with open(self.path, "rb") as handle:
            handle.seek(start - self._base)
            if size <= MAX_BYTES:
                data = handle.read(size)
                text = data.decode("utf-8", errors="replace")
                if text.count("\n") <= MAX_LINES:
                    return self._slice(text, since, end, 0)
            first_line = 1 + _newlines(handle, 0, start - self._base)
            newlines = _newlines(handle, start - self._base, size)
            handle.seek(start - self._base)
            head = handle.read(min(size, MAX_BYTES // 2))
            tail_start = max(end - self._base - MAX_BYTES // 2, start - self._base + len(head))
            before = 1 if tail_start > start - self._base else 0
            handle.seek(tail_start - before)
            tail = handle.read()
        text, omitted = head_and_tail(
            head,
            tail[before:],
            size=size,
            newlines=newlines,
            tail_at_line_start=not before or tail[:1] == b"\n",
            path=self.path,
            first_line=first_line,
            offset=start - self._base,
        )
        return self._slice(text, since, end, omitted)

    def _slice(self, text: str, since: int, end: int, omitted: int) -> TaskOutputSlice:
        if since < self._base:
            text = f"[output before byte {self._base} was discarded: the log keeps the last {self._cap} bytes]\n" + text
        return TaskOutputSlice(
            text=terminal_text(text),
            since=since,
            next=end,
            total_bytes=self.total_bytes,
            omitted_bytes=max(omitted, 0),
            discarded_before=self._base,
            path=str(self.path),
        )


def _newlines(handle: BinaryIO, start: int, size: int) -> int:
    """How many line ends ``size`` bytes of the file hold from ``start`` (read in blocks)."""
    handle.seek(start)
    count = 0
    while size > 0:
        block = handle.read(min(size, 1 << 20))
        if not block:
            break
        count += block.count(b"\n")
        size -= len(block)
    return count
