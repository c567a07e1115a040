"""Logs Roder keeps of what others say, bounded in size: the one place their limits live.

An MCP server's stderr, the log messages it sends and a batch rollout's warnings are written
by code Roder does not control: a server that prints without end would fill the disk, a
rollout whose provider logs a warning per event would fill the worker's memory. Every such
log goes through one of the two writers here, and what a limit drops is said in the log by a
line naming how much was dropped, never silently:

- ``RotatingLogFile``: a file that, at ``FILE_CAP_BYTES``, is renamed to ``<name>.1``
  (replacing the older one, whose size the new file's first line names) and begun again, so a
  log takes at most twice its cap on disk and always holds the latest output;
- ``HeadAndTail``: lines in memory, the first and the latest ``MEMORY_CAP_BYTES / 2`` of
  them, with a line where the middle was dropped.

One record (a log message, a log line) longer than ``RECORD_CAP_CHARS`` keeps its beginning
and says how much of it was cut. Callers redact before writing, so a cut never leaves half of
a secret behind.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

#: A log file's size before it is rotated (at most twice this on disk, with ``<name>.1``).
FILE_CAP_BYTES = 8 * 1024 * 1024
#: Bytes of lines a log in memory keeps (half from its beginning, half of the latest).
MEMORY_CAP_BYTES = 4 * 1024 * 1024
#: Characters of one record kept; the rest is dropped with a note in the record.
RECORD_CAP_CHARS = 64 * 1024


def size_text(count: int) -> str:
    """A byte count for a person: ``512 bytes``, ``3.0 KiB``, ``8.0 MiB``."""
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def cut_record(text: str, cap: int = RECORD_CAP_CHARS) -> str:
    """``text`` whole if it has at most ``cap`` characters, else its beginning and a note of
    how many characters were dropped (the line ending kept)."""
    if len(text) <= cap:
        return text
    ending = "\n" if text.endswith("\n") else ""
    return f"{text[:cap]} [roder: {len(text) - cap} more characters of this record dropped]{ending}"


class RotatingLogFile:
    """Append-only text log at ``path``, 0600, rotated at ``cap`` bytes. Each write opens the
    file afresh (no descriptor to keep or leak, and several processes appending to one log each
    see the others' rotation). ``offset`` is where the caller's current part begins (see
    ``begin_part``); a rotation moves it to the new file's start."""

    def __init__(self, path: Path, cap: int | None = None) -> None:
        self.path = path
        self.cap = cap or FILE_CAP_BYTES
        self.offset = 0

    @property
    def older(self) -> Path:
        """Where the log's previous part goes at a rotation."""
        return self.path.with_name(self.path.name + ".1")

    def begin_part(self) -> None:
        """What is written from now on is the current part (a new connection's output)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = self._open()
        try:
            self.offset = os.fstat(fd).st_size
        finally:
            os.close(fd)

    def write(self, text: str) -> None:
        """Append ``text`` (cut to ``cap`` if a single write is longer), rotating first when it
        would take the file past ``cap``. OSError is the caller's to report."""
        if not text:
            return
        data = cut_record(text, self.cap // 2).encode("utf-8", errors="replace")
        fd = self._open()
        try:
            size = os.fstat(fd).st_size
            if size and size + len(data) > self.cap:
                os.close(fd)
                fd = -1
                self._rotate(size)
                fd = self._open()
            os.write(fd, data)
        finally:
            if fd >= 0:
                os.close(fd)

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    def _rotate(self, size: int) -> None:
        try:
            deleted = os.lstat(self.older).st_size
        except FileNotFoundError:
            deleted = 0
        os.replace(self.path, self.older)
        self.offset = 0
        gone = f"; {size_text(deleted)} older than that were deleted" if deleted else ""
        note = (
            f"[roder: this log reached its limit of {size_text(self.cap)}: the {size_text(size)} before this line "
            f"are in {self.older.name}{gone}]\n"
        )
        fd = self._open()
        try:
            if os.fstat(fd).st_size == 0:  # another process may have rotated and noted it first
                os.write(fd, note.encode())
        finally:
            os.close(fd)


class HeadAndTail:
    """Lines kept in memory within ``cap`` bytes: the first half from the beginning, then the
    latest, with one line saying how many lines (and bytes) between them were dropped."""

    def __init__(self, cap: int | None = None) -> None:
        self._half = (cap or MEMORY_CAP_BYTES) // 2
        self.head: list[str] = []
        self._head_bytes = 0
        self._tail: deque[tuple[str, int]] = deque()
        self._tail_bytes = 0
        self.dropped_lines = 0
        self.dropped_bytes = 0

    def add(self, line: str) -> None:
        """Keep ``line`` (cut to ``RECORD_CAP_CHARS`` first), dropping the oldest kept lines of
        the tail when the tail is over its half."""
        line = cut_record(line, min(RECORD_CAP_CHARS, self._half))
        size = len(line.encode("utf-8", errors="replace"))
        if not self._tail and self._head_bytes + size <= self._half:
            self.head.append(line)
            self._head_bytes += size
            return
        self._tail.append((line, size))
        self._tail_bytes += size
        while self._tail_bytes > self._half:
            _, gone = self._tail.popleft()
            self._tail_bytes -= gone
            self.dropped_lines += 1
            self.dropped_bytes += gone

    def __bool__(self) -> bool:
        return bool(self.head or self._tail)

    def lines(self) -> list[str]:
        """The kept lines in order, the dropped middle marked by a line of its own."""
        middle: list[str] = []
        if self.dropped_lines:
            middle = [
                f"[roder: {self.dropped_lines} lines ({size_text(self.dropped_bytes)}) of this log dropped here: "
                f"it keeps its first and latest {size_text(self._half)}]\n"
            ]
        return [*self.head, *middle, *(line for line, _ in self._tail)]

    def text(self) -> str:
        return "".join(self.lines())
