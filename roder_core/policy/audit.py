"""The audit log: one JSON line per sensitive action or policy decision, hash-chained.

Each record carries ``seq``, ``ts``, ``kind``, its fields, ``prev`` (the previous record's hash)
and ``hash`` = SHA-256 of the canonical JSON of the record without ``hash``. Changing, inserting,
reordering or removing a line breaks the chain from there on; ``roder audit verify`` says where.
A sidecar ``audit.jsonl.head`` holds the last sequence number and hash, so cutting lines off the
end is caught too (unless both files are rewritten together: keep a copy of the head elsewhere if
you need that). Appends take an exclusive file lock, so several Roder processes can share one
log. Known secret values are redacted before a line is written.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

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


class AuditLog:
    """Appends hash-chained records to ``path``; never raises into the caller's action."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None) -> None:
        self.path = path
        self._redact = redact or (lambda text: text)
        self._folder_ready = False

    @property
    def head_path(self) -> Path:
        return self.path.with_name(self.path.name + ".head")

    def record(self, kind: str, fields: dict[str, Any] | None = None) -> None:
        try:
            self._append(kind, fields or {})
        except Exception as exc:  # auditing must not break the action, but must be visible
            log.error("could not write the audit log %s: %s", self.path, exc)

    __call__ = record

    def _append(self, kind: str, fields: dict[str, Any]) -> None:
        clean, _ = redact_data(json.loads(json.dumps(fields, default=str)), self._redact)
        if not self._folder_ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._folder_ready = True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                last = _last_line(handle)
                if last:
                    try:
                        previous = json.loads(last)
                        prev_hash, seq = previous["hash"], int(previous["seq"]) + 1
                    except (ValueError, KeyError, TypeError):
                        prev_hash, seq = hashlib.sha256(last).hexdigest(), -1
                else:
                    prev_hash, seq = GENESIS, 0
                record = {"seq": seq, "ts": round(time.time(), 6), "kind": kind, **clean, "prev": prev_hash}
                record["hash"] = record_hash(record)
                handle.seek(0, os.SEEK_END)
                handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
                handle.flush()
                self._write_head(seq, record["hash"])
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _write_head(self, seq: int, digest: str) -> None:
        """One fixed-width line rewritten in place: a single small write (a rename per record
        would cost more than the record itself), done while the log's lock is held."""
        line = json.dumps({"seq": seq, "hash": digest}).ljust(HEAD_WIDTH - 1) + "\n"
        fd = os.open(self.head_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, line.encode("ascii"), 0)
        finally:
            os.close(fd)


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
