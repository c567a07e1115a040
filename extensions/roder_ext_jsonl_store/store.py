"""JsonlThreadStore: one append-only JSON Lines file per thread (ThreadStore + CheckpointStore).

Writing is deferred until a thread's first turn starts, so a session that never got a prompt
leaves nothing behind; until then its events wait in memory. Every event is then written with
one ``write`` (flushed to the OS, so a killed process loses nothing it reported) and the file is
fsynced at turn boundaries. Loading folds the events with the runtime's own reducer. Forks copy
the parent's lines up to a turn into a new file; the parent's bytes are only ever read.

The writer also keeps the thread's recent snapshot (``snapshots.py``) current as it writes: at
each turn boundary, and whenever ``FOLD_BYTES`` were appended, it folds the lines written since
its last checkpoint (read back from the file, so the fold works on its own copy of the events,
never the runtime's) and drops the turns the latest compaction left out. Its memory is the
recent part plus at most ``FOLD_BYTES`` of lines; the snapshot is written (atomically) once a
quarter of its size (at least ``RECENT_REFRESH_BYTES``) was appended, and when the writer
closes, so no resume folds the whole file. A thread under ``MIN_BYTES`` costs the writer
nothing: it is folded once it grows past that.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from roder_core.brokers.data_paths import component
from roder_core.errors import RoderError, ThreadNotFoundError, UnsafePathError
from roder_core.ir import Thread, ThreadHeader, ThreadSummary, now
from roder_core.kernel.services import RecentThread
from roder_core.threads.events import RuntimeEvent, TurnCompleted, TurnStarted, parse_event_json
from roder_core.threads.reducer import apply_event, settle_loaded

from .files import (
    CLOEXEC,
    TORN_SUFFIX,
    LineProblem,
    RawThreadFile,
    encode,
    fsync_directory,
    header_line,
    held_by_writer,
    iter_event_dicts,
    repair_tail,
    split_file,
    thread_path,
    try_lock,
    write_all,
)
from .snapshots import (
    MIN_BYTES,
    RECENT_REFRESH_BYTES,
    Snapshot,
    fingerprint,
    fingerprint_of_bytes,
    fingerprint_of_fd,
    read_snapshot,
    recent_path,
    recent_start,
    remove_snapshot,
    snapshot_path,
    write_snapshot,
)

if TYPE_CHECKING:
    import sqlite3

    from .index import ThreadIndex

log = logging.getLogger(__name__)

#: The writer folds what it appended into its recent snapshot at least every this many bytes,
#: even within a turn, so the lines it reads back at once stay bounded.
FOLD_BYTES = 1024 * 1024


class ThreadInUseError(RoderError):
    """Another process is writing this thread."""


T = TypeVar("T")


class _Uninterrupted:
    """Awaits that run to their end even when the task is cancelled meanwhile, for the steps of
    taking a thread's writer: an append's event is in the live thread already, so its line is
    written all the same, and the cancellation raised after (``raise_if_cancelled``)."""

    def __init__(self) -> None:
        self.cancelled = False

    async def wait(self, awaitable: Awaitable[T]) -> T:
        future = asyncio.ensure_future(awaitable)
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():
                    raise
                self.cancelled = True
                if future.done():
                    return future.result()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise asyncio.CancelledError


@dataclass
class _Writer:
    """An open, locked thread file this process appends to."""

    fd: int
    path: Path
    new_file: bool = False
    #: Bytes in the file (every write goes through this writer, on the event loop).
    size: int = 0
    #: The header of a file this writer created (its recent snapshot starts from it).
    header: ThreadHeader | None = None
    #: The folded recent part of the thread up to ``recent.offset``; None until the first
    #: checkpoint (or after one that could not continue the fold).
    recent: Snapshot | None = None
    #: Set when the fold cannot be continued here (no valid starting point); loads then fold.
    untracked: bool = False
    #: Where the recent snapshot on disk ends (0: none written by this writer), and its size.
    written_at: int = 0
    written_size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sync(self) -> None:
        os.fsync(self.fd)
        if self.new_file:
            fsync_directory(self.path.parent)
            self.new_file = False

    def close(self, *, durable: bool = True) -> None:
        if durable:
            with contextlib.suppress(OSError):
                os.fsync(self.fd)
        os.close(self.fd)


@dataclass
class LoadedEvents:
    header: ThreadHeader
    events: list[RuntimeEvent] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)


class JsonlThreadStore:
    """Thread files under ``directory`` (``<id>.jsonl``) plus the thread index (``index.py``) their writers keep current."""

    def __init__(self, directory: Path, *, indexed: bool = True, durable: bool = True) -> None:
        self.directory = directory
        #: False for a data folder thrown away after one run (a batch rollout's): no SQLite
        #: index is kept, and a listing reads the files (``listing_without_index``).
        self.indexed = indexed
        #: False for the same folders: writes are not fsynced at turn boundaries (nobody resumes
        #: from such a folder after a crash; the run reads its files before removing it).
        self.durable = durable
        self._writers: dict[str, _Writer] = {}
        self._pending: dict[str, list[bytes]] = {}
        #: Threads whose writer is being taken or released (see ``_opening``).
        self._openings: dict[str, asyncio.Event] = {}
        self._reported: set[str] = set()
        #: Lines skipped by the latest read of each thread (shown by ``roder sessions show``).
        self.problems: dict[str, list[LineProblem]] = {}
        #: Keeps the thread index open from the first update to ``close`` (``ThreadIndex.held_open``),
        #: so an update's commit (synced) is not followed by a checkpoint and four syncs.
        self._index_held: sqlite3.Connection | None = None
        self._holding = threading.Lock()

    def id(self) -> str:
        return "jsonl"

    def path(self, thread_id: str) -> Path:
        if thread_id.startswith("."):
            raise ThreadNotFoundError(f"{thread_id!r} is not a thread id")
        try:
            component(thread_id, "thread id")
        except UnsafePathError as exc:
            raise ThreadNotFoundError(f"{thread_id!r} is not a thread id: {exc}") from None
        return thread_path(self.directory, thread_id)

    # ------------------------------------------------------------------ writing

    async def append(self, header: ThreadHeader, event: RuntimeEvent) -> None:
        if not event.persisted:
            return
        line = encode(event.wire())
        writer = self._writers.get(event.thread_id)
        guard: _Uninterrupted | None = None
        if writer is None:
            # The live thread holds the event already: a cancellation while the writer is taken
            # waits for it, so the line is written (or held) all the same, then raised.
            guard = _Uninterrupted()
            async with self._opening(event.thread_id, guard):
                writer = await self._take(header, event, line, guard)
            if writer is None:
                guard.raise_if_cancelled()
                return  # held in memory until the thread's first turn starts
        # No await from here to the write: the lines of a thread reach the file in the order
        # their appends were called (``_opening`` keeps that order while a writer is taken).
        try:
            write_all(writer.fd, line)
        except OSError:  # a full disk: take back the part written, so no torn line stays behind
            with contextlib.suppress(OSError):
                os.ftruncate(writer.fd, writer.size)
            raise
        writer.size += len(line)
        folded = writer.recent.offset if writer.recent is not None else 0
        if writer.size - folded >= FOLD_BYTES and writer.lock.acquire(blocking=False):
            try:  # a long turn: fold now (a checkpoint already running on a thread will do it)
                self._checkpoint(event.thread_id, writer, writer.size, final=False)
            finally:
                writer.lock.release()
        if guard is not None:
            guard.raise_if_cancelled()

    @contextlib.asynccontextmanager
    async def _opening(self, thread_id: str, guard: _Uninterrupted) -> AsyncIterator[None]:
        """One taking (or release) of a thread's writer at a time: appends that find no writer
        while another is being taken wait here, in the order they came, so a thread's lines
        keep their order and its held events are written once."""
        while (busy := self._openings.get(thread_id)) is not None:
            await guard.wait(busy.wait())
        done = self._openings[thread_id] = asyncio.Event()
        try:
            yield
        finally:
            del self._openings[thread_id]
            done.set()

    async def _take(self, header: ThreadHeader, event: RuntimeEvent, line: bytes, guard: _Uninterrupted) -> _Writer | None:
        """The writer for ``event``'s thread (inside ``_opening``): the one taken while this
        append waited, else the stored file opened, else a new file created at the thread's
        first turn; None while the thread has no turn (``line`` is held until it has)."""
        thread_id = event.thread_id
        writer = self._writers.get(thread_id)
        if writer is not None:
            return writer
        path = self.path(thread_id)
        if path.exists():
            return await self._open(thread_id, guard)
        if not isinstance(event, TurnStarted):
            self._pending.setdefault(thread_id, []).append(line)
            return None
        pending = self._pending.pop(thread_id, [])
        writer = self._create(path, header_line(header.wire()) + b"".join(pending))
        writer.header = header
        await self._taken(thread_id, writer, guard)
        return writer

    async def _taken(self, thread_id: str, writer: _Writer, guard: _Uninterrupted) -> None:
        """Mark the thread's index row open (``ThreadIndex.taken``) before the writer appends,
        then make the writer this thread's. The mark is a SQLite write that can wait behind
        another process's listing (and reads the file for a new row), so it runs on a worker
        thread, never the event loop. The writer is kept even if the wait is cancelled: its
        file is open and locked, and ``release`` must close it."""
        try:
            if self.indexed:
                await guard.wait(asyncio.to_thread(self._note_in_index, self._index().taken, thread_id, writer.path))
        finally:
            self._writers[thread_id] = writer

    def _create(self, path: Path, first_lines: bytes) -> _Writer:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | CLOEXEC, 0o600)
        try:
            try_lock(fd)
            write_all(fd, first_lines)
        except OSError:  # a full disk: no half-written file, and no lock left held on it
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return _Writer(fd, path, new_file=True, size=len(first_lines))

    async def _open(self, thread_id: str, guard: _Uninterrupted) -> _Writer:
        """The locked writer for an existing file, repairing a torn tail first (inside
        ``_opening``, with no writer yet)."""
        path = self.path(thread_id)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | CLOEXEC)
        except FileNotFoundError:
            raise ThreadNotFoundError(f"no stored thread {thread_id}") from None
        if not try_lock(fd):
            os.close(fd)
            raise ThreadInUseError(
                f"thread {thread_id} is open in another Roder process; close it there first "
                f"(or branch off it with `roder sessions fork {thread_id}`)"
            )
        try:
            if repair_tail(fd, path):
                log.warning("thread %s: repaired a torn last line (kept in %s)", thread_id, path.with_suffix(TORN_SUFFIX))
        except OSError:
            os.close(fd)
            raise
        writer = _Writer(fd, path, size=os.fstat(fd).st_size)
        await self._taken(thread_id, writer, guard)
        return writer

    async def claim(self, thread_id: str) -> None:
        """Become the only writer of a stored thread before a turn starts (fails fast)."""
        if thread_id in self._writers:
            return
        guard = _Uninterrupted()
        async with self._opening(thread_id, guard):
            if thread_id not in self._writers and self.path(thread_id).exists():
                await self._open(thread_id, guard)
        guard.raise_if_cancelled()

    async def sync(self, thread_id: str) -> None:
        """Make the file durable and bring the recent snapshot up to this turn boundary."""
        writer = self._writers.get(thread_id)
        if writer is not None:
            await asyncio.to_thread(self._sync, thread_id, writer, writer.size, False)

    async def release(self, thread_id: str) -> None:
        """Close this process's writer (and forget unsaved pre-turn events) for a thread, leaving
        its recent snapshot written up to the file's end."""
        guard = _Uninterrupted()
        async with self._opening(thread_id, guard):  # a writer being taken is taken first
            self._pending.pop(thread_id, None)
            writer = self._writers.pop(thread_id, None)
        if writer is not None:
            await asyncio.to_thread(self._sync, thread_id, writer, writer.size, True)
        guard.raise_if_cancelled()

    def _sync(self, thread_id: str, writer: _Writer, end: int, final: bool) -> None:
        """fsync (and close, when ``final``), then checkpoint up to ``end``: the file's size when
        this was asked for, on the event loop, so always a line boundary."""
        with writer.lock:
            if final:
                writer.close(durable=self.durable)
            elif self.durable:
                writer.sync()
            self._checkpoint(thread_id, writer, end, final=final)
            if self.indexed:
                self._note_in_index(self._index().catch_up, thread_id, writer.path, live=not final)

    def _index(self, *, writing: bool = True) -> ThreadIndex:
        """The thread index; a writer's updates are synced at their commit (``synced_commits``),
        a listing's row rebuilds are not (as in any process that lists)."""
        from .index import ThreadIndex  # sqlite3 loads once a thread is written or listed

        return ThreadIndex(self.directory, synced_commits=writing)

    def _note_in_index(self, change: Callable[..., None], thread_id: str, path: Path, **options: bool) -> None:
        """Tell the thread index what the writer did (``ThreadIndex.taken`` or ``catch_up``),
        then keep the index open if it is not yet. Never raises: the index is a cache, and a row
        it could not update is one a listing brings up to date (an open row, or a file it has no
        row for, is looked at)."""
        import sqlite3  # loaded already: by ``_index``'s module

        try:
            change(thread_id, path, **options)
            with self._holding:
                if self._index_held is None:
                    self._index_held = self._index().held_open()
        except (sqlite3.Error, OSError) as exc:
            log.warning("thread %s: the thread index was not updated (%s); listings read the file", thread_id, exc)

    def _checkpoint(self, thread_id: str, writer: _Writer, end: int, *, final: bool) -> None:
        """Fold the lines up to ``end`` into the writer's recent snapshot and write it when enough
        was added since the last one (or at ``final``). Never raises:
        a snapshot only saves time, the file stays the truth."""
        if writer.untracked or (writer.recent is None and end < MIN_BYTES):
            return  # a short thread is folded whole at load about as fast: the writer waits
        try:
            with _collector_paused():
                self._fold_recent(thread_id, writer, end)
            recent = writer.recent
            if recent is None or recent.offset < MIN_BYTES or recent.offset == writer.written_at:
                return
            # Rewritten once a quarter of its own size was appended (at least RECENT_REFRESH_BYTES):
            # rewriting a large recent part every few turns would cost more than it saves.
            if final or recent.offset - writer.written_at >= max(RECENT_REFRESH_BYTES, writer.written_size // 4):
                writer.written_size = write_snapshot(recent_path(self.directory, thread_id), recent)
                writer.written_at = recent.offset
        except (OSError, ValueError, RoderError) as exc:  # ValueError: pydantic's validation errors
            log.warning("thread %s: recent snapshot not kept (%s); a resume will read the file", thread_id, exc)
            writer.recent, writer.untracked = None, True

    def _fold_recent(self, thread_id: str, writer: _Writer, end: int) -> None:
        start = writer.recent or self._fold_start(thread_id, writer)
        if start is None:
            writer.untracked = True
            return
        if start.offset == end:
            writer.recent = start
            return
        after = self._load_after(thread_id, start, set(start.older), size=end)
        position = after[1] if after is not None else None
        if after is None or position is None:  # the file changed under us, or a torn line
            writer.recent, writer.untracked = None, True
            return
        thread = after[0]
        cut = recent_start(thread)
        older = [*start.older, *(turn.id for turn in thread.turns[:cut])]
        thread.turns = thread.turns[cut:]
        writer.recent = position.snapshot(thread, older)

    def _fold_start(self, thread_id: str, writer: _Writer) -> Snapshot | None:
        """Where the writer's fold begins: the empty thread of a file it created, else the recent
        snapshot a resume read (or left), else a fold of a file still under ``FOLD_BYTES``; None
        for a longer file with neither, which only an unbounded fold could start (a load does
        that, and leaves the snapshot for the next writer)."""
        if writer.header is not None:
            empty = Thread.model_validate(writer.header.model_dump())
            return Snapshot(0, 0, fingerprint(b"", b""), [], empty)
        snapshot = read_snapshot(recent_path(self.directory, thread_id))
        if snapshot is not None:
            return snapshot
        if writer.size >= FOLD_BYTES:
            return None
        thread, position = self._load_folded(thread_id)
        return None if position is None else position.snapshot(thread)

    async def close(self) -> None:
        for thread_id in list(self._writers):
            await self.release(thread_id)
        self._pending.clear()
        with self._holding:
            held, self._index_held = self._index_held, None
        if held is not None:
            await asyncio.to_thread(held.close)  # the last connection: SQLite checkpoints the log

    # ------------------------------------------------------------------ reading

    def _read(self, thread_id: str) -> RawThreadFile:
        return self._split(thread_id, self._read_bytes(thread_id))

    def _read_bytes(self, thread_id: str) -> bytes:
        try:
            return self.path(thread_id).read_bytes()
        except FileNotFoundError:
            raise ThreadNotFoundError(f"no stored thread {thread_id} (see `roder sessions list --all`)") from None

    def _split(self, thread_id: str, data: bytes, first_line: int = 1) -> RawThreadFile:
        raw = split_file(data, first_line=first_line)
        if raw.torn_tail and thread_id not in self._writers:
            self._repair_if_unowned(self.path(thread_id))
        return raw

    @staticmethod
    def _repair_if_unowned(path: Path) -> None:
        """Cut a torn tail left by a dead writer; a live writer's tail is left alone."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | CLOEXEC)
        except OSError:
            return
        try:
            if try_lock(fd) and repair_tail(fd, path):
                log.warning("%s: repaired a torn last line (kept in %s)", path.name, path.with_suffix(TORN_SUFFIX))
        finally:
            os.close(fd)

    def _parse(self, thread_id: str, raw: RawThreadFile) -> LoadedEvents:
        events = _parse_events(raw)
        header = self._header(thread_id, raw, events)
        return LoadedEvents(header, events, self._report(thread_id, raw.problems))

    def _report(self, thread_id: str, problems: list[LineProblem]) -> list[LineProblem]:
        """Keep a thread's skipped lines for ``sessions show`` and log them once per process."""
        problems = sorted(problems, key=lambda p: p.line)
        self.problems[thread_id] = problems
        if problems and thread_id not in self._reported:
            self._reported.add(thread_id)
            log.warning(
                "thread %s: skipped %d unreadable line(s): %s",
                thread_id,
                len(problems),
                "; ".join(str(p) for p in problems[:5]),
            )
        return problems

    @staticmethod
    def _header(thread_id: str, raw: RawThreadFile, events: list[RuntimeEvent]) -> ThreadHeader:
        if raw.header is not None:
            with contextlib.suppress(ValueError):
                return ThreadHeader.model_validate(raw.header)
        started = next((e for e in events if e.method == "thread/started"), None)
        if started is not None:
            return started.thread
        raise RoderError(f"thread {thread_id}: the file has no readable header; it cannot be loaded")

    async def events(self, thread_id: str) -> list[RuntimeEvent]:
        """The stored events of a thread, in order (unreadable lines skipped and reported)."""
        return (await asyncio.to_thread(self._load_events, thread_id)).events

    def _load_events(self, thread_id: str) -> LoadedEvents:
        return self._parse(thread_id, self._read(thread_id))

    async def load(self, thread_id: str) -> Thread:
        return await asyncio.to_thread(self._load, thread_id)

    def _load(self, thread_id: str) -> Thread:
        with _collector_paused():
            thread, _position = self._load_folded(thread_id)
        return settle_loaded(thread)

    def _load_folded(self, thread_id: str) -> tuple[Thread, _Position | None]:
        """Fold the thread: from its snapshot plus the lines appended since when one is valid,
        else from the whole file (leaving a snapshot behind for a long one). Also where the
        fold ended, when that is a line boundary a snapshot may be taken at."""
        self.path(thread_id)  # a clear error for an id that is not one
        snap_path = snapshot_path(self.directory, thread_id)
        snapshot = read_snapshot(snap_path)
        if snapshot is not None:
            after = self._load_after(thread_id, snapshot)
            if after is not None:
                thread, position, appended = after
                if position is not None and appended >= MIN_BYTES:
                    write_snapshot(snap_path, position.snapshot(thread))
                return thread, position
        return self._load_whole(thread_id, snap_path)

    async def load_recent(self, thread_id: str) -> RecentThread:
        """The thread with only the turns its next model call can see (``RecentThreadLoader``):
        those since the latest compaction's kept part, read from the recent snapshot plus the
        lines appended since. The older turns stay on disk; ``load`` reads everything."""
        return await asyncio.to_thread(self._load_recent, thread_id)

    def _load_recent(self, thread_id: str) -> RecentThread:
        self.path(thread_id)  # a clear error for an id that is not one
        path = recent_path(self.directory, thread_id)
        with _collector_paused():
            snapshot = read_snapshot(path)
            after = self._load_after(thread_id, snapshot, set(snapshot.older)) if snapshot is not None else None
            if snapshot is not None and after is not None:
                thread, position, appended = after
                older = snapshot.older
                if position is not None and appended >= RECENT_REFRESH_BYTES:
                    older = self._write_recent(path, thread, position, older)
                    thread.turns = thread.turns[len(older) - len(snapshot.older) :]
                return RecentThread(settle_loaded(thread), len(older))
            # No usable recent snapshot: the whole thread is read anyway, so it is all returned.
            thread, position = self._load_folded(thread_id)
            if position is not None and position.offset >= MIN_BYTES:
                self._write_recent(path, thread, position, [])
            else:
                remove_snapshot(path)
        return RecentThread(settle_loaded(thread), 0)

    @staticmethod
    def _write_recent(path: Path, thread: Thread, position: _Position, older: list[str]) -> list[str]:
        """Snapshot the recent part of ``thread`` (whose turns follow the ``older`` ones); the ids
        of every turn it leaves out. A thread never compacted has no recent part of its own: its
        recent snapshot is the whole thread (the writer keeps it the same way)."""
        cut = recent_start(thread)
        older = [*older, *(turn.id for turn in thread.turns[:cut])]
        recent = thread.model_copy(update={"turns": thread.turns[cut:]})
        write_snapshot(path, position.snapshot(recent, older))
        return older

    def _load_whole(self, thread_id: str, snap_path: Path) -> tuple[Thread, _Position | None]:
        data = self._read_bytes(thread_id)
        size = len(data)
        at_boundary = data.endswith(b"\n")
        lines, check = (data.count(b"\n"), fingerprint_of_bytes(data, size)) if at_boundary else (0, "")
        raw = self._split(thread_id, data)
        del data  # a long thread's bytes, lines, events and state would otherwise all be alive at once
        loaded = self._parse(thread_id, raw)
        del raw
        thread = Thread.model_validate(loaded.header.model_dump())
        for event in loaded.events:
            apply_event(thread, event)
        position = _Position(size, lines, check, loaded.problems) if at_boundary else None
        if position is not None and size >= MIN_BYTES:
            write_snapshot(snap_path, position.snapshot(thread))
        return thread, position

    def _load_after(
        self, thread_id: str, snapshot: Snapshot, older: set[str] | None = None, size: int | None = None
    ) -> tuple[Thread, _Position | None, int] | None:
        """The snapshot's thread with the lines after its offset (up to ``size``, else the
        file's end) folded in, where the fold ended (when on a line boundary) and how many
        bytes were appended; None when the file no longer starts with the bytes the snapshot
        was taken from, or an appended line touches one of the ``older`` turns the snapshot
        left out."""
        try:
            fd = os.open(self.path(thread_id), os.O_RDONLY | CLOEXEC)
        except FileNotFoundError:
            raise ThreadNotFoundError(f"no stored thread {thread_id} (see `roder sessions list --all`)") from None
        try:
            size = os.fstat(fd).st_size if size is None else size
            if size < snapshot.offset or fingerprint_of_fd(fd, snapshot.offset) != snapshot.fingerprint:
                return None
            appended = os.pread(fd, size - snapshot.offset, snapshot.offset)
            raw = self._split(thread_id, appended, first_line=snapshot.lines + 1)
            events = _parse_events(raw)
            if older and any(_turn_of(event) in older for event in events):
                return None
            problems = self._report(thread_id, [*snapshot.problems, *raw.problems])
            thread = snapshot.thread
            # A full fold starts from a header whose ``updated_at`` is the load time; match it.
            thread.updated_at = max(thread.updated_at, now())
            for event in events:
                apply_event(thread, event)
            position = None
            if not appended or appended.endswith(b"\n"):
                lines = snapshot.lines + appended.count(b"\n")
                check = fingerprint_of_fd(fd, size) if appended else snapshot.fingerprint
                position = _Position(size, lines, check, problems)
            return thread, position, len(appended)
        finally:
            os.close(fd)

    async def list_threads(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]:
        return await asyncio.to_thread(self._list, cwd, limit)

    def _list(self, cwd: str | None, limit: int | None) -> list[ThreadSummary]:
        from .index import listing_without_index

        if self.indexed:
            wires = self._index(writing=False).listing(cwd, limit)
        else:
            wires = listing_without_index(self.directory, cwd, limit)
        return [ThreadSummary.model_validate(wire) for wire in wires]

    # ------------------------------------------------------------------ delete, fork

    async def delete(self, thread_id: str) -> None:
        path = self.path(thread_id)
        if not path.exists():
            raise ThreadNotFoundError(f"no stored thread {thread_id}")
        await self.release(thread_id)
        if held_by_writer(path):
            raise ThreadInUseError(f"thread {thread_id} is open in another Roder process; close it there first")
        path.unlink()
        with contextlib.suppress(FileNotFoundError):
            path.with_suffix(TORN_SUFFIX).unlink()
        remove_snapshot(snapshot_path(self.directory, thread_id))
        remove_snapshot(recent_path(self.directory, thread_id))
        if self.indexed:
            await asyncio.to_thread(self._index().remove, thread_id)  # a SQLite write: off the event loop

    async def fork(
        self, thread_id: str, turn_id: str | None, new_header: ThreadHeader, *, before_item: str | None = None
    ) -> Thread:
        await asyncio.to_thread(self._write_fork, thread_id, turn_id, new_header, before_item)
        return await self.load(new_header.id)

    def _write_fork(self, thread_id: str, turn_id: str | None, new_header: ThreadHeader, before_item: str | None) -> None:
        """Copy the parent's events up to the cut into a new file.

        The copy is written to a temporary name and renamed into place, so a crash mid-fork
        leaves no half thread; the parent file is opened read-only.
        """
        raw = self._read(thread_id)
        if before_item is not None:
            kept = _lines_before_item(raw, before_item, thread_id)
        else:
            kept = _lines_through_turn(raw, turn_id, thread_id)
        new_id = new_header.id
        wire_header = new_header.wire()
        body = [header_line(wire_header)]
        for data in kept:
            if data.get("method") == "thread/title/changed":
                continue  # the fork's header holds its title (a rewind's names the prompt it went back before)
            data["threadId"] = new_id
            if data.get("method") == "thread/started":
                data["thread"] = wire_header
            body.append(encode(data))
        target = self.path(new_id)
        temp = self.directory / f".{new_id}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | CLOEXEC, 0o600)
        try:
            write_all(fd, b"".join(body))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        fsync_directory(self.directory)


@dataclass
class _Position:
    """Where a fold of a thread file ended: a line boundary a snapshot may be taken at."""

    offset: int
    lines: int
    fingerprint: str
    problems: list[LineProblem]

    def snapshot(self, thread: Thread, older: list[str] | None = None) -> Snapshot:
        return Snapshot(self.offset, self.lines, self.fingerprint, self.problems, thread, older or [])


def _turn_of(event: RuntimeEvent) -> str | None:
    """The turn an event changes, if any."""
    if isinstance(event, TurnCompleted):
        return event.turn.id
    turn_id = getattr(event, "turn_id", None)
    return turn_id if isinstance(turn_id, str) else None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off while a thread is built.

    Loading a long thread allocates hundreds of thousands of objects that all stay alive (the
    thread's items), and each allocation burst set off another full collection over them: half
    the CPU of reading a 100,000-event thread's snapshot. The pause lasts one load; the
    collector comes back on only if it was on before.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_events(raw: RawThreadFile) -> list[RuntimeEvent]:
    """The events of the readable lines; unreadable ones are added to ``raw.problems``."""
    events: list[RuntimeEvent] = []
    for number, line in raw.events:
        try:
            events.append(parse_event_json(line))
        except ValueError as exc:  # JSON and pydantic validation errors
            raw.problems.append(LineProblem(number, unreadable_reason(exc)[:200]))
    return events


def unreadable_reason(exc: ValueError) -> str:
    """Why a stored line is not an event, in a few words: pydantic's first error, without the
    heading that lists every event class of the union (which filled the line before)."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or not exc.errors():
        return f"not an event: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return f"not JSON: {first['msg'].removeprefix('Invalid JSON: ').replace(' at line 1 column ', ' at column ')}"
    if first["type"] == "union_tag_invalid":
        return f"not an event: unknown method {first.get('ctx', {}).get('tag')!r}"
    loc = list(first["loc"])
    if loc and (loc[0] == "error" or "/" in str(loc[0])):  # the union's tag (the method), not a field
        loc = loc[1:]
    where = ".".join(str(part) for part in loc)
    return f"not an event: {where}: {first['msg']}" if where else f"not an event: {first['msg']}"


def _event_dicts(raw: RawThreadFile) -> Iterator[dict[str, Any]]:
    """The readable event lines as dicts (unreadable ones were reported when loading)."""
    for _number, data in iter_event_dicts(raw):
        if data is not None:
            yield data


def _lines_before_item(raw: RawThreadFile, item_id: str, thread_id: str) -> list[dict[str, Any]]:
    """Event dicts before user message ``item_id``; before its whole turn when it opens one."""
    kept: list[dict[str, Any]] = []
    turn_start, items_in_turn = 0, 0
    for data in _event_dicts(raw):
        method = data.get("method")
        if method == "turn/started":
            turn_start, items_in_turn = len(kept), 0
        elif method in ("item/started", "item/updated", "item/completed"):
            if (data.get("item") or {}).get("id") == item_id:
                return kept[:turn_start] if items_in_turn == 0 else kept
            items_in_turn += 1
        kept.append(data)
    raise RoderError(f"thread {thread_id} has no message {item_id}")


def _lines_through_turn(raw: RawThreadFile, turn_id: str | None, thread_id: str) -> list[dict[str, Any]]:
    """Event dicts up to (not including) the start of the turn after ``turn_id``."""
    kept: list[dict[str, Any]] = []
    seen = turn_id is None
    for data in _event_dicts(raw):
        if data.get("method") == "turn/started":
            if seen and turn_id is not None:
                break
            if data.get("turnId") == turn_id:
                seen = True
        kept.append(data)
    if not seen:
        raise RoderError(f"thread {thread_id} has no turn {turn_id}")
    return kept
