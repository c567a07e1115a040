"""The audit log: one JSON line per sensitive action or policy decision, hash-chained.

Each record carries ``seq``, ``ts``, ``kind``, its fields, ``prev`` (the previous record's hash)
and ``hash`` = SHA-256 of the canonical JSON of the record without ``hash``. Changing, inserting,
reordering or removing a line breaks the chain from there on; ``roder audit verify`` says where.
A sidecar ``audit.jsonl.head`` holds the last sequence number and hash, so cutting lines off the
end is caught too (unless both files are rewritten together: keep a copy of the head elsewhere if
you need that). Appends take an exclusive file lock, so several Roder processes can share one
log. Known secret values are redacted before a line is written.

A writer keeps the log open between records and remembers where its last record ended and what
it hashed to, so a record is one locked write, not an open and a read of the log's tail. Under
the lock it checks that the path still names the file it holds (a log moved away or deleted is
reopened, as a new one is started) and that the file is exactly as it left it (same size and
modification time; another process's record, a truncation or an edit makes it read the tail
again). Children never share its descriptor: a forked process opens its own, since a lock held
through a shared descriptor would not keep the two apart.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, cast

from roder_core.brokers.secrets import redact_data

log = logging.getLogger(__name__)

GENESIS = "0" * 64
HEAD_WIDTH = 128


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _last_line(handle: BinaryIO) -> bytes:
    """The last complete line of a file opened in binary mode (empty if none)."""
    handle.seek(0, os.SEEK_END)
    end = handle.tell()
    if end == 0:
        return b""
    block = 4096
    data = b""
    position = end
    while position > 0:
        step = min(block, position)
        position -= step
        handle.seek(position)
        data = handle.read(step) + data
        stripped = data.rstrip(b"\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return data.rstrip(b"\n")


class _Tail(NamedTuple):
    """Where this writer's last record left the log: the file (device, inode), its size and
    modification time then, and the record's sequence number and hash."""

    file: tuple[int, int]
    size: int
    mtime_ns: int
    seq: int
    digest: str


class AuditLog:
    """Appends hash-chained records to ``path``; never raises into the caller's action."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None) -> None:
        self.path = path
        self._name, self._head_name = str(path), str(self.head_path)
        self._redact = redact or (lambda text: text)
        self._folder_ready = False
        #: The open log (read-write, appending), its head, and the process that opened them.
        self._handle: BinaryIO | None = None
        self._head: BinaryIO | None = None
        self._opened_by = 0
        self._tail: _Tail | None = None
        #: The file lock is per open file, not per thread: threads of one process take turns here.
        self._lock = threading.Lock()

    @property
    def head_path(self) -> Path:
        return self.path.with_name(self.path.name + ".head")

    def record(self, kind: str, fields: dict[str, Any] | None = None) -> None:
        try:
            self._append(kind, fields or {})
        except Exception as exc:  # auditing must not break the action, but must be visible
            log.error("could not write the audit log %s: %s", self.path, exc)

    __call__ = record

    def close(self) -> None:
        """Let go of the open log; a later record opens it again."""
        with self._lock:
            self._release()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _release(self) -> None:
        handle, head, self._handle, self._head, self._tail = self._handle, self._head, None, None, None
        # A fork closes only its copies: the parent's descriptors and their lock stay its own.
        for held in (handle, head):
            if held is not None:
                held.close()

    def _locked_handle(self) -> BinaryIO:
        """The open log, locked, still the file at ``path`` (opened again when it was moved
        away, deleted or replaced, or when this process is a fork of the one that opened it)."""
        while True:
            if self._handle is None or self._opened_by != os.getpid():
                self._release()
                if not self._folder_ready:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._folder_ready = True
                self._handle = _open(self._name, os.O_RDWR | os.O_CREAT | os.O_APPEND, "r+b")
                self._opened_by = os.getpid()
            handle = self._handle
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if _names(handle.fileno(), self._name):
                return handle
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            self._release()

    def _append(self, kind: str, fields: dict[str, Any]) -> None:
        clean, _ = redact_data(json.loads(json.dumps(fields, default=str)), self._redact)
        with self._lock:
            handle = self._locked_handle()
            try:
                now = os.fstat(handle.fileno())
                tail = self._tail
                if tail is not None and (tail.file, tail.size, tail.mtime_ns) == (
                    (now.st_dev, now.st_ino),
                    now.st_size,
                    now.st_mtime_ns,
                ):
                    prev_hash, seq = tail.digest, tail.seq + 1
                else:
                    prev_hash, seq = _follows(_last_line(handle))
                record = {"seq": seq, "ts": round(time.time(), 6), "kind": kind, **clean, "prev": prev_hash}
                record["hash"] = record_hash(record)
                self._tail = None  # until the write is known to be whole
                _write_all(handle.fileno(), (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
                self._write_head(seq, record["hash"])
                after = os.fstat(handle.fileno())
                self._tail = _Tail((after.st_dev, after.st_ino), after.st_size, after.st_mtime_ns, seq, record["hash"])
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _write_head(self, seq: int, digest: str) -> None:
        """One fixed-width line rewritten in place: a single small write (a rename per record
        would cost more than the record itself), done while the log's lock is held; into the
        file the head's path names now (it is opened again when moved away or deleted)."""
        line = json.dumps({"seq": seq, "hash": digest}).ljust(HEAD_WIDTH - 1) + "\n"
        if self._head is not None and not _names(self._head.fileno(), self._head_name):
            self._head.close()
            self._head = None
        if self._head is None:
            self._head = _open(self._head_name, os.O_WRONLY | os.O_CREAT, "wb")
        os.pwrite(self._head.fileno(), line.encode("ascii"), 0)


def _open(path: str, flags: int, mode: str) -> BinaryIO:
    """``path`` opened with ``flags``, private when created, unbuffered (each write is one)."""
    return cast(BinaryIO, os.fdopen(os.open(path, flags, 0o600), mode, buffering=0))


def _names(fd: int, path: str) -> bool:
    """Whether ``path`` names the open file ``fd`` (not moved away, deleted or replaced)."""
    try:
        held, named = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` (a write may take less than it is given, as a full disk's does)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _follows(last: bytes) -> tuple[str, int]:
    """The previous hash and the sequence number of a record written after ``last`` (the log's
    last line; empty for an empty log). A line that is not a record still chains (by its bytes'
    hash), with sequence number -1 so that ``verify`` names the break."""
    if not last:
        return GENESIS, 0
    try:
        previous = json.loads(last)
        return previous["hash"], int(previous["seq"]) + 1
    except (ValueError, KeyError, TypeError):
        return hashlib.sha256(last).hexdigest(), -1


@dataclass
class VerifyReport:
    path: Path
    records: int = 0
    head_hash: str = GENESIS
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(path: Path) -> VerifyReport:
    """Walk the chain; every problem names its line number."""
    report = VerifyReport(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        report.problems.append(f"{path}: no audit log yet")
        return report
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        report.problems.append(f"line {len(lines)}: incomplete last line (was Roder killed while writing?)")
    prev = GENESIS
    for number, raw in enumerate(lines, start=1):
        try:
            record = json.loads(raw)
        except ValueError:
            report.problems.append(f"line {number}: not valid JSON")
            prev = hashlib.sha256(raw).hexdigest()
            continue
        if not isinstance(record, dict) or "hash" not in record:
            report.problems.append(f"line {number}: not an audit record")
            continue
        if record.get("seq") != number - 1:
            report.problems.append(f"line {number}: sequence number {record.get('seq')} (expected {number - 1})")
        if record.get("prev") != prev:
            report.problems.append(f"line {number}: does not follow the previous line (chain broken)")
        if record_hash(record) != record["hash"]:
            report.problems.append(f"line {number}: content does not match its hash (modified)")
        prev = record["hash"]
        report.records += 1
    report.head_hash = prev
    head_file = path.with_name(path.name + ".head")
    try:
        head = json.loads(head_file.read_text(encoding="utf-8"))
        head_seq, head_hash = int(head["seq"]), str(head["hash"])
    except FileNotFoundError:
        if report.records:
            report.problems.append(f"{head_file.name} is missing, so a cut-off end cannot be ruled out")
        return report
    except (ValueError, KeyError, TypeError):
        report.problems.append(f"{head_file.name} is unreadable")
        return report
    if head_hash != prev or head_seq != report.records - 1:
        report.problems.append(
            f"the log ends at record {report.records - 1} but {head_file.name} says {head_seq}: "
            "lines were removed from the end or the log was rewritten"
        )
    return report
