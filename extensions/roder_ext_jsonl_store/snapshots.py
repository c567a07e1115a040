"""Snapshots of folded threads, so resuming a long thread reads only what was appended since.

The thread file stays the append-only source of truth. A snapshot caches the reducer's state
after the file's first ``offset`` bytes (``.snapshots/<id>.snap`` beside the threads): a JSON
line of metadata, then the thread as JSON. It is trusted only while the file still starts with
the bytes it was taken from: a fingerprint of the first and last few KB before ``offset`` is
compared, so a file that was truncated, rewritten or replaced falls back to a full fold (which
writes a fresh snapshot). Lines appended by any writer after ``offset`` are parsed and folded
on top, exactly as a full load would. A snapshot that does not parse is ignored and replaced;
losing one costs time, never data.

Two kinds per thread: the whole folded thread (``<id>.snap``), and its recent part
(``<id>.recent``, see ``recent.py``): the same state with the turns before the latest
compaction's kept part left out and named by id (``older``), which is all a resume reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from roder_core.brokers.data_paths import component
from roder_core.ir import CompactionItem, Thread

from .files import CLOEXEC, LineProblem, write_all

log = logging.getLogger(__name__)

SNAPSHOT_DIR = ".snapshots"
SNAPSHOT_SUFFIX = ".snap"
RECENT_SUFFIX = ".recent"
FORMAT = 1
#: Files smaller than this fold about as fast as a snapshot reads back; they get none.
MIN_BYTES = 256 * 1024
#: A recent snapshot is taken again once this much was appended after it (it is small, and
#: every appended line is parsed again at each resume until then).
RECENT_REFRESH_BYTES = 32 * 1024
#: Bytes fingerprinted at each end of the snapshotted prefix.
CHECK_BYTES = 4096


@dataclass
class Snapshot:
    """The folded (not yet settled) thread after the first ``offset`` bytes (``lines`` lines)."""

    offset: int
    lines: int
    fingerprint: str
    problems: list[LineProblem]
    thread: Thread
    #: Ids of the turns before ``thread.turns`` that were left out (a recent snapshot), in order.
    older: list[str] = field(default_factory=list)


def snapshot_path(directory: Path, thread_id: str) -> Path:
    return directory / SNAPSHOT_DIR / (component(thread_id, "thread id") + SNAPSHOT_SUFFIX)


def recent_path(directory: Path, thread_id: str) -> Path:
    return directory / SNAPSHOT_DIR / (component(thread_id, "thread id") + RECENT_SUFFIX)


def fingerprint(head: bytes, tail: bytes) -> str:
    """A digest of the first and last ``CHECK_BYTES`` of a file prefix."""
    return hashlib.blake2b(head + b"\0" + tail, digest_size=16).hexdigest()


def fingerprint_of_bytes(data: bytes, offset: int) -> str:
    return fingerprint(data[: min(CHECK_BYTES, offset)], data[max(offset - CHECK_BYTES, 0) : offset])


def fingerprint_of_fd(fd: int, offset: int) -> str:
    head = os.pread(fd, min(CHECK_BYTES, offset), 0)
    start = max(offset - CHECK_BYTES, 0)
    return fingerprint(head, os.pread(fd, offset - start, start))


def recent_start(thread: Thread) -> int:
    """The index of the first turn the thread's next model call can see: the turn holding the
    latest compaction's first kept item (the compaction's own turn when it keeps none). 0 when
    the thread was never compacted (every turn is part of the next request) or the kept item
    cannot be found."""
    turns = thread.turns
    for t in range(len(turns) - 1, -1, -1):
        items = turns[t].items
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            if not isinstance(item, CompactionItem):
                continue
            kept = item.first_kept_item_id
            if kept is None:
                return t
            if any(it.id == kept for it in items[:i]):
                return t
            return next((k for k in range(t - 1, -1, -1) if any(it.id == kept for it in turns[k].items)), 0)
    return 0


def read_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at ``path``, or None when there is none or it cannot be read."""
    try:
        with path.open("rb") as file:  # two reads, so the large body is never copied again
            meta_line, body = file.readline(), file.read()
    except OSError:
        return None
    try:
        meta = json.loads(meta_line)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return None
        return Snapshot(
            offset=int(meta["offset"]),
            lines=int(meta["lines"]),
            fingerprint=str(meta["fingerprint"]),
            problems=[LineProblem(int(line), str(reason)) for line, reason in meta["problems"]],
            thread=Thread.model_validate_json(body),
            older=[str(turn_id) for turn_id in meta.get("older", [])],
        )
    except (ValueError, KeyError, TypeError) as exc:  # JSON, pydantic and shape errors
        log.info("%s: ignoring an unreadable snapshot (%s)", path.name, type(exc).__name__)
        return None


def write_snapshot(path: Path, snapshot: Snapshot) -> int:
    """Write atomically (temporary file, rename); a failure only costs the next load time.
    Returns the bytes written (0 on a failure)."""
    meta = {
        "format": FORMAT,
        "offset": snapshot.offset,
        "lines": snapshot.lines,
        "fingerprint": snapshot.fingerprint,
        "problems": [[p.line, p.reason] for p in snapshot.problems],
        "older": snapshot.older,
    }
    body = snapshot.thread.model_dump_json(by_alias=True).encode()
    # A name of its own per writer: two processes (or threads) may snapshot the same thread.
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | CLOEXEC, 0o600)
        try:
            write_all(fd, json.dumps(meta).encode() + b"\n")
            write_all(fd, body)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        log.info("%s: snapshot not written (%s)", path.name, exc)
        with contextlib.suppress(OSError):
            temp.unlink()
        return 0
    return len(body)


def remove_snapshot(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
