"""Resuming from the recent turns: a compacted thread is resumed with only the turns its next
model call can see (from the latest compaction's kept part on), read from a recent snapshot plus
the lines appended since; the older turns stay on disk until something asks for the whole
thread. The file stays the source of truth: a stale, corrupt or missing recent snapshot, torn
and corrupt lines are handled as a full load handles them, and every reader of the whole thread
(thread/read, fork, /compact, the next request) sees exactly what a full load gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import roder_ext_jsonl_store.store as store_module
from roder_ext_jsonl_store import JsonlThreadStore
from roder_ext_jsonl_store.snapshots import read_snapshot, recent_path, snapshot_path

from roder_core.ir import CompactionItem, Thread
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import (
    INITIALIZE,
    THREAD_READ,
    THREAD_RESUME,
    ClientInfo,
    InitializeParams,
    ThreadReadParams,
    ThreadResumeParams,
)
from roder_core.settings.paths import RoderPaths
from roder_core.turn.context import shows_all_visible

from .harness import make_runtime, thread_file

SUMMARY = "## Goal\nShip it\n## Constraints\nnone\n## Progress\nhalf\n## Decisions\nnone\n## Next steps\nfinish"


@pytest.fixture(autouse=True)
def snapshot_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads in tests are small; snapshot them as if they were long, and take the recent
    snapshot again after every appended byte."""
    monkeypatch.setattr(store_module, "MIN_BYTES", 1)
    monkeypatch.setattr(store_module, "RECENT_REFRESH_BYTES", 1)


def _store() -> JsonlThreadStore:
    return JsonlThreadStore(RoderPaths.from_env().threads_dir)


def _recent(thread_id: str) -> Path:
    return recent_path(_store().directory, thread_id)


async def _full_fold(thread_id: str) -> Thread:
    """The thread folded from the whole file, with no snapshot to help."""
    snapshot_path(_store().directory, thread_id).unlink(missing_ok=True)
    return await _store().load(thread_id)


def _state(thread: Thread) -> dict:
    return thread.model_dump(exclude={"updated_at"})


def _texts(thread: Thread) -> list[str]:
    """The first words of each turn ("" for the /compact turn, which holds only its summary)."""
    return [getattr(turn.items[0], "text", "") if turn.items else "" for turn in thread.turns]


async def _compacted_thread(workspace: Path) -> str:
    """Five turns: three long ones, a /compact turn keeping part of the third, then one more."""
    runtime, _ = make_runtime(workspace, [{"text": "r1"}, {"text": "r2"}, {"text": "r3"}, {"text": SUMMARY}, {"text": "r4"}])
    thread = await runtime.start_thread()
    for prompt in ("one", "two", "three"):
        await runtime.run_turn(thread.id, prompt + " " + "q" * 2_000)
    await runtime.compact(thread.id)
    await runtime.run_turn(thread.id, "four")
    await runtime.close()
    return thread.id


async def test_a_compacted_thread_resumes_with_its_recent_turns_only(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    whole = await _full_fold(thread_id)
    _recent(thread_id).unlink()  # as a thread written before writers kept the recent snapshot
    first = await _store().load_recent(thread_id)  # no recent snapshot: everything, and one is left
    assert first.older_turns == 0 and _state(first.thread) == _state(whole)
    assert _recent(thread_id).exists()

    recent = await _store().load_recent(thread_id)
    assert recent.older_turns > 0
    assert _state(recent.thread) == _state(whole.model_copy(update={"turns": whole.turns[recent.older_turns :]}))
    assert shows_all_visible(recent.thread.items())  # all the next request needs is there
    meta = json.loads(_recent(thread_id).read_bytes().split(b"\n", 1)[0])
    assert meta["older"] == [t.id for t in whole.turns[: recent.older_turns]]


async def test_the_next_request_is_the_same_as_from_the_whole_thread_and_nothing_older_is_read(
    workspace: Path, tmp_path: Path
) -> None:
    thread_id = await _compacted_thread(workspace)
    threads = RoderPaths.from_env().threads_dir
    saved = tmp_path / "saved"
    shutil.copytree(threads, saved)
    shutil.rmtree(saved / ".snapshots")  # no snapshot in it: a resume from it loads everything

    await _store().load_recent(thread_id)  # leaves the recent snapshot
    runtime, engine = make_runtime(workspace, [{"text": "r5"}])
    await runtime.resume_thread(thread_id)
    state = runtime.threads.get(thread_id)
    assert state.older is not None
    await runtime.run_turn(thread_id, "five")
    assert state.older is not None, "the older turns were read although the model does not see them"
    lazy = engine.requests[-1]
    await runtime.close()

    shutil.rmtree(threads)
    shutil.copytree(saved, threads)
    runtime, engine = make_runtime(workspace, [{"text": "r5"}])
    await runtime.resume_thread(thread_id)
    assert runtime.threads.get(thread_id).older is None
    await runtime.run_turn(thread_id, "five")
    whole = engine.requests[-1]
    await runtime.close()

    def shape(request: object) -> list[tuple[str, list[str]]]:
        return [(m.role, [getattr(p, "text", p.type) for p in m.parts]) for m in request.messages]  # type: ignore[attr-defined]

    assert lazy.messages[0].text().startswith("Summary of the earlier conversation")
    assert shape(lazy) == shape(whole)


async def test_readers_of_the_whole_thread_get_every_turn(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    whole = await _full_fold(thread_id)
    runtime, _ = make_runtime(workspace)
    client = LocalAppClient.for_runtime(runtime)
    await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="test")))
    resumed = (await client.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread_id, include_turns=False))).thread
    assert resumed.turns == []
    state = runtime.threads.get(thread_id)
    assert state.older is not None and state.turn_count == len(whole.turns)
    read = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
    assert _state(read) == _state(whole)
    assert state.older is None and _state(runtime.thread(thread_id)) == _state(whole)
    await client.close()


async def test_a_fork_of_a_lazily_resumed_thread_has_every_turn(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    whole = await _full_fold(thread_id)
    runtime, _ = make_runtime(workspace)
    await runtime.resume_thread(thread_id)
    first_turn = whole.turns[0].id
    fork = await runtime.fork_thread(thread_id, first_turn)
    assert _texts(fork) == _texts(whole)[:1]
    fork = await runtime.fork_thread(thread_id)
    assert _texts(fork) == _texts(whole)
    await runtime.close()


async def test_compact_on_demand_reads_the_older_turns_first(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    runtime, _ = make_runtime(workspace, [{"text": "r5"}, {"text": SUMMARY}])
    await runtime.resume_thread(thread_id)
    await runtime.run_turn(thread_id, "five " + "q" * 2_000)
    turn = await runtime.compact(thread_id)
    assert runtime.threads.get(thread_id).older is None
    assert isinstance(turn.items[0], CompactionItem)
    await runtime.close()
    whole = await _full_fold(thread_id)
    assert len(whole.turns) == 7 and _texts(whole)[-2] == "five " + "q" * 2_000


async def test_a_recent_part_missing_what_the_model_sees_is_completed_before_the_request(workspace: Path) -> None:
    """A recent snapshot cut after the compaction's kept part (written by another version, or
    edited) is still correct: the runner reads the older turns before building the request."""
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    recent = _recent(thread_id)
    meta_line, body = recent.read_bytes().split(b"\n", 1)
    meta, data = json.loads(meta_line), json.loads(body)
    meta["older"].append(data["turns"][0]["id"])  # leave out the turn holding the kept items
    data["turns"] = data["turns"][1:]
    recent.write_bytes(json.dumps(meta).encode() + b"\n" + json.dumps(data).encode())

    runtime, engine = make_runtime(workspace, [{"text": "r5"}])
    await runtime.resume_thread(thread_id)
    state = runtime.threads.get(thread_id)
    assert state.older is not None and not shows_all_visible(state.thread.items())
    await runtime.run_turn(thread_id, "five")
    assert state.older is None
    kept_texts = [p.text for m in engine.requests[-1].messages for p in m.parts if hasattr(p, "text")]
    assert any("three" in text for text in kept_texts)
    await runtime.close()


async def test_lines_appended_by_another_writer_are_folded_onto_the_recent_part(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    runtime, _ = make_runtime(workspace, [{"text": "r5"}])
    await runtime.resume_thread(thread_id)
    await runtime.run_turn(thread_id, "five")
    await runtime.close()
    recent = await _store().load_recent(thread_id)
    whole = await _full_fold(thread_id)
    assert recent.older_turns > 0
    assert _texts(recent.thread)[-1] == "five"
    assert _state(recent.thread) == _state(whole.model_copy(update={"turns": whole.turns[recent.older_turns :]}))


async def test_a_stale_recent_snapshot_is_not_trusted(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    path = thread_file(thread_id)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"text":"four"', b'"text":"FOUR"'))  # same size, other bytes
    loaded = await _store().load_recent(thread_id)
    assert loaded.older_turns == 0  # a full fold
    assert _texts(loaded.thread)[-1] == "FOUR"


async def test_an_appended_line_touching_an_older_turn_falls_back_to_the_whole_thread(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    whole = await _full_fold(thread_id)
    path = thread_file(thread_id)
    old_turn = whole.turns[0]
    item = old_turn.items[0].model_copy(update={"text": "one, edited later"})
    event = {"threadId": thread_id, "ts": 1.0, "method": "item/completed", "turnId": old_turn.id, "item": item.wire()}
    with path.open("ab") as file:
        file.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
    loaded = await _store().load_recent(thread_id)
    assert loaded.older_turns == 0
    assert _texts(loaded.thread)[0] == "one, edited later"
    assert len(loaded.thread.turns) == len(whole.turns)


async def test_a_corrupt_recent_snapshot_is_ignored_and_replaced(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    expected = await _store().load_recent(thread_id)
    recent = _recent(thread_id)
    for garbage in (b"", b"not json\n{}", recent.read_bytes()[:200], b'{"format":1}\n{}'):
        recent.write_bytes(garbage)
        loaded = await _store().load_recent(thread_id)
        assert loaded.older_turns == 0  # read whole, and the recent snapshot written again
        again = await _store().load_recent(thread_id)
        assert _state(again.thread) == _state(expected.thread) and again.older_turns == expected.older_turns


async def test_a_torn_last_line_after_the_recent_snapshot_is_reported_and_cut(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    path = thread_file(thread_id)
    line_count = path.read_bytes().count(b"\n")
    with path.open("ab") as file:
        file.write(b'{"method":"item/completed","thr')
    store = _store()
    loaded = await store.load_recent(thread_id)
    assert loaded.older_turns > 0
    assert _texts(loaded.thread)[-1] == "four"
    assert [p.line for p in store.problems[thread_id]] == [line_count + 1]
    assert path.read_bytes().endswith(b"\n")
    assert path.with_suffix(".torn").exists()


async def test_a_corrupt_middle_line_stays_reported_through_the_recent_snapshot(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    path = thread_file(thread_id)
    lines = path.read_bytes().split(b"\n")
    bad = 4  # an event line of the first turn
    lines[bad - 1] = b'{"this is": not json'
    path.write_bytes(b"\n".join(lines))
    store = _store()
    await store.load_recent(thread_id)  # full fold, recent snapshot written
    assert [p.line for p in store.problems[thread_id]] == [bad]
    store = _store()
    recent = await store.load_recent(thread_id)
    assert recent.older_turns > 0
    assert [p.line for p in store.problems[thread_id]] == [bad]


async def test_a_thread_never_compacted_is_loaded_whole_from_its_recent_snapshot(workspace: Path) -> None:
    runtime, _ = make_runtime(workspace)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "one")
    await runtime.run_turn(thread.id, "two")
    await runtime.close()
    for _ in range(2):
        loaded = await _store().load_recent(thread.id)
        assert loaded.older_turns == 0 and _texts(loaded.thread) == ["one", "two"]
    snapshot = read_snapshot(_recent(thread.id))  # the writer's: every turn is recent
    assert snapshot is not None and snapshot.older == [] and len(snapshot.thread.turns) == 2


async def test_deleting_a_thread_removes_its_recent_snapshot(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    assert _recent(thread_id).exists()
    await _store().delete(thread_id)
    assert not _recent(thread_id).exists()


async def test_thread_resume_with_last_turns_sends_the_end_and_counts_the_rest(workspace: Path) -> None:
    thread_id = await _compacted_thread(workspace)
    await _store().load_recent(thread_id)
    whole = await _full_fold(thread_id)
    runtime, _ = make_runtime(workspace)
    client = LocalAppClient.for_runtime(runtime)
    await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="test")))
    result = await client.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread_id, last_turns=1))
    assert [t.id for t in result.thread.turns] == [whole.turns[-1].id]
    assert result.older_turns == len(whole.turns) - 1
    state = runtime.threads.get(thread_id)
    assert state.older is not None, "the last turn was loaded already; nothing older was read"
    # More than it holds: the turns it holds (older ones are paged in with thread/read).
    result = await client.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread_id, last_turns=len(whole.turns)))
    held = len(state.thread.turns)
    assert held < len(whole.turns)
    assert [t.id for t in result.thread.turns] == [t.id for t in whole.turns[-held:]]
    assert result.older_turns == len(whole.turns) - held and state.older is not None
    await client.close()
