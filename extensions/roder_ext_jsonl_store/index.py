"""The thread index: one SQLite row per thread file so listing never opens the files.

The index is a cache. Each row remembers the size and mtime of the file it was built from; a
listing compares them with a directory scan and re-reads only files that changed (a crashed
process never got to update its row), adds new ones and drops deleted ones. A missing or corrupt
index is rebuilt from the files, so deleting ``index.sqlite`` while no Roder runs is always safe.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from roder_core.settings.paths import create_private

from .files import SUFFIX, RawThreadFile, held_by_writer, iter_event_dicts, read_file

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; the index is then best effort
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from roder_core.ir import ThreadSummary

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    provider TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    parent_thread TEXT,
    parent_turn TEXT,
    turn_count INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'idle',
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_cwd ON threads (cwd, updated_at);
CREATE INDEX IF NOT EXISTS threads_by_parent ON threads (parent_thread);
"""
_COLUMNS = "id, cwd, title, created_at, updated_at, provider, model, parent_thread, parent_turn, turn_count, status"


# A named tuple and a plain class rather than dataclasses: `sessions list` reads this index
# without starting the runtime, and importing `dataclasses` (and the `inspect` it pulls) was a
# tenth of that command's CPU.


class FileStamp(NamedTuple):
    size: int
    mtime_ns: int


class SummaryFold:
    """Builds a listing row from header and event dicts (wire form) without the full reducer."""

    def __init__(self) -> None:
        self.id = ""
        self.cwd = ""
        self.title = ""
        self.created_at = 0.0
        self.updated_at = 0.0
        self.provider = ""
        self.model = ""
        self.parent: dict[str, Any] | None = None
        self.turn_count = 0
        self.status = "idle"
        self._turns: set[str] = set()

    def header(self, data: dict[str, Any]) -> None:
        self.id = data.get("id", self.id)
        self.cwd = data.get("cwd", self.cwd)
        self.created_at = float(data.get("createdAt", self.created_at) or 0.0)
        self.updated_at = max(self.updated_at, self.created_at)
        self.title = data.get("title") or self.title
        self.provider = data.get("provider", self.provider)
        self.model = data.get("model", self.model)
        self.parent = data.get("parent") or self.parent

    def event(self, data: dict[str, Any]) -> None:
        method = data.get("method")
        ts = data.get("ts")
        if isinstance(ts, int | float):
            self.updated_at = max(self.updated_at, float(ts))
        if method == "thread/started" and isinstance(data.get("thread"), dict):
            self.header(data["thread"])
        elif method == "thread/title/changed":
            self.title = str(data.get("title", self.title))
        elif method == "thread/model/changed":
            self.provider = str(data.get("provider", self.provider))
            self.model = str(data.get("model", self.model))
        elif method == "thread/status/changed":
            self.status = str(data.get("status", self.status))
        elif method == "turn/started":
            turn_id = str(data.get("turnId", ""))
            if turn_id not in self._turns:
                self._turns.add(turn_id)
                self.turn_count += 1

    def row(self, stamp: FileStamp, *, live: Callable[[], bool]) -> tuple[Any, ...]:
        """The index row (``_COLUMNS``, then size and mtime). ``live()`` says a writer still
        holds the file (asked only for a thread saved mid-turn: most are idle, and asking opens
        the file again); otherwise a thread caught mid-turn by a crash is reported idle, as
        loading it will settle that turn as interrupted."""
        status = self.status if self.status in ("idle", "error") or live() else "idle"
        parent = self.parent or {}
        return (
            self.id,
            self.cwd,
            self.title,
            self.created_at,
            self.updated_at,
            self.provider,
            self.model,
            parent.get("threadId"),
            parent.get("turnId"),
            self.turn_count,
            status,
            stamp.size,
            stamp.mtime_ns,
        )


#: The start of a line as ``files.encode`` writes an event (``threadId``, ``ts``, ``method`` first):
#: most lines (items, usage, deltas) only move ``updated_at``, so their ``ts`` is read from these
#: bytes and the rest of the line is never parsed; any other line is parsed whole. Rebuilding the
#: index of 1,000 threads spent over half its time in ``json.loads`` before.
_QUICK_EVENT = re.compile(rb'\{"threadId":"[^"\\]*","ts":(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?),"method":"([^"\\]+)"')
_SUMMARY_METHODS = frozenset(
    {b"thread/started", b"thread/title/changed", b"thread/model/changed", b"thread/status/changed", b"turn/started"}
)


def summarize_file(path: Path, stamp: FileStamp) -> tuple[Any, ...] | None:
    """Read one thread file into an index row; None when it has no usable header."""
    raw = read_file(path)
    fold = SummaryFold()
    if raw.header is not None:
        fold.header(raw.header)
    for line in raw.events:
        quick = _QUICK_EVENT.match(line[1])
        if quick is not None and quick[2] not in _SUMMARY_METHODS:
            fold.updated_at = max(fold.updated_at, float(quick[1]))
            continue
        for _number, data in iter_event_dicts(RawThreadFile(header=None, events=[line])):
            if data is not None:
                fold.event(data)
    if not fold.id:
        fold.id = path.name[: -len(SUFFIX)]
    if not fold.cwd:
        return None
    return fold.row(stamp, live=lambda: held_by_writer(path))


def scan_directory(directory: Path) -> dict[str, tuple[str, FileStamp]]:
    """Every thread file in the directory (path, size and mtime: one stat each)."""
    found: dict[str, tuple[str, FileStamp]] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return found
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or not entry.is_file():
            continue
        try:
            stat = entry.stat()
        except FileNotFoundError:  # deleted while scanning
            continue
        found[entry.name[: -len(SUFFIX)]] = (entry.path, FileStamp(stat.st_size, stat.st_mtime_ns))
    return found


def _wire(row: tuple[Any, ...]) -> dict[str, Any]:
    """A row as ``ThreadSummary.wire()`` gives it (camelCase, no None), without building the model."""
    wire: dict[str, Any] = {
        "id": row[0],
        "cwd": row[1],
        "title": row[2],
        "createdAt": row[3],
        "updatedAt": row[4],
        "provider": row[5],
        "model": row[6],
    }
    if row[7]:
        wire["parent"] = {"threadId": row[7]} if row[8] is None else {"threadId": row[7], "turnId": row[8]}
    wire["turnCount"] = row[9]
    wire["status"] = row[10]
    return wire


class ThreadIndex:
    """SQLite rows for the thread files of one directory (safe for several processes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "index.sqlite"

    @contextlib.contextmanager
    def _db(self) -> Any:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            conn = self._open()
        except sqlite3.OperationalError:
            raise  # busy or locked: another process is using a healthy index; never drop it
        except sqlite3.DatabaseError as exc:
            log.warning("thread index %s is unreadable (%s); rebuilding it from the files", self.path, exc)
            with self._exclusive():
                self.drop()
                self._create()
            conn = self._open()
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _exclusive(self) -> Any:
        """Serialize index creation and rebuilds across processes with a lock file beside the
        index, so one process never drops or re-creates the table under another's feet."""
        lock_path = self.directory / "index.lock"
        create_private(lock_path)
        with open(lock_path, "a+b") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _create(self) -> None:
        """Build an empty index in a private temporary file and rename it into place, so other
        processes see either no index or a complete one, never a half-written file."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        create_private(tmp)
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        os.replace(tmp, self.path)

    def _open(self) -> sqlite3.Connection:
        if not self.path.exists():
            with self._exclusive():
                if not self.path.exists():
                    self._create()
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                # an index written by another Roder version: rebuilt, once, under the lock
                conn.close()
                with self._exclusive():
                    conn = sqlite3.connect(self.path, timeout=10)
                    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                        conn.executescript("DROP TABLE IF EXISTS threads;" + _SCHEMA)
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def remove(self, thread_id: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM threads WHERE id = ?", (thread_id,))

    def refresh(self) -> int:
        """Bring the rows in line with the files; returns how many rows were (re)built."""
        with self._db() as db:
            return self._refresh(db)

    def listing(self, cwd: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """``refresh`` then ``query_wire`` over one connection (a listing's whole work)."""
        with self._db() as db:
            self._refresh(db)
            return self._query(db, cwd, limit)

    def _refresh(self, db: sqlite3.Connection) -> int:
        files = scan_directory(self.directory)
        # Plain (size, mtime_ns) tuples: a FileStamp compares equal to one, and building one per
        # row was a tenth of a listing.
        known = {row[0]: row[1:] for row in db.execute("SELECT id, size, mtime_ns FROM threads")}
        gone = [(thread_id,) for thread_id in known if thread_id not in files]
        if gone:
            db.executemany("DELETE FROM threads WHERE id = ?", gone)
        rows = []
        for thread_id, (path, stamp) in files.items():
            if known.get(thread_id) == stamp:
                continue
            try:
                row = summarize_file(Path(path), stamp)
            except OSError as exc:
                log.warning("could not read thread file %s: %s", path, exc)
                continue
            if row is not None:
                rows.append(row)
        if rows:
            db.executemany(
                f"INSERT OR REPLACE INTO threads ({_COLUMNS}, size, mtime_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def query(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]:
        from roder_core.ir import ThreadSummary

        return [ThreadSummary.model_validate(wire) for wire in self.query_wire(cwd, limit)]

    def query_wire(self, cwd: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Rows newest first in wire form: plain dicts, so ``roder sessions list`` needs no pydantic."""
        with self._db() as db:
            return self._query(db, cwd, limit)

    @staticmethod
    def _query(db: sqlite3.Connection, cwd: str | None, limit: int | None) -> list[dict[str, Any]]:
        sql = f"SELECT {_COLUMNS} FROM threads"
        params: list[Any] = []
        if cwd is not None:
            sql += " WHERE cwd = ?"
            params.append(cwd)
        sql += " ORDER BY updated_at DESC"
        if limit:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_wire(row) for row in db.execute(sql, params)]
