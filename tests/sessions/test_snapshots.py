"""Snapshots of long threads: resuming reads the snapshot and only the lines appended since,
and never trusts a snapshot whose file changed underneath it (another writer appended, the
file was truncated or rewritten, the snapshot itself is corrupt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import roder_ext_jsonl_store.store as store_module
from roder_ext_jsonl_store import JsonlThreadStore
from roder_ext_jsonl_store.snapshots import snapshot_path

from roder_core.ir import Thread
from roder_core.settings.paths import RoderPaths

from .harness import make_runtime, thread_file


@pytest.fixture(autouse=True)
def snapshot_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads in tests are small; snapshot them as if they were long."""
    monkeypatch.setattr(store_module, "MIN_BYTES", 1)


def _store() -> JsonlThreadStore:
    return JsonlThreadStore(RoderPaths.from_env().threads_dir)


async def _full_fold(thread_id: str) -> Thread:
    """The thread folded from the whole file, with no snapshot to help."""
    snapshot_path(_store().directory, thread_id).unlink(missing_ok=True)
    return await _store().load(thread_id)


def _state(thread: Thread) -> dict:
    """What a load must reproduce; ``updated_at`` of a loaded thread is the time of the load."""
    return thread.model_dump(exclude={"updated_at"})


async def _thread(workspace: Path, prompts: list[str]) -> str:
    runtime, _ = make_runtime(workspace)
    thread = await runtime.start_thread()
    for prompt in prompts:
        await runtime.run_turn(thread.id, prompt)
    await runtime.close()
    return thread.id


async def _continue(workspace: Path, thread_id: str, prompt: str) -> None:
    """Another process's writer appends a turn (its own store, its own runtime)."""
    runtime, _ = make_runtime(workspace)
    await runtime.resume_thread(thread_id)
    await runtime.run_turn(thread_id, prompt)
    await runtime.close()


async def test_a_load_leaves_a_snapshot_the_next_load_uses(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one", "two"])
    first = await _store().load(thread_id)
    snap = snapshot_path(_store().directory, thread_id)
    assert snap.exists()
    assert snap.stat().st_mode & 0o777 == 0o600
    meta, body = snap.read_bytes().split(b"\n", 1)
    assert json.loads(meta)["offset"] == thread_file(thread_id).stat().st_size
    assert _state(await _store().load(thread_id)) == _state(first)
    # Proof that the second load came from the snapshot: a change made only there shows up.
    data = json.loads(body)
    data["title"] = "from the snapshot"
    snap.write_bytes(meta + b"\n" + json.dumps(data).encode())
    assert (await _store().load(thread_id)).title == "from the snapshot"


async def test_lines_appended_by_another_writer_are_folded_on_top(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one"])
    await _store().load(thread_id)  # snapshot after one turn
    await _continue(workspace, thread_id, "two")
    loaded = await _store().load(thread_id)
    assert [t.items[0].text for t in loaded.turns] == ["one", "two"]  # type: ignore[union-attr]
    assert _state(loaded) == _state(await _full_fold(thread_id))


async def test_a_truncated_file_is_folded_again(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one", "two"])
    path = thread_file(thread_id)
    lines = path.read_bytes().splitlines(keepends=True)
    await _store().load(thread_id)  # snapshot covers both turns
    second_turn = next(
        i
        for i, line in enumerate(lines)
        if b'"turn/started"' in line and i > 3 and any(b'"turn/completed"' in earlier for earlier in lines[:i])
    )
    path.write_bytes(b"".join(lines[:second_turn]))
    loaded = await _store().load(thread_id)
    assert len(loaded.turns) == 1
    assert _state(loaded) == _state(await _full_fold(thread_id))


async def test_a_rewritten_file_of_the_same_length_is_not_trusted_to_the_snapshot(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one"])
    await _store().load(thread_id)
    path = thread_file(thread_id)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"text":"one"', b'"text":"ONE"'))  # same size, other bytes
    loaded = await _store().load(thread_id)
    assert loaded.turns[0].items[0].text == "ONE"  # type: ignore[union-attr]


async def test_a_corrupt_snapshot_is_ignored_and_replaced(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one", "two"])
    expected = await _store().load(thread_id)
    snap = snapshot_path(_store().directory, thread_id)
    for garbage in (b"", b"not json\n{}", snap.read_bytes()[:200], b'{"format":1}\n{}'):
        snap.write_bytes(garbage)
        assert _state(await _store().load(thread_id)) == _state(expected)
        assert Thread.model_validate_json(snap.read_bytes().split(b"\n", 1)[1]) is not None  # rewritten


async def test_a_torn_line_after_the_snapshot_is_reported_with_its_line_number(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one"])
    await _store().load(thread_id)
    path = thread_file(thread_id)
    line_count = path.read_bytes().count(b"\n")
    with path.open("ab") as file:
        file.write(b'{"method":"item/completed","thr')
    store = _store()
    loaded = await store.load(thread_id)
    assert [t.items[0].text for t in loaded.turns] == ["one"]  # type: ignore[union-attr]
    assert [p.line for p in store.problems[thread_id]] == [line_count + 1]
    assert path.read_bytes().endswith(b"\n")  # the dead writer's torn tail was cut off
    assert path.with_suffix(".torn").exists()


async def test_deleting_a_thread_removes_its_snapshot(workspace: Path) -> None:
    thread_id = await _thread(workspace, ["one"])
    await _store().load(thread_id)
    snap = snapshot_path(_store().directory, thread_id)
    assert snap.exists()
    await _store().delete(thread_id)
    assert not snap.exists()
