"""Several processes listing and rebuilding one thread index at once never break it.

A busy index ("database is locked") must never be mistaken for a corrupt one and deleted under
the feet of the other processes, and two processes opening a fresh index must not drop each
other's table. A writer waiting for a busy index waits off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from roder_ext_jsonl_store import JsonlThreadStore
from roder_ext_jsonl_store.index import ThreadIndex

from roder_core.ir import ThreadHeader
from roder_core.settings.paths import RoderPaths
from roder_core.threads.events import ThreadStatusChanged, TurnStarted
from tests.sessions.harness import make_runtime

WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from roder_ext_jsonl_store.index import ThreadIndex

    root, rounds, expected = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for round_ in range(rounds):
        # every round is a fresh folder, so every round is a race to create its index
        index = ThreadIndex(root / f"copy{round_}")
        index.refresh()
        rows = index.query()
        assert len(rows) == expected, (round_, len(rows))
    """
)


async def test_concurrent_processes_share_one_index(workspace: Path, tmp_path: Path) -> None:
    runtime, _ = make_runtime(workspace, [{"text": "ok"}])
    for n in range(6):
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, f"thread {n}")
    await runtime.close()
    directory = RoderPaths.from_env().threads_dir
    rounds = 40
    for round_ in range(rounds):
        copy = tmp_path / "copies" / f"copy{round_}"
        copy.mkdir(parents=True)
        for path in directory.glob("*.jsonl"):
            shutil.copy2(path, copy / path.name)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / "copies"), str(rounds), "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    failures = []
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        if worker.returncode != 0:
            failures.append(err[-800:])
    assert not failures, failures[0]


def test_a_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    index = ThreadIndex(tmp_path)
    index.refresh()
    index.path.write_bytes(b"this is not a database" * 100)
    assert index.query() == []
    assert index.path.read_bytes()[:15] == b"SQLite format 3"


#: Holds the index's write lock (as a listing's rescan does) until a line arrives on stdin.
LOCK_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    db.execute("COMMIT")
    """
)


@dataclass
class LockedIndex:
    """A store holding one released thread (``stored``), a thread not yet written (``new``),
    and another process holding the index's write lock until ``unlock``."""

    directory: Path
    store: JsonlThreadStore
    index: ThreadIndex
    stored: ThreadHeader
    new: ThreadHeader
    holder: subprocess.Popen[str]

    def unlock(self) -> None:
        assert self.holder.stdin is not None
        self.holder.stdin.write("\n")
        self.holder.stdin.flush()


@asynccontextmanager
async def locked_index(workspace: Path, tmp_path: Path) -> AsyncIterator[LockedIndex]:
    directory = tmp_path / "threads"
    store = JsonlThreadStore(directory)
    stored = ThreadHeader(cwd=str(workspace), provider="mock", model="mock", title="stored")
    await store.append(stored, TurnStarted(thread_id=stored.id, turn_id="turn_1"))
    await store.release(stored.id)
    index = ThreadIndex(directory)
    new = ThreadHeader(cwd=str(workspace), provider="mock", model="mock", title="new")
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(index.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield LockedIndex(directory, store, index, stored, new, holder)
    finally:
        holder.kill()
        holder.wait()


async def test_a_writer_waits_for_a_locked_index_off_the_event_loop(workspace: Path, tmp_path: Path) -> None:
    async with locked_index(workspace, tmp_path) as locked:
        directory, store, index, stored, new = locked.directory, locked.store, locked.index, locked.stored, locked.new
        claiming = asyncio.create_task(store.claim(stored.id))  # marks the stored thread's row open
        creating = asyncio.create_task(store.append(new, TurnStarted(thread_id=new.id, turn_id="turn_2")))
        following = asyncio.create_task(store.append(new, ThreadStatusChanged(thread_id=new.id, status="active")))
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await ran.wait()
        assert not (claiming.done() or creating.done() or following.done()), "the loop ran while they wait for the index"
        locked.unlock()
        await asyncio.gather(claiming, creating, following)
    with sqlite3.connect(index.path) as db:
        assert dict(db.execute("SELECT id, open FROM threads").fetchall()) == {stored.id: 1, new.id: 1}
    lines = (directory / f"{new.id}.jsonl").read_text().splitlines()
    assert [json.loads(line).get("method") for line in lines[1:]] == ["turn/started", "thread/status/changed"]
    await store.close()
    with sqlite3.connect(index.path) as db:
        assert dict(db.execute("SELECT id, open FROM threads").fetchall()) == {stored.id: 0, new.id: 0}, "closed"


async def test_an_append_cancelled_while_its_writer_is_taken_still_saves_its_line(workspace: Path, tmp_path: Path) -> None:
    """The event was applied to the live thread before it was saved: a turn interrupted while
    the store waits for the index (taking the writer) must not leave the file without it (a
    turn/completed with no turn/started would follow)."""
    async with locked_index(workspace, tmp_path) as locked:
        directory, store, stored, new = locked.directory, locked.store, locked.stored, locked.new
        creating = asyncio.create_task(store.append(new, TurnStarted(thread_id=new.id, turn_id="turn_2")))
        resuming = asyncio.create_task(store.append(stored, ThreadStatusChanged(thread_id=stored.id, status="active")))
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await ran.wait()
        assert not (creating.done() or resuming.done()), "both wait for the index"
        creating.cancel()
        resuming.cancel()
        locked.unlock()
        outcomes = await asyncio.gather(creating, resuming, return_exceptions=True)
        assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
        await store.append(new, ThreadStatusChanged(thread_id=new.id, status="idle"))
    lines = (directory / f"{new.id}.jsonl").read_text().splitlines()
    assert [json.loads(line).get("method") for line in lines[1:]] == ["turn/started", "thread/status/changed"]
    resumed = (directory / f"{stored.id}.jsonl").read_text().splitlines()
    assert [json.loads(line).get("method") for line in resumed[1:]] == ["turn/started", "thread/status/changed"]
    await store.close()
