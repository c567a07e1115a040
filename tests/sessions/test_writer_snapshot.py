"""The writer keeps the recent snapshot as it writes: the first resume of a thread reads that
snapshot plus what was appended after it and never folds the whole file, while the file stays
the truth (a crash before the last checkpoint, a torn or stale snapshot, a rewritten file all
give exactly what a full fold gives). The writer holds only the recent part of the thread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import roder_ext_jsonl_store.store as store_module
from roder_ext_jsonl_store import JsonlThreadStore
from roder_ext_jsonl_store.snapshots import read_snapshot, recent_path, snapshot_path

from roder_core.ir import AgentMessageItem, CompactionItem, Thread, ThreadHeader, Turn, TurnStatus, UserMessageItem
from roder_core.kernel.services import RecentThread
from roder_core.settings.paths import RoderPaths
from roder_core.threads.events import ItemCompleted, ItemStarted, RuntimeEvent, TurnCompleted, TurnStarted

from .harness import make_runtime, thread_file

SUMMARY = "## Goal\nShip it\n## Constraints\nnone\n## Progress\nhalf\n## Decisions\nnone\n## Next steps\nfinish"


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads in tests are small: snapshot them as if they were long, at every checkpoint."""
    monkeypatch.setattr(store_module, "MIN_BYTES", 1)
    monkeypatch.setattr(store_module, "RECENT_REFRESH_BYTES", 1)


def _store() -> JsonlThreadStore:
    return JsonlThreadStore(RoderPaths.from_env().threads_dir)


def _state(thread: Thread) -> dict[str, object]:
    return thread.model_dump(exclude={"updated_at"})


async def _whole(thread_id: str) -> Thread:
    """The thread folded from the whole file, with no snapshot to help."""
    snapshot_path(_store().directory, thread_id).unlink(missing_ok=True)
    return await _store().load(thread_id)


async def _resume_reads_no_whole_file(thread_id: str, monkeypatch: pytest.MonkeyPatch, older: int) -> RecentThread:
    """A fresh store's ``load_recent``, which must not fold the whole file, and must give the
    turns from ``older`` on exactly as a full fold does."""
    whole = await _whole(thread_id)

    def refuse(*_args: object) -> object:
        raise AssertionError("the whole file was folded")

    with monkeypatch.context() as patch:
        patch.setattr(JsonlThreadStore, "_load_whole", refuse)
        loaded = await _store().load_recent(thread_id)
    assert loaded.older_turns == older
    assert _state(loaded.thread) == _state(whole.model_copy(update={"turns": whole.turns[older:]}))
    return loaded


def _turn(thread_id: str, n: int, *, compacts: bool = False) -> list[RuntimeEvent]:
    turn = Turn()
    items: list[UserMessageItem | AgentMessageItem | CompactionItem] = []
    if compacts:
        items.append(CompactionItem(summary=f"summary up to {n}"))
    items += [UserMessageItem(text=f"question {n}"), AgentMessageItem(text=f"answer {n} " + "x" * 200)]
    events: list[RuntimeEvent] = [TurnStarted(thread_id=thread_id, turn_id=turn.id)]
    for item in items:
        events.append(ItemStarted(thread_id=thread_id, turn_id=turn.id, item=item))
        events.append(ItemCompleted(thread_id=thread_id, turn_id=turn.id, item=item))
    events.append(TurnCompleted(thread_id=thread_id, turn=turn.model_copy(update={"status": TurnStatus.COMPLETED})))
    return events


async def _write(store: JsonlThreadStore, header: ThreadHeader, turns: range, *, every: int = 5, sync: bool = True) -> None:
    for n in turns:
        for event in _turn(header.id, n, compacts=n > 0 and n % every == 0):
            await store.append(header, event)
        if sync:
            await store.sync(header.id)


async def test_the_first_resume_of_a_compacted_thread_reads_the_writers_snapshot(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, _ = make_runtime(workspace, [{"text": "r1"}, {"text": "r2"}, {"text": SUMMARY}, {"text": "r3"}])
    thread = await runtime.start_thread()
    for prompt in ("one " + "q" * 2_000, "two " + "q" * 2_000):
        await runtime.run_turn(thread.id, prompt)
    await runtime.compact(thread.id)
    await runtime.run_turn(thread.id, "three")
    await runtime.close()
    await _resume_reads_no_whole_file(thread.id, monkeypatch, older=1)  # /compact keeps part of turn two


async def test_the_writer_holds_only_the_recent_part_even_within_one_long_turn(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "FOLD_BYTES", 2_000)
    store = _store()
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock")
    await _write(store, header, range(40), sync=False)  # no turn boundary reported at all
    writer = store._writers[header.id]
    assert writer.recent is not None and writer.recent.offset > 0
    assert len(writer.recent.thread.turns) <= 5 + 5  # the turns since the latest compaction, and at most a fold's worth
    assert len(writer.recent.older) >= 30
    await store.release(header.id)
    loaded = await _resume_reads_no_whole_file(header.id, monkeypatch, older=35)
    assert len(loaded.thread.turns) == 5


async def test_a_writer_killed_after_a_checkpoint_loses_nothing(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock")
    await _write(store, header, range(12))
    await _write(store, header, range(12, 14), sync=False)  # appended after the last checkpoint
    os.close(store._writers.pop(header.id).fd)  # the process dies: no release, no last snapshot
    path = recent_path(store.directory, header.id)
    snapshot = read_snapshot(path)
    assert snapshot is not None and snapshot.offset < thread_file(header.id).stat().st_size
    loaded = await _resume_reads_no_whole_file(header.id, monkeypatch, older=10)
    assert loaded.thread.turns[-1].items[-1].text.startswith("answer 13")  # type: ignore[union-attr]


async def test_a_torn_writer_snapshot_is_ignored_and_the_file_is_folded(workspace: Path) -> None:
    store = _store()
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock")
    await _write(store, header, range(12))
    await store.release(header.id)
    path = recent_path(store.directory, header.id)
    path.write_bytes(path.read_bytes()[:-50])  # a snapshot cut short
    whole = await _whole(header.id)
    loaded = await _store().load_recent(header.id)
    assert loaded.older_turns == 0 and _state(loaded.thread) == _state(whole)


async def test_a_resumed_writer_continues_from_the_snapshot_and_a_rewritten_file_is_not_trusted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store()
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock")
    await _write(store, header, range(8))
    await store.release(header.id)
    second = _store()  # another session continues the thread
    await _write(second, header, range(8, 13))
    await second.release(header.id)
    await _resume_reads_no_whole_file(header.id, monkeypatch, older=10)
    path = thread_file(header.id)
    path.write_bytes(path.read_bytes().replace(b"question 12", b"QUESTION 12"))  # same size, other bytes
    reloaded = await _store().load_recent(header.id)
    assert reloaded.older_turns == 0 and reloaded.thread.turns[-1].items[0].text == "QUESTION 12"  # type: ignore[union-attr]


async def test_a_short_thread_costs_its_writer_no_fold_until_it_grows_long(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MIN_BYTES", 6_000)
    store = _store()
    header = ThreadHeader(cwd=str(workspace), provider="mock", model="mock")
    await _write(store, header, range(3))
    writer = store._writers[header.id]
    assert writer.recent is None and not recent_path(store.directory, header.id).exists()
    await _write(store, header, range(3, 12))  # past MIN_BYTES: folded from the start, once
    assert writer.recent is not None and writer.recent.offset == writer.size
    await store.release(header.id)
    await _resume_reads_no_whole_file(header.id, monkeypatch, older=10)
