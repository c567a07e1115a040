"""The thread index kept current by the writers: a settled listing touches no thread file, files
changed behind the index's back are found through the folder, and a process killed while writing
a thread, or while writing the index, leaves rows that are right or that the next listing fixes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from roder_ext_jsonl_store.index import _ROW, SETTLED_NS, ThreadIndex, summarize

from roder_core.settings.paths import RoderPaths
from tests.sessions.harness import make_runtime

#: Writes one thread through the store, stops mid-turn and waits to be killed: a writer that
#: dies with its file open and its turn running.
WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from roder_ext_jsonl_store import JsonlThreadStore
    from roder_core.ir import AgentMessageItem, ThreadHeader, Turn
    from roder_core.threads.events import (
        ItemCompleted, ThreadStarted, ThreadStatusChanged, TurnCompleted, TurnStarted,
    )

    async def main() -> None:
        store = JsonlThreadStore(Path(sys.argv[1]))
        header = ThreadHeader(cwd=sys.argv[2], provider="mock", model="mock", title="killed")
        await store.append(header, ThreadStarted(thread_id=header.id, thread=header))
        for n in range(2):
            turn = Turn()
            await store.append(header, TurnStarted(thread_id=header.id, turn_id=turn.id))
            await store.append(header, ThreadStatusChanged(thread_id=header.id, status="active"))
            item = AgentMessageItem(text=f"answer {n}")
            await store.append(header, ItemCompleted(thread_id=header.id, turn_id=turn.id, item=item))
            if n == 0:
                done = turn.model_copy(update={"status": "completed"})
                await store.append(header, TurnCompleted(thread_id=header.id, turn=done))
                await store.append(header, ThreadStatusChanged(thread_id=header.id, status="idle"))
                await store.sync(header.id)
        print(header.id, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)

#: Rebuilds an index over a folder of thread files, announcing itself first: the test kills it
#: wherever it got to.
REBUILDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from roder_ext_jsonl_store.index import ThreadIndex

    index = ThreadIndex(Path(sys.argv[1]))
    print("rebuilding", flush=True)
    while True:
        index.drop()
        index.refresh()
    """
)


async def _threads(workspace: Path, count: int) -> Path:
    runtime, _ = make_runtime(workspace, [{"text": "ok"}] * count)
    for n in range(count):
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, f"thread {n}")
    await runtime.close()
    return RoderPaths.from_env().threads_dir


def _settle(directory: Path) -> None:
    """Date the folder's last change back, as if it happened a while ago (a listing trusts a
    folder mtime only once it is older than a clock tick could hide)."""
    old = os.stat(directory).st_mtime_ns - 10 * SETTLED_NS
    os.utime(directory, ns=(old, old))


def _fresh_rows(directory: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """What an index built from scratch over a copy of the files lists."""
    copy = tmp_path / "fresh"
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir()
    for path in directory.glob("*.jsonl"):
        shutil.copy2(path, copy / path.name)
    return ThreadIndex(copy).listing()


async def test_a_settled_listing_opens_no_thread_file_and_lists_no_folder(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = await _threads(workspace, 3)
    index = ThreadIndex(directory)
    first = index.listing()
    _settle(directory)
    assert index.listing() == first  # records the settled folder
    touched: list[str] = []
    for name in ("open", "stat", "scandir"):
        real = getattr(os, name)

        def spy(path: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            touched.append(f"{_name} {path}")
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, spy)
    assert index.listing() == first
    assert [line for line in touched if line.endswith(".jsonl") or line.startswith("scandir")] == []
    assert len(first) == 3


async def test_files_added_replaced_or_removed_behind_the_index_are_found(workspace: Path, tmp_path: Path) -> None:
    directory = await _threads(workspace, 2)
    index = ThreadIndex(directory)
    rows = index.listing()
    _settle(directory)
    index.listing()
    source = directory / f"{rows[0]['id']}.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    # a copy under a new id, and the original replaced (renamed over) by a retitled copy
    copied = "thr_" + "c" * 20
    (directory / f"{copied}.jsonl").write_bytes(b"".join(lines).replace(rows[0]["id"].encode(), copied.encode()))
    retitled = directory / "retitled.tmp"
    retitled.write_bytes(json.dumps({**header, "title": "renamed over"}).encode() + b"\n" + b"".join(lines[1:]))
    os.replace(retitled, source)
    (directory / f"{rows[1]['id']}.jsonl").unlink()
    listed = {row["id"]: row for row in index.listing()}
    assert sorted(listed) == sorted([rows[0]["id"], copied])
    assert listed[copied]["turnCount"] == rows[0]["turnCount"]
    assert listed == {row["id"]: row for row in _fresh_rows(directory, tmp_path)}


def _row_state(directory: Path, thread_id: str) -> tuple[int, int]:
    """The stored row's folded bytes and open mark."""
    import sqlite3

    with sqlite3.connect(ThreadIndex(directory).path) as db:
        size, opened = db.execute("SELECT size, open FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return int(size), int(opened)


def test_a_writer_killed_mid_turn_is_settled_by_the_next_listing(workspace: Path, tmp_path: Path) -> None:
    directory = RoderPaths.from_env().threads_dir
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(directory), str(workspace)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        thread_id = writer.stdout.readline().strip()
        path = directory / f"{thread_id}.jsonl"
        size, opened = _row_state(directory, thread_id)
        assert opened == 1 and 0 < size < path.stat().st_size, "the writer marked its row, which is a turn behind"
        [live] = ThreadIndex(directory).listing()
        assert (live["turnCount"], live["status"]) == (2, "active"), "a running writer's turn is listed as running"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    [row] = ThreadIndex(directory).listing()
    assert (row["turnCount"], row["status"], row["title"]) == (2, "idle", "killed")
    assert _row_state(directory, thread_id) == (path.stat().st_size, 0)
    assert [row] == _fresh_rows(directory, tmp_path)


async def test_a_process_killed_while_rebuilding_the_index_leaves_it_right_or_rebuilt(workspace: Path, tmp_path: Path) -> None:
    directory = await _threads(workspace, 4)
    expected = _fresh_rows(directory, tmp_path)
    for _ in range(3):
        rebuilder = subprocess.Popen([sys.executable, "-c", REBUILDER, str(directory)], stdout=subprocess.PIPE, text=True)
        assert rebuilder.stdout is not None
        assert rebuilder.stdout.readline().strip() == "rebuilding"
        rebuilder.send_signal(signal.SIGKILL)  # wherever it is: between rows, mid-commit, mid-drop
        rebuilder.wait()
        assert ThreadIndex(directory).listing() == expected


def test_a_row_continues_from_its_folded_bytes_and_a_rewritten_file_is_read_again(workspace: Path) -> None:
    directory = RoderPaths.from_env().threads_dir
    directory.mkdir(parents=True)
    thread = "thr_" + "b" * 20
    head = {"type": "header", "id": thread, "cwd": str(workspace), "createdAt": 10.0, "provider": "mock", "model": "m"}
    path = directory / f"{thread}.jsonl"

    def line(**fields: Any) -> bytes:
        return json.dumps({"threadId": thread, **fields}, separators=(",", ":")).encode() + b"\n"

    path.write_bytes(json.dumps(head).encode() + b"\n" + line(ts=11.0, method="turn/started", turnId="turn_1"))
    index = ThreadIndex(directory)
    index.taken(thread, path)
    index.catch_up(thread, path, live=True)
    with path.open("ab") as handle:  # a turn's start written twice counts once
        handle.write(line(ts=12.0, method="turn/started", turnId="turn_1"))
        handle.write(line(ts=13.0, method="turn/started", turnId="turn_2"))
        handle.write(line(ts=14.0, method="thread/title/changed", title="two turns"))
    index.catch_up(thread, path, live=False)
    [row] = index.listing()
    assert (row["turnCount"], row["title"], row["updatedAt"]) == (2, "two turns", 14.0)
    assert summarize(path, thread, live=False) == _stored(directory, thread), "folding on equals reading afresh"
    # rewritten shorter in place (same inode): read again from the start
    path.write_bytes(json.dumps({**head, "title": "short"}).encode() + b"\n")
    index.catch_up(thread, path, live=False)
    [row] = index.listing()
    assert (row["turnCount"], row["title"]) == (0, "short")


def _stored(directory: Path, thread_id: str) -> tuple[Any, ...]:
    import sqlite3

    with sqlite3.connect(ThreadIndex(directory).path) as db:
        return tuple(db.execute(f"SELECT {_ROW} FROM threads WHERE id = ?", (thread_id,)).fetchone())


def test_the_search_fold_equals_visiting_every_line(workspace: Path) -> None:
    """A thread file is folded by searching for the summary methods: text or tool arguments
    that spell a method, lines in another form (keys in another order, spaces), a line that
    does not parse and repeated starts give the same row as folding line by line."""
    from roder_ext_jsonl_store.index import SummaryFold

    thread = "thr_" + "d" * 20
    head = {"type": "header", "id": thread, "cwd": str(workspace), "createdAt": 10.0, "title": "", "provider": "p", "model": "m"}
    lines = [json.dumps(head, separators=(",", ":")).encode()]
    ts = 10.0

    def line(method: str, **fields: Any) -> None:
        nonlocal ts
        ts += 1
        lines.append(json.dumps({"threadId": thread, "ts": ts, "method": method, **fields}, separators=(",", ":")).encode())

    line("thread/started", thread={k: v for k, v in head.items() if k != "type"})
    line("thread/title/changed", title="first")
    for turn in ("turn_1", "turn_1", "turn_2"):  # a start written twice counts once
        line("turn/started", turnId=turn)
        line("thread/status/changed", status="active")
        spelled = {"threadId": thread, "ts": 1e9, "method": "turn/started", "turnId": "turn_fake"}
        line("item/completed", turnId=turn, item={"type": "toolCall", "arguments": spelled, "text": ',"method":"turn/started"'})
        line("item/completed", turnId=turn, item={"type": "agentMessage", "text": '"method":"thread/title/changed"'})
        line("thread/status/changed", status="idle")
    lines.append(json.dumps({"method": "turn/started", "threadId": thread, "ts": ts + 0.5, "turnId": "turn_3"}).encode())
    ts += 1
    line("thread/model/changed", provider="q", model="n")
    line("thread/title/changed", title="second")
    line("item/started", turnId="turn_2", item={"title": "x", "method": "thread/title/changed"})
    lines.append(b'{"threadId":"' + thread.encode() + b'","ts":99.0,"method":"thread/title/changed","ti')  # unreadable
    data = b"\n".join(lines) + b"\n"
    body = len(lines[0]) + 1

    def fold(every_line: bool) -> tuple[Any, ...]:
        summary = SummaryFold()
        summary.header(head)
        if every_line:
            summary._every_line(data, body, len(data))
        else:
            summary.lines(data, body, len(data))
        return summary.row(len(data), 1, live=False)

    searched = fold(every_line=False)
    assert searched == fold(every_line=True)
    assert searched[2] == "second" and searched[5:7] == ("q", "n") and searched[9] == 3 and searched[10] == "idle"
    assert searched[4] == ts, "the latest readable line's ts; the unreadable line's is not taken"


async def test_a_store_for_a_throwaway_data_folder_keeps_no_index_and_lists_the_same(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch rollout's data folder is removed after the run: its store writes no SQLite rows
    and fsyncs nothing, and a listing there reads the files and says what the index would."""
    from roder_ext_jsonl_store import JsonlThreadStore
    from roder_ext_jsonl_store.extension import JsonlThreadStoreExtension

    from roder_core.ir import AgentMessageItem, ThreadHeader, Turn
    from roder_core.threads.events import ItemCompleted, ThreadStarted, TurnCompleted, TurnStarted

    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    async def one_turn(store: JsonlThreadStore) -> ThreadHeader:
        header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock", title="scratch")
        await store.append(header, ThreadStarted(thread_id=header.id, thread=header))
        turn = Turn()
        await store.append(header, TurnStarted(thread_id=header.id, turn_id=turn.id))
        await store.append(header, ItemCompleted(thread_id=header.id, turn_id=turn.id, item=AgentMessageItem(text="ok")))
        await store.append(header, TurnCompleted(thread_id=header.id, turn=turn.model_copy(update={"status": "completed"})))
        await store.sync(header.id)
        await store.release(header.id)
        return header

    await one_turn(JsonlThreadStoreExtension(tmp_path / "durable-threads").store)
    assert synced  # a user's threads are fsynced at turn boundaries
    synced.clear()
    scratch = tmp_path / "scratch-threads"
    store = JsonlThreadStoreExtension(scratch, scratch=True).store
    header = await one_turn(store)
    assert synced == []
    assert (scratch / f"{header.id}.jsonl").is_file()
    assert not (scratch / ".index").exists()
    listed = await store.list_threads()
    assert [(s.id, s.title, s.turn_count) for s in listed] == [(header.id, "scratch", 1)]
    assert not (scratch / ".index").exists()  # a listing made none either

    threads = await _threads(workspace, 3)
    copy = tmp_path / "copy"
    shutil.copytree(threads, copy, ignore=shutil.ignore_patterns(".index"))
    indexed = await JsonlThreadStore(threads).list_threads()
    unindexed = JsonlThreadStore(copy, indexed=False)
    assert [s.wire() for s in await unindexed.list_threads()] == [s.wire() for s in indexed]
    assert [s.wire() for s in await unindexed.list_threads(limit=2)] == [s.wire() for s in indexed[:2]]
    assert await unindexed.list_threads(cwd="/elsewhere") == []
    await unindexed.delete(indexed[0].id)
    assert [s.id for s in await unindexed.list_threads()] == [s.id for s in indexed[1:]]
    assert not (copy / ".index").exists()


async def test_a_writer_keeps_the_index_open_so_an_update_is_not_checkpointed_until_it_closes(
    workspace: Path, tmp_path: Path
) -> None:
    """Every update of a row opens and closes a connection; were it the index's last, SQLite
    would checkpoint the log into the database (and sync both) after each one. The store keeps
    the index open from its first update to its close: the updates stay in the log, every other
    connection reads them, and the close checkpoints once."""
    from roder_ext_jsonl_store import JsonlThreadStore

    from roder_core.ir import AgentMessageItem, ThreadHeader, Turn
    from roder_core.threads.events import ItemCompleted, ThreadStarted, TurnCompleted, TurnStarted

    directory = tmp_path / "threads"
    store = JsonlThreadStore(directory)
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock", title="held")
    await store.append(header, ThreadStarted(thread_id=header.id, thread=header))
    index = ThreadIndex(directory)
    log = index.path.with_name(index.path.name + "-wal")
    for n in range(2):
        turn = Turn()
        await store.append(header, TurnStarted(thread_id=header.id, turn_id=turn.id))
        await store.append(header, ItemCompleted(thread_id=header.id, turn_id=turn.id, item=AgentMessageItem(text=f"{n}")))
        await store.append(header, TurnCompleted(thread_id=header.id, turn=turn.model_copy(update={"status": "completed"})))
        await store.sync(header.id)
        assert log.stat().st_size > 0  # the update is in the log: no close checkpointed it
        assert [(row["id"], row.get("turnCount")) for row in index.listing()] == [(header.id, n + 1)]
    await store.close()
    assert not log.exists()  # the index's last connection closed: the log was checkpointed
    assert [(row["id"], row.get("turnCount")) for row in index.listing()] == [(header.id, 2)]
