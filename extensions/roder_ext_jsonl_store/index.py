"""The thread index: one SQLite row per thread file, kept current as threads are written, so a
listing neither opens nor stats the files.

Who keeps the rows current:

- The store's writer, the one place Roder changes a thread file. When it takes a file (creates it,
  or opens it to append) it marks the row *open* before it appends a byte; at each turn boundary
  it folds the lines appended since the row into it (``catch_up``), and when it closes the file it
  folds the rest and clears the mark.
- A listing. The folder's mtime tells it when files were added, removed or replaced behind the
  index's back (a copy, a rename, a deleted file, a writer that died before its first row); only
  then does it read the folder's names and inode numbers (no ``stat`` per file) and summarize the
  files that are new or replaced. Rows marked open are looked at one by one: the file's size and
  whether a writer still holds it. A writer killed mid-turn leaves its mark, so the next listing
  folds what it appended and settles the row (a dead writer's running turn lists as idle, as
  loading it settles it).

A row holds how many bytes of its file it has folded (always up to a line boundary): the files
only grow by whole lines, so bringing a row up to date reads only the bytes past it. A file that
is shorter than its row, or whose byte before the row's end is not a newline, was rewritten: it
is summarized again from the start. Summarizing reads a file's header line; then searches in C
find each turn's start and the last title, model and status change, and no other line is
visited (``SummaryFold._summary_lines``). A file without a header is folded line by line, the
few lines that change a summary parsed as JSON.

Crash safety: every change is one SQLite transaction, so a killed process leaves the index as it
was before or after. A writer marks a row open before it appends and clears the mark after its
last fold; a listing that folds rows holds the write lock from its first look to its last row, so
a writer taking a file meanwhile marks it after the listing is done. The index is a cache: a
missing, damaged or older-version index is rebuilt from the files, so deleting the ``.index``
folder is always safe.

Files changed in place by something other than Roder (an editor writing into the same file
without renaming it) are not noticed until the folder itself changes; deleting ``.index`` makes
the next listing read every file again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.settings.paths import create_private

from .files import CLOEXEC, HEADER_TYPE, SUFFIX, held_by_writer, try_lock

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; the index is then best effort
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from roder_core.ir import ThreadSummary


SCHEMA_VERSION = 2
#: The index's folder inside the threads folder: its own files (the database, its WAL, the lock)
#: come and go there, so they never move the threads folder's mtime, which listings watch.
INDEX_FOLDER = ".index"
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
    last_turn TEXT NOT NULL DEFAULT '',
    size INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    open INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS threads_by_cwd ON threads (cwd, updated_at);
CREATE INDEX IF NOT EXISTS threads_open ON threads (open);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_COLUMNS = "id, cwd, title, created_at, updated_at, provider, model, parent_thread, parent_turn, turn_count, status"
#: A row as stored: the listing columns, then what keeping it current needs.
_ROW = f"{_COLUMNS}, last_turn, size, inode, open"
_INSERT = f"INSERT OR REPLACE INTO threads ({_ROW}) VALUES ({', '.join('?' * 15)})"
#: The folder's mtime is trusted only once it is this old: a change within the same tick of a
#: coarse clock would not move it, so a younger one is looked at again by the next listing.
SETTLED_NS = 2_000_000_000
_FOLDER_KEY = "folder_mtime_ns"

#: A newline and the start of an event line as ``files.encode`` writes it (``threadId``, ``ts``,
#: ``method`` first). A JSON string holds no raw newline, so every match starts a line; the
#: leading newline lets the search skip ahead to the next newline (five times faster than ``^``).
#: A turn's start and a status change are read from the match too (their ``turnId`` or ``status``
#: follows the method); only a thread's start, title and model changes are parsed as JSON.
_EVENT_LINE = re.compile(
    rb'\n\{"threadId":"[^"\\\n]*","ts":(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?),"method":"([^"\\\n]+)"'
    rb'(?:,"(turnId|status)":"([^"\\\n]*)")?'
)
_QUICK_KEY = {b"turn/started": b"turnId", b"thread/status/changed": b"status"}
#: The decoder's C scanner (a JSON value at an offset: the value and where it ends); the stubs
#: leave the attribute out.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_NEWLINE = ord("\n")
_CLOSING = ord("}")
_SUMMARY_METHODS = frozenset(
    {b"thread/started", b"thread/title/changed", b"thread/model/changed", b"thread/status/changed", b"turn/started"}
)
#: The summary methods as JSON strings, whatever the line's form: every turn's start counts, of
#: the others only the last one matters. ``SummaryFold._summary_lines`` searches for them in C;
#: text inside a string holds them with escaped quotes, so each hit is a JSON string of a line.
_TURN_MARK = (b"turn/started", b'"turn/started"')
_LAST_WINS_MARKS = tuple(
    (method, b'"%s"' % method) for method in (b"thread/title/changed", b"thread/model/changed", b"thread/status/changed")
)
_SUMMARY_NAMES = frozenset(method.decode() for method in _SUMMARY_METHODS)


class SummaryFold:
    """A listing row folded from a thread file's header and event lines (wire form), without
    the reducer; it can continue from a stored row."""

    # Slots: a rebuild makes one fold per file and sets or reads each field several times.
    __slots__ = (
        "created_at",
        "cwd",
        "has_header",
        "id",
        "last_turn",
        "model",
        "parent_thread",
        "parent_turn",
        "provider",
        "status",
        "title",
        "turn_count",
        "updated_at",
    )

    def __init__(self) -> None:
        self.id = ""
        self.cwd = ""
        self.title = ""
        self.created_at = 0.0
        self.updated_at = 0.0
        self.provider = ""
        self.model = ""
        self.parent_thread: str | None = None
        self.parent_turn: str | None = None
        self.turn_count = 0
        self.status = "idle"
        #: The last turn started: a repeated ``turn/started`` (a line folded twice) counts once.
        self.last_turn = ""
        #: Whether the thread's header was read: a ``thread/started`` line repeats it, so only
        #: its ``ts`` is needed then.
        self.has_header = False

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> SummaryFold:
        fold = cls()
        (
            fold.id,
            fold.cwd,
            fold.title,
            fold.created_at,
            fold.updated_at,
            fold.provider,
            fold.model,
            fold.parent_thread,
            fold.parent_turn,
            fold.turn_count,
            fold.status,
            fold.last_turn,
        ) = row[:12]
        fold.has_header = True
        return fold

    def header(self, data: dict[str, Any]) -> None:
        self.has_header = True
        self.id = data.get("id", self.id)
        self.cwd = data.get("cwd", self.cwd)
        self.created_at = float(data.get("createdAt", self.created_at) or 0.0)
        self.updated_at = max(self.updated_at, self.created_at)
        self.title = data.get("title") or self.title
        self.provider = data.get("provider", self.provider)
        self.model = data.get("model", self.model)
        parent = data.get("parent")
        if isinstance(parent, dict) and parent.get("threadId"):
            self.parent_thread, self.parent_turn = parent["threadId"], parent.get("turnId")

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
            self._turn_started(str(data.get("turnId", "")))

    def _turn_started(self, turn_id: str) -> None:
        if turn_id != self.last_turn:
            self.last_turn = turn_id
            self.turn_count += 1

    def lines(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        """Fold the event lines of ``data[start:end]`` (whole lines). Lines that only move
        ``updated_at`` (items, usage) are never parsed; once the header was read, they are not
        even visited one by one (``_summary_lines``)."""
        end = len(data) if end is None else end
        if start < end and (start == 0 or data[start - 1] != _NEWLINE):
            first_end = data.find(b"\n", start, end)  # a first line with no newline before it
            first_end = end if first_end < 0 else first_end
            self._parse_line(data[start:first_end])
            start = first_end + 1
        if start >= end:
            return
        if self.has_header:
            self._summary_lines(data, start, end)
        else:
            self._every_line(data, start, end)

    def _summary_lines(self, data: bytes, start: int, end: int) -> None:
        """Fold the lines without visiting them one by one: searches in C find each turn's start,
        and the last title, model and status change (the earlier ones are overwritten). Each hit
        is checked to be its line's own method: read from the line's start when the line is in
        the store's form (``_EVENT_LINE``), else from the line parsed whole, so text or a tool's
        arguments that spell a method are never taken for one. Of the other lines only the last
        readable one's ``ts`` is read, so ``updated_at`` is the latest of the lines read, the
        same as the latest of every line's while the clock only moves on (each line is stamped
        as it is written). The header was read, so a ``thread/started`` line would add nothing."""
        method, mark = _TURN_MARK
        position = start
        while (hit := data.find(mark, position, end)) >= 0:
            position = hit + len(mark)
            self._fold_own_line(data, start, end, hit, method)
        for method, mark in _LAST_WINS_MARKS:
            limit = end
            while (hit := data.rfind(mark, start, limit)) >= 0:
                limit = hit
                if self._fold_own_line(data, start, end, hit, method):
                    break
        line_end = end - 1
        while line_end >= start:  # the last line that is not a summary line gives its ts
            line_start = data.rfind(b"\n", start - 1, line_end) + 1
            match = _EVENT_LINE.match(data, line_start - 1)
            if match is not None:
                if match[2] not in _SUMMARY_METHODS:
                    self.updated_at = max(self.updated_at, float(match[1]))
                    return
            else:
                event = _json_object(data[line_start:line_end])
                ts = event.get("ts") if event is not None else None
                if isinstance(ts, int | float) and event is not None and event.get("method") not in _SUMMARY_NAMES:
                    self.updated_at = max(self.updated_at, float(ts))
                    return
            line_end = line_start - 1

    def _fold_own_line(self, data: bytes, start: int, end: int, hit: int, method: bytes) -> bool:
        """Fold the line holding the JSON string ``method`` at ``hit`` when it is the line's own
        method; whether it was folded (not when it is not, or the line cannot be read)."""
        line_start = data.rfind(b"\n", start - 1, hit) + 1
        line_end = data.find(b"\n", hit, end)
        line_end = end if line_end < 0 else line_end
        match = _EVENT_LINE.match(data, line_start - 1)
        if match is not None:  # the store's form: the method is known without parsing
            return match.start(2) == hit + 1 and self._summary_line(data, match, line_start, line_end)
        event = _json_object(data[line_start:line_end])  # a line in another form
        if event is None or event.get("method") != method.decode():
            return False
        self.event(event)
        return True

    def _every_line(self, data: bytes, start: int, end: int) -> None:
        """Fold every line, in whatever form it was written: one regular expression finds the
        lines written as the store writes them (their ``ts`` read from the match), the others
        are parsed whole."""
        position = start
        for match in _EVENT_LINE.finditer(data, start - 1, end):
            line_start = match.start() + 1
            if line_start > position:  # lines written in another form: parsed whole
                self._parse_lines(data[position : line_start - 1])
            line_end = data.find(b"\n", match.end(), end)
            line_end = end if line_end < 0 else line_end
            if match[2] not in _SUMMARY_METHODS:
                self.updated_at = max(self.updated_at, float(match[1]))
            else:
                self._summary_line(data, match, line_start, line_end)
            position = line_end + 1
        if position < end:
            self._parse_lines(data[position:end])

    def _summary_line(self, data: bytes, match: re.Match[bytes], line_start: int, line_end: int) -> bool:
        """Fold a line that changes the summary (whether it could be read): a turn's start or a
        status change read from the match itself, a thread's start only for its ``ts`` once
        the header was read, the rest parsed."""
        method = match[2]
        if match[3] is not None and match[3] == _QUICK_KEY.get(method) and data[line_end - 1] == _CLOSING:
            self.updated_at = max(self.updated_at, float(match[1]))
            if method == b"turn/started":
                self._turn_started(match[4].decode())
            else:
                self.status = match[4].decode()
        elif method == b"thread/started" and self.has_header and data[line_end - 1] == _CLOSING:
            self.updated_at = max(self.updated_at, float(match[1]))
        else:
            return self._parse_line(data[line_start:line_end])
        return True

    def _parse_lines(self, chunk: bytes) -> None:
        for line in chunk.split(b"\n"):
            if line.strip():
                self._parse_line(line)

    def _parse_line(self, line: bytes) -> bool:
        """Fold one line parsed whole; whether it could be read (an unreadable line is skipped:
        loading the thread reports it)."""
        data = _json_object(line)
        if data is None:
            return False
        self.event(data)
        return True

    def row(self, size: int, inode: int, live: bool) -> tuple[Any, ...]:
        """The stored row. A thread not held by a live writer that was caught mid-turn lists as
        idle: loading it will settle that turn as interrupted."""
        status = self.status if self.status in ("idle", "error") or live else "idle"
        return (
            self.id,
            self.cwd,
            self.title,
            self.created_at,
            self.updated_at,
            self.provider,
            self.model,
            self.parent_thread,
            self.parent_turn,
            self.turn_count,
            status,
            self.last_turn,
            size,
            inode,
            int(live),
        )


def summarize(path: str | Path, thread_id: str, live: bool | None = None) -> tuple[Any, ...] | None:
    """A thread file as a fresh row (None when it has no usable header). ``live`` says whether
    a writer holds the file; asked of the file when None."""
    fd = os.open(path, os.O_RDONLY | CLOEXEC)
    try:
        stat = os.fstat(fd)
        data = _read_all(fd, stat.st_size)
        if live is None:  # the lock test ``held_by_writer`` makes, on the descriptor at hand
            live = not try_lock(fd, exclusive=False)
    finally:
        os.close(fd)
    inode = stat.st_ino
    fold = SummaryFold()
    folded = data.rfind(b"\n") + 1  # the whole lines; a torn tail waits for its writer or a repair
    first_end = data.find(b"\n")
    body_start = 0
    if first_end > 0:
        header = _json_object(data[:first_end])
        if header is not None and header.get("type") == HEADER_TYPE:
            fold.header(header)
            body_start = first_end + 1
    fold.lines(data, body_start, folded)
    _fold_tail(fold, data[folded:])
    if not fold.id:
        fold.id = thread_id
    if not fold.cwd:
        return None
    return fold.row(folded, inode, live)


def _warn(message: str, *args: object) -> None:
    """Log a warning; ``logging`` is imported only then (``roder sessions list`` reads the
    index without it: importing it was a sixth of that command)."""
    import logging

    logging.getLogger(__name__).warning(message, *args)


def _json_object(line: bytes) -> dict[str, Any] | None:
    """A line's JSON object, or None when it is not one. The C scanner ``json.loads`` ends in,
    without its two Python layers (a rebuild parses two lines of every file)."""
    try:
        text = line.decode().strip()
        value, end = _SCAN(text, 0)
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):  # a bad number or escape; deep nesting
        return None
    return value if end == len(text) and isinstance(value, dict) else None


def _read_all(fd: int, size: int) -> bytes:
    """The file's bytes: one ``read`` of the size ``fstat`` gave, more while it keeps growing."""
    chunks = [os.read(fd, size + 1)]  # one byte over: a file grown since the stat is read on
    while len(chunks[-1]) > (size if len(chunks) == 1 else 0):
        chunks.append(os.read(fd, 1 << 20))
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _fold_tail(fold: SummaryFold, tail: bytes) -> None:
    """A last line that parses but lacks its newline counts, as loading keeps it; it stays past
    the row's folded bytes, so it is folded again (harmlessly) once the newline is added."""
    if tail.strip():
        fold._parse_line(tail)


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


def listing_without_index(directory: Path, cwd: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The listing a ``ThreadIndex`` gives, read from the files themselves with no SQLite: for a
    store whose data folder is thrown away after one run (a batch rollout), where keeping rows
    would cost every thread a transaction that no listing ever reads."""
    rows = []
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        if not (entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False)):
            continue
        try:
            row = summarize(entry.path, entry.name[: -len(SUFFIX)])
        except FileNotFoundError:  # deleted since the scan
            continue
        if row is not None and (cwd is None or row[1] == cwd):
            rows.append(row)
    rows.sort(key=lambda row: row[4] or "", reverse=True)  # newest first, as the index's query orders
    return [_wire(row) for row in rows[: limit or None]]


class ThreadIndex:
    """The SQLite rows for the thread files of one directory (safe for several processes)."""

    def __init__(self, directory: Path, *, synced_commits: bool = False) -> None:
        self.directory = directory
        self.folder = directory / INDEX_FOLDER
        self.path = self.folder / "threads.sqlite"
        #: A writer's updates (``JsonlThreadStore``, which holds the index open) sync the log at
        #: each commit, so an update is on disk when it returns, as the checkpoint at the close
        #: of a process's last connection makes every other update.
        self.synced_commits = synced_commits

    # ------------------------------------------------------------------ connection

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._open()
        except sqlite3.OperationalError:
            raise  # busy or locked: another process is using a healthy index; never drop it
        except sqlite3.DatabaseError as exc:
            _warn("thread index %s is unreadable (%s); rebuilding it from the files", self.path, exc)
            with self._exclusive():
                self.drop()
                self._create()
            conn = self._open()
        try:
            yield conn
        finally:
            conn.close()

    def held_open(self) -> sqlite3.Connection:
        """A connection that only keeps the index open for a long-lived writer (a host).

        SQLite checkpoints the write-ahead log, and syncs it, the database and the folder
        (four syncs), whenever the last connection to the index closes; every update opens and
        closes its own connection (``_db``), so every update paid them. While this connection
        is open, an update is one commit to the log, synced once (``synced_commits``: as
        durable as the checkpoint made it), and SQLite checkpoints on its own as the log grows,
        and when this connection, the last, closes. It reads
        once, so it holds the log open (WAL mode keeps a shared lock from then on), and never
        holds a transaction, so it blocks no writer and no checkpoint. It is never used for
        anything else: an index re-created under it is simply no longer the one it holds."""
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialize index creation and rebuilds across processes with a lock file beside the
        index, so one process never drops or re-creates the table under another's feet."""
        lock_path = self.folder / "lock"
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
            # No syncs while building a private, empty file: a crash before the rename leaves a
            # stray temporary file, after it at worst an unreadable index, which is rebuilt.
            conn.execute("PRAGMA synchronous = OFF")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        os.replace(tmp, self.path)
        for old in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.lock"):
            with contextlib.suppress(OSError):  # the previous format's index, beside the files
                os.unlink(self.directory / old)

    def _open(self) -> sqlite3.Connection:
        if not self.path.exists():
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            with self._exclusive():
                if not self.path.exists():
                    self._create()
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                # an index written by another Roder version: rebuilt, once, under the lock
                conn.close()
                with self._exclusive():
                    conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
                    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                        conn.executescript("DROP TABLE IF EXISTS threads; DROP TABLE IF EXISTS meta;" + _SCHEMA)
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA synchronous = FULL" if self.synced_commits else "PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    @staticmethod
    @contextlib.contextmanager
    def _writing(db: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, taken before anything is read, so no other process changes a
        row between this one's look at it and its update."""
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    # ------------------------------------------------------------------ the writer's side

    def taken(self, thread_id: str, path: Path) -> None:
        """A writer took the thread's file (it holds its lock and has appended nothing since):
        mark the row open, creating it for a new file. Called before the writer appends, so a
        writer killed later leaves a row the next listing looks at."""
        with self._db() as db, self._writing(db):
            row = db.execute(f"SELECT {_ROW} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                self._summarize_into(db, thread_id, path, live=True)
            else:
                db.execute("UPDATE threads SET open = 1 WHERE id = ?", (thread_id,))

    def catch_up(self, thread_id: str, path: Path, *, live: bool) -> None:
        """Fold what the writer appended since the row into it (at a turn boundary, and after
        closing the file with ``live=False``, which clears the open mark)."""
        with self._db() as db, self._writing(db):
            row = db.execute(f"SELECT {_ROW} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            self._bring_up(db, thread_id, path, row, live=live)

    def remove(self, thread_id: str) -> None:
        with self._db() as db, self._writing(db):
            db.execute("DELETE FROM threads WHERE id = ?", (thread_id,))

    # ------------------------------------------------------------------ listing

    def refresh(self) -> int:
        """Bring the rows in line with the files; returns how many rows were (re)built."""
        with self._db() as db:
            return self._refresh(db)

    def listing(self, cwd: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """``refresh`` then the rows newest first, over one connection (a listing's whole work)."""
        return self.page(cwd, limit)[0]

    def page(self, cwd: str | None = None, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """The newest ``limit`` rows (every row when None or 0) and how many rows there are."""
        with self._db() as db:
            self._refresh(db)
            rows = self._query(db, cwd, limit)
            if not limit or len(rows) < limit:
                return rows, len(rows)
            where, params = ("WHERE cwd = ?", (cwd,)) if cwd is not None else ("", ())
            total = db.execute(f"SELECT COUNT(*) FROM threads {where}", params).fetchone()[0]
            return rows, int(total)

    def _refresh(self, db: sqlite3.Connection) -> int:
        """A look without the write lock first: most listings find nothing to do."""
        if not self._stale(db):
            return 0
        with self._writing(db):
            rebuilt = self._rescan(db) if self._folder_moved(db) is not None else 0
            for row in db.execute(f"SELECT {_ROW} FROM threads WHERE open = 1").fetchall():
                thread_id = row[0]
                rebuilt += self._bring_up(db, thread_id, self.directory / f"{thread_id}{SUFFIX}", row, live=None)
            return rebuilt

    def _stale(self, db: sqlite3.Connection) -> bool:
        if self._folder_moved(db) is not None:
            return True
        for thread_id, size, inode in db.execute("SELECT id, size, inode FROM threads WHERE open = 1").fetchall():
            path = self.directory / f"{thread_id}{SUFFIX}"
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                return True
            if (stat.st_size, stat.st_ino) != (size, inode) or not held_by_writer(path):
                return True
        return False

    def _folder_moved(self, db: sqlite3.Connection) -> int | None:
        """The folder's mtime when it differs from the one recorded at the last scan, else None."""
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except FileNotFoundError:
            return None
        recorded = db.execute("SELECT value FROM meta WHERE key = ?", (_FOLDER_KEY,)).fetchone()
        return None if recorded is not None and recorded[0] == mtime else mtime

    def _rescan(self, db: sqlite3.Connection) -> int:
        """Rows for files added, replaced or removed behind the index's back: the folder's names
        and inode numbers (``scandir`` reads both without a ``stat``), a summary of each new or
        replaced file. The folder's mtime is taken before the names, so a change made during
        the scan is seen by the next listing."""
        mtime = os.stat(self.directory).st_mtime_ns
        settled = time.time_ns() - mtime >= SETTLED_NS
        files: dict[str, tuple[str, int]] = {}
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                    files[entry.name[: -len(SUFFIX)]] = (entry.path, entry.inode())
        known = dict(db.execute("SELECT id, inode FROM threads").fetchall())
        gone = [(thread_id,) for thread_id in known if thread_id not in files]
        if gone:
            db.executemany("DELETE FROM threads WHERE id = ?", gone)
        rows = []
        for thread_id, (path, inode) in files.items():
            if known.get(thread_id) != inode:
                row = self._summary(db, thread_id, path, live=None)
                if row is not None:
                    rows.append(row)
        db.executemany(_INSERT, rows)
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_FOLDER_KEY, mtime if settled else 0))
        return len(rows)

    def _summarize_into(self, db: sqlite3.Connection, thread_id: str, path: Path, *, live: bool | None) -> int:
        row = self._summary(db, thread_id, path, live=live)
        if row is None:
            return 0
        db.execute(_INSERT, row)
        return 1

    @staticmethod
    def _summary(db: sqlite3.Connection, thread_id: str, path: str | Path, *, live: bool | None) -> tuple[Any, ...] | None:
        """The file's fresh row; None (its row dropped) when it is gone or has no usable header."""
        try:
            row = summarize(path, thread_id, live)
        except FileNotFoundError:
            row = None
        except OSError as exc:
            _warn("could not read thread file %s: %s", path, exc)
            return None
        if row is None:
            db.execute("DELETE FROM threads WHERE id = ?", (thread_id,))
        return row

    def _bring_up(
        self, db: sqlite3.Connection, thread_id: str, path: Path, row: tuple[Any, ...] | None, *, live: bool | None
    ) -> int:
        """Fold the bytes of ``path`` past ``row`` into it (the whole file when the row is
        missing or the file was rewritten); ``live`` as for ``summarize``. Inside a write
        transaction."""
        if row is None:
            return self._summarize_into(db, thread_id, path, live=live)
        size, inode = row[12], row[13]
        try:
            fd = os.open(path, os.O_RDONLY | CLOEXEC)
        except FileNotFoundError:
            db.execute("DELETE FROM threads WHERE id = ?", (thread_id,))
            return 0
        try:
            stat = os.fstat(fd)
            rewritten = stat.st_ino != inode or stat.st_size < size or (size > 0 and os.pread(fd, 1, size - 1) != b"\n")
            appended = b"" if rewritten else os.pread(fd, stat.st_size - size, size)
        finally:
            os.close(fd)
        if rewritten:
            return self._summarize_into(db, thread_id, path, live=live)
        live = held_by_writer(path) if live is None else live
        if not appended and bool(row[14]) == live:
            return 0
        fold = SummaryFold.from_row(row)
        whole = appended.rfind(b"\n") + 1
        fold.lines(appended, 0, whole)
        _fold_tail(fold, appended[whole:])
        db.execute(_INSERT, fold.row(size + whole, inode, live))
        return 1

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
