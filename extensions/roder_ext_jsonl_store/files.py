"""The on-disk format of one thread file, and the low-level care that keeps it crash-safe.

A thread file is UTF-8 JSON Lines: a header line ``{"type": "header", ...ThreadHeader}`` followed
by one runtime event per line, each written with a single ``write`` so a killed process leaves
either the whole line or a torn tail, never an interleaving. Reading skips lines that do not parse
(and says which); the torn tail of a crashed writer is moved to ``<id>.torn`` and cut off so the
next append starts on a clean line. A writer holds an exclusive ``flock`` on its file, which both
stops two processes from interleaving turns in one thread and tells readers the tail is live.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

try:  # POSIX; elsewhere files are simply not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: Thread files are never inherited by child processes (tools run commands).
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
HEADER_TYPE = "header"
SUFFIX = ".jsonl"
TORN_SUFFIX = ".torn"


def thread_path(directory: Path, thread_id: str) -> Path:
    """The thread's file; the id comes from clients and stored data, so it must be one plain
    name (``brokers.data_paths``; imported here, as ``sessions list`` reads the index without it)."""
    from roder_core.brokers.data_paths import component

    return directory / (component(thread_id, "thread id") + SUFFIX)


def encode(data: dict[str, Any]) -> bytes:
    """One line, newline included: compact separators, non-ASCII kept readable."""
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def header_line(header: dict[str, Any]) -> bytes:
    return encode({"type": HEADER_TYPE, **header})


# Plain classes, not dataclasses: `sessions list` imports this module without the runtime, and
# `dataclasses` (with the `inspect` it pulls) was a tenth of that command's start-up.


class LineProblem(NamedTuple):
    """A line that was skipped, with enough to find it again (1-based line number)."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


class RawThreadFile:
    """A thread file split into its header, its event lines and what could not be read."""

    def __init__(
        self,
        header: dict[str, Any] | None,
        events: list[tuple[int, bytes]] | None = None,
        problems: list[LineProblem] | None = None,
        torn_tail: bytes = b"",
        size: int = 0,
    ) -> None:
        self.header = header
        self.events: list[tuple[int, bytes]] = [] if events is None else events
        self.problems: list[LineProblem] = [] if problems is None else problems
        #: Bytes after the last newline (a write cut short by a crash), or b"" when the file is whole.
        self.torn_tail = torn_tail
        self.size = size


def split_file(data: bytes, *, first_line: int = 1) -> RawThreadFile:
    """Split file bytes into header and event lines without interpreting the events.

    ``data`` may also be the part of a file after a snapshot's offset: ``first_line`` is then
    the number of its first line, and no header is looked for.
    """
    last_newline = data.rfind(b"\n")
    lines = data[:last_newline].split(b"\n") if last_newline >= 0 else []
    tail = data[last_newline + 1 :]
    raw = RawThreadFile(header=None, size=len(data))
    if tail.strip():
        try:
            json.loads(tail)
        except ValueError:
            raw.torn_tail = tail
            raw.problems.append(LineProblem(first_line + len(lines), "torn last line (the writer stopped mid-line)"))
        else:  # a complete line that only lacks its newline: keep it
            lines.append(tail)
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        if raw.header is None and number == 1:
            try:
                first = json.loads(line)
            except ValueError:
                raw.problems.append(LineProblem(1, "unreadable header line"))
                continue
            if isinstance(first, dict) and first.get("type") == HEADER_TYPE:
                raw.header = first
                continue
        raw.events.append((number, line))
    return raw


def read_file(path: Path) -> RawThreadFile:
    return split_file(path.read_bytes())


def iter_event_dicts(raw: RawThreadFile) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Each event line as a dict, or None (with a problem recorded) when it is not JSON."""
    for number, line in raw.events:
        try:
            data = json.loads(line)
        except ValueError:
            raw.problems.append(LineProblem(number, "not valid JSON"))
            yield number, None
            continue
        if not isinstance(data, dict):
            raw.problems.append(LineProblem(number, "not a JSON object"))
            yield number, None
            continue
        yield number, data


# --------------------------------------------------------------------------- locking


def try_lock(fd: int, *, exclusive: bool = True) -> bool:
    """Take an advisory lock without waiting; False when another open file holds it."""
    if fcntl is None:  # pragma: no cover - Windows
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def held_by_writer(path: Path) -> bool:
    """True when some process (this one included) has the file open for appending."""
    try:
        fd = os.open(path, os.O_RDONLY | CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        return not try_lock(fd, exclusive=False)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- repair


def repair_tail(fd: int, path: Path) -> bool:
    """Make a file end on a line boundary; call with the writer lock held.

    A tail that parses is completed with a newline; a torn one is appended to ``<id>.torn``
    (nothing is thrown away) and cut off. Returns True when the file was changed.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    tail_start = size
    chunk = 4096
    while tail_start > 0:
        start = max(tail_start - chunk, 0)
        block = os.pread(fd, tail_start - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            tail_start = start + newline + 1
            break
        tail_start = start
    if tail_start == size:
        return False
    tail = os.pread(fd, size - tail_start, tail_start)
    try:
        json.loads(tail)
    except ValueError:
        sidecar = os.open(path.with_suffix(TORN_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_APPEND | CLOEXEC, 0o600)
        try:
            write_all(sidecar, tail + b"\n")
            os.fsync(sidecar)
        finally:
            os.close(sidecar)
        os.ftruncate(fd, tail_start)
    else:
        os.write(fd, b"\n")
    os.fsync(fd)
    return True


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until everything is written (a regular file may take a short write)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(directory: Path) -> None:
    """Persist a new directory entry (a created or renamed file) across power loss."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
