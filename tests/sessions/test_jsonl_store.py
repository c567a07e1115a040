"""The JSONL thread store: deferred files, loading through the reducer, damaged lines, the index,
forks, the writer lock and extension state."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest
from roder_ext_jsonl_store import JsonlThreadStore, ThreadInUseError
from roder_ext_jsonl_store.index import ThreadIndex

from roder_core.errors import RoderError, ThreadNotFoundError
from roder_core.ir import AgentMessageItem, ToolCallItem, ToolResultItem, UserMessageItem
from roder_core.server.protocol import INITIALIZE, THREAD_START, ClientInfo, InitializeParams, ThreadStartParams
from roder_core.settings.paths import RoderPaths

from .harness import make_runtime, thread_file


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _thread_with_turns(workspace: Path, prompts: list[str], script: list[dict] | None = None):
    runtime, _ = make_runtime(workspace, script)
    thread = await runtime.start_thread()
    for prompt in prompts:
        await runtime.run_turn(thread.id, prompt)
    return runtime, thread


async def test_a_thread_without_turns_leaves_nothing_on_disk(workspace: Path) -> None:
    runtime, _ = make_runtime(workspace)
    thread = await runtime.start_thread()
    await runtime.save_custom(thread.id, "acme.state", {"x": 1})
    await runtime.close()
    assert not thread_file(thread.id).exists()
    assert await runtime.store.list_threads() == []


async def test_first_turn_writes_header_then_every_event(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["hello"])
    lines = _lines(thread_file(thread.id))
    assert lines[0]["type"] == "header"
    assert lines[0]["id"] == thread.id
    assert lines[0]["cwd"] == str(workspace.resolve())
    assert lines[0]["formatVersion"] == 1
    methods = [line.get("method") for line in lines[1:]]
    assert methods[0] == "thread/started"
    assert "turn/started" in methods
    assert "turn/completed" in methods
    assert not any(m and m.endswith("/delta") for m in methods), "deltas are folded, never stored"
    agent = [line["item"] for line in lines if line.get("method") == "item/completed" and line["item"]["type"] == "agentMessage"]
    assert agent
    assert agent[0]["text"].startswith("Mock reply")
    await runtime.list_threads()
    index = ThreadIndex(thread_file(thread.id).parent)
    assert index.folder.stat().st_mode & 0o777 == 0o700
    for private in (thread_file(thread.id), index.path):
        assert private.stat().st_mode & 0o777 == 0o600, f"{private.name} is readable by others"
    await runtime.close()


async def test_loaded_thread_equals_the_live_one(workspace: Path) -> None:
    script = [
        {"text": "looking", "tool_calls": [{"name": "memory_search", "arguments": {"query": "x"}}]},
        {"reasoning": "hmm", "text": "done"},
    ]
    from roder_ext_memory import MemoryExtension

    runtime, _ = make_runtime(workspace, script, extensions=[MemoryExtension(RoderPaths.from_env().data_dir, workspace)])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "search memory")
    live = runtime.thread(thread.id).model_copy(deep=True)
    await runtime.close()
    loaded = await JsonlThreadStore(RoderPaths.from_env().threads_dir).load(thread.id)
    assert [t.wire() for t in loaded.turns] == [t.wire() for t in live.turns]
    assert loaded.title == live.title == "search memory"
    assert loaded.usage == live.usage
    assert loaded.status == "idle"


async def test_a_corrupt_line_is_skipped_reported_once_and_nothing_after_it_is_lost(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one", "two"])
    await runtime.close()
    path = thread_file(thread.id)
    lines = path.read_bytes().split(b"\n")
    lines.insert(5, b'{"method": "item/completed", "threadId": broken')
    path.write_bytes(b"\n".join(lines))
    store = JsonlThreadStore(path.parent)
    with caplog.at_level(logging.WARNING):
        loaded = await store.load(thread.id)
        again = await store.load(thread.id)
    assert len(loaded.turns) == 2
    assert all(t.status == "completed" for t in loaded.turns)
    assert [i.text for t in loaded.turns for i in t.items if isinstance(i, UserMessageItem)] == ["one", "two"]
    assert again.turns[1].items[-1].wire() == loaded.turns[1].items[-1].wire()
    assert [p.line for p in store.problems[thread.id]] == [6]
    warnings = [r for r in caplog.records if "unreadable line" in r.getMessage()]
    assert len(warnings) == 1
    assert "line 6: not JSON: expected value at column 42" in warnings[0].getMessage()
    assert "tagged-union" not in warnings[0].getMessage()  # pydantic's heading listing every event class


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"threadId": "t", "ts": 1, "method": "no/such"}', "not an event: unknown method 'no/such'"),
        (b'{"threadId": "t", "ts": 1, "method": "turn/started"}', "not an event: turnId: Field required"),
        (b"[1, 2]", "not an event: Input should be an object"),
        (
            b'{"threadId": "t", "ts": 1, "method": "turn/started", "turnId": "x',
            "not JSON: EOF while parsing a string at column 65",
        ),
    ],
)
async def test_an_unreadable_line_says_what_is_wrong_with_it(line: bytes, reason: str, workspace: Path) -> None:
    """In the middle of the file (the last line, if torn, is moved aside instead: next test)."""
    runtime, thread = await _thread_with_turns(workspace, ["one"])
    await runtime.close()
    path = thread_file(thread.id)
    lines = path.read_bytes().split(b"\n")
    lines.insert(3, line)
    path.write_bytes(b"\n".join(lines))
    store = JsonlThreadStore(path.parent)
    loaded = await store.load(thread.id)
    assert len(loaded.turns) == 1
    assert [(p.line, p.reason) for p in store.problems[thread.id]] == [(4, reason)]


async def test_a_torn_last_line_is_moved_aside_and_the_thread_continues(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one"])
    await runtime.close()
    path = thread_file(thread.id)
    whole = path.read_bytes()
    torn = b'{"threadId":"%s","method":"item/started","turnId":"t' % thread.id.encode()
    path.write_bytes(whole + torn)
    runtime2, _ = make_runtime(workspace)
    resumed = await runtime2.resume_thread(thread.id)
    assert len(resumed.turns) == 1
    assert path.read_bytes() == whole, "the torn tail is cut off, the rest untouched"
    assert path.with_suffix(".torn").read_bytes() == torn + b"\n", "nothing is thrown away"
    turn = await runtime2.run_turn(thread.id, "two")
    await runtime2.close()
    assert turn.status == "completed"
    loaded = await JsonlThreadStore(path.parent).load(thread.id)
    assert [t.status for t in loaded.turns] == ["completed", "completed"]
    assert JsonlThreadStore(path.parent).problems == {}


async def test_a_complete_last_line_without_newline_is_kept(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one"])
    await runtime.close()
    path = thread_file(thread.id)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    store = JsonlThreadStore(path.parent)
    loaded = await store.load(thread.id)
    assert loaded.turns[0].status == "completed"
    assert store.problems[thread.id] == []
    await store.claim(thread.id)  # the writer completes the line before appending
    await store.close()
    assert path.read_bytes().endswith(b"}\n")


async def test_a_turn_cut_short_loads_as_interrupted_with_what_was_saved(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one", "two"])
    await runtime.close()
    path = thread_file(thread.id)
    lines = path.read_text().splitlines(keepends=True)
    # Drop everything after the second turn's agent message started: as if killed mid-stream.
    cut = max(i for i, line in enumerate(lines) if '"agentMessage"' in line and '"item/started"' in line)
    path.write_text("".join(lines[: cut + 1]))
    loaded = await JsonlThreadStore(path.parent).load(thread.id)
    assert [t.status for t in loaded.turns] == ["completed", "interrupted"]
    second = loaded.turns[1]
    assert second.stop_reason == "cancelled"
    assert second.completed_at is not None
    assert isinstance(second.items[0], UserMessageItem)
    assert second.items[0].text == "two"
    assert isinstance(second.items[-1], AgentMessageItem), "the started item is kept with what was saved"
    assert loaded.status == "idle"


async def test_unknown_thread_and_bad_ids_are_clear_errors(workspace: Path) -> None:
    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    with pytest.raises(ThreadNotFoundError, match="no stored thread"):
        await store.load("thr_missing")
    with pytest.raises(ThreadNotFoundError, match="not a thread id"):
        await store.load("../etc/passwd")


# --------------------------------------------------------------------------- index


async def test_listing_is_by_workspace_newest_first_and_the_index_rebuilds(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    runtime, first = await _thread_with_turns(workspace, ["first"])
    second = await runtime.start_thread()
    await runtime.run_turn(second.id, "second")
    elsewhere = await runtime.start_thread(other)
    await runtime.run_turn(elsewhere.id, "elsewhere")
    await runtime.close()
    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    rows = await store.list_threads(str(workspace.resolve()))
    assert [r.id for r in rows] == [second.id, first.id]
    assert rows[0].title == "second"
    assert rows[0].turn_count == 1
    assert rows[0].provider == "mock"
    assert [r.id for r in await store.list_threads(limit=1)] == [elsewhere.id]
    index = ThreadIndex(store.directory).path
    assert index.exists()
    index.unlink()
    assert len(await store.list_threads()) == 3, "a deleted index is rebuilt from the files"
    index.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    assert len(await store.list_threads()) == 3, "a corrupt index is rebuilt from the files"


async def test_the_index_follows_files_changed_or_removed_behind_its_back(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["first"])
    await runtime.close()
    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    assert (await store.list_threads())[0].turn_count == 1
    runtime2, _ = make_runtime(workspace)
    await runtime2.resume_thread(thread.id)
    await runtime2.run_turn(thread.id, "second")  # another process would not touch our index
    await runtime2.close()
    assert (await store.list_threads())[0].turn_count == 2
    thread_file(thread.id).unlink()
    assert await store.list_threads() == []


# --------------------------------------------------------------------------- fork


async def test_fork_copies_up_to_a_turn_and_never_touches_the_parent(workspace: Path) -> None:
    runtime, parent = await _thread_with_turns(workspace, ["one", "two", "three"])
    parent_path = thread_file(parent.id)
    before = _digest(parent_path)
    second = runtime.thread(parent.id).turns[1].id
    fork = await runtime.fork_thread(parent.id, second)
    assert _digest(parent_path) == before
    assert fork.parent is not None
    assert fork.parent.thread_id == parent.id
    assert fork.parent.turn_id == second
    assert [t.items[0].text for t in fork.turns] == ["one", "two"]
    lines = _lines(thread_file(fork.id))
    assert lines[0]["parent"] == {"threadId": parent.id, "turnId": second}
    assert all(line["threadId"] == fork.id for line in lines[1:])
    turn = await runtime.run_turn(fork.id, "branch")
    assert turn.status == "completed"
    assert _digest(parent_path) == before
    await runtime.close()
    tree = await make_runtime(workspace)[0].thread_tree(str(workspace.resolve()))
    assert [n.thread.id for n in tree] == [parent.id]
    assert [c.thread.id for c in tree[0].children] == [fork.id]
    reloaded = await JsonlThreadStore(parent_path.parent).load(fork.id)
    assert [t.items[0].text for t in reloaded.turns] == ["one", "two", "branch"]


async def test_fork_without_a_turn_takes_every_finished_turn_and_unknown_turns_fail(workspace: Path) -> None:
    runtime, parent = await _thread_with_turns(workspace, ["one", "two"])
    fork = await runtime.fork_thread(parent.id)
    assert len(fork.turns) == 2
    assert fork.parent.turn_id == runtime.thread(parent.id).turns[-1].id
    with pytest.raises(RoderError, match="no turn"):
        await runtime.fork_thread(parent.id, "turn_nope")
    await runtime.close()


@pytest.mark.parametrize("ephemeral", [False, True])
async def test_fork_before_a_user_message_to_edit_and_resend_it(workspace: Path, ephemeral: bool) -> None:
    runtime, _ = make_runtime(workspace, [{"text": "a1"}, {"text": "a2", "delay_ms": 50}, {"text": "a3"}])
    parent = await runtime.start_thread(ephemeral=ephemeral)
    await runtime.run_turn(parent.id, "one")
    await runtime.start_turn(parent.id, "two")
    steer = runtime.steer(parent.id, "and also this")
    await runtime.wait_turn(parent.id)
    turns = runtime.thread(parent.id).turns
    assert [i.text for i in turns[1].items if isinstance(i, UserMessageItem)] == ["two", "and also this"]
    before_first = await runtime.fork_thread(parent.id, before_item=turns[0].items[0].id)
    assert before_first.turns == []
    assert before_first.parent.turn_id is None
    before_second = await runtime.fork_thread(parent.id, before_item=turns[1].items[0].id)
    assert [t.items[0].text for t in before_second.turns] == ["one"]
    assert before_second.parent.turn_id == turns[0].id
    before_steer = await runtime.fork_thread(parent.id, before_item=steer.id)
    kept = before_steer.turns[1]
    assert kept.status == "interrupted"
    assert steer.id not in [i.id for i in kept.items]
    assert [i.text for i in kept.items if isinstance(i, UserMessageItem)] == ["two"]
    with pytest.raises(RoderError, match="not a user message"):
        await runtime.fork_thread(parent.id, before_item=turns[0].items[-1].id)
    turn = await runtime.run_turn(before_second.id, "two, edited")
    assert turn.status == "completed"
    assert [t.items[0].text for t in runtime.thread(before_second.id).turns] == ["one", "two, edited"]
    await runtime.close()
    if not ephemeral:
        loaded = await JsonlThreadStore(RoderPaths.from_env().threads_dir).load(before_second.id)
        assert [t.items[0].text for t in loaded.turns] == ["one", "two, edited"]


async def test_ephemeral_threads_fork_in_memory_and_never_reach_disk(workspace: Path) -> None:
    runtime, _ = make_runtime(workspace)
    thread = await runtime.start_thread(ephemeral=True)
    await runtime.run_turn(thread.id, "one")
    fork = await runtime.fork_thread(thread.id)
    await runtime.run_turn(fork.id, "two")
    await runtime.close()
    assert not thread_file(thread.id).exists()
    assert not thread_file(fork.id).exists()
    assert [t.items[0].text for t in fork.turns] == ["one", "two"]


# --------------------------------------------------------------------------- writer lock, delete


async def test_only_one_process_writes_a_thread(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one"])
    other = JsonlThreadStore(RoderPaths.from_env().threads_dir)  # its own open file, like another process
    with pytest.raises(ThreadInUseError, match="open in another Roder process"):
        await other.claim(thread.id)
    assert len((await other.load(thread.id)).turns) == 1, "reading is always allowed"
    with pytest.raises(ThreadInUseError):
        await other.delete(thread.id)
    await runtime.close_thread(thread.id)
    await other.claim(thread.id)
    runtime2, _ = make_runtime(workspace)
    with pytest.raises(ThreadInUseError):
        await runtime2.resume_thread(thread.id)
    assert runtime2.open_threads() == []
    await other.close()
    await runtime2.resume_thread(thread.id)
    assert (await runtime2.run_turn(thread.id, "two")).status == "completed"
    await runtime2.close()
    await runtime.close()


async def test_delete_removes_the_file_and_the_row(workspace: Path) -> None:
    runtime, thread = await _thread_with_turns(workspace, ["one"])
    await runtime.delete_thread(thread.id[:12])
    assert not thread_file(thread.id).exists()
    assert await runtime.list_threads() == []
    with pytest.raises(ThreadNotFoundError):
        await runtime.delete_thread(thread.id)
    await runtime.close()


async def test_resume_by_prefix_and_ambiguous_prefixes(workspace: Path) -> None:
    runtime, first = await _thread_with_turns(workspace, ["one"])
    second = await runtime.start_thread()
    await runtime.run_turn(second.id, "two")
    await runtime.close()
    runtime2, _ = make_runtime(workspace)
    assert (await runtime2.resume_thread(first.id[4:14])).id == first.id
    with pytest.raises(ThreadNotFoundError, match="matches 2 threads"):
        await runtime2.find_thread("thr_")
    await runtime2.close()


# --------------------------------------------------------------------------- extension state


async def test_custom_state_is_saved_versioned_forked_and_never_sent_to_the_model(workspace: Path) -> None:
    runtime, engine = make_runtime(workspace)
    thread = await runtime.start_thread()
    await runtime.save_custom(thread.id, "acme.todo", {"items": ["a"]}, version=1)
    await runtime.run_turn(thread.id, "one")
    assert "acme" not in engine.requests[-1].model_dump_json()
    with pytest.raises(RoderError, match="JSON"):
        await runtime.save_custom(thread.id, "acme.todo", {"bad": object()})
    await runtime.close()
    runtime2, _ = make_runtime(workspace)
    resumed = await runtime2.resume_thread(thread.id)
    assert resumed.custom["acme.todo"].data == {"items": ["a"]}

    def migrate(version: int, data: dict) -> dict:
        assert version == 1
        return {"tasks": data["items"]}

    assert runtime2.custom_state(thread.id, "acme.todo", version=2, migrate=migrate) == {"tasks": ["a"]}
    with pytest.raises(RoderError, match="needs a migration"):
        runtime2.custom_state(thread.id, "acme.todo", version=2)
    await runtime2.save_custom(thread.id, "acme.todo", {"tasks": ["a", "b"]}, version=3)
    with pytest.raises(RoderError, match="newer version"):
        runtime2.custom_state(thread.id, "acme.todo", version=2)
    assert runtime2.custom_state(thread.id, "missing") is None
    fork = await runtime2.fork_thread(thread.id)
    assert fork.custom["acme.todo"].data == {"tasks": ["a", "b"]}
    await runtime2.close()


async def test_tool_steps_survive_a_resume_in_order(workspace: Path) -> None:
    """Resume keeps tool calls and results (a peer's users lost them), and the next request is valid."""
    script = [
        {"text": "look", "tool_calls": [{"name": "memory_search", "arguments": {"query": "x"}}]},
        {"text": "done"},
        {"text": "again"},
    ]
    from roder_ext_memory import MemoryExtension

    ext = MemoryExtension(RoderPaths.from_env().data_dir, workspace)
    runtime, _ = make_runtime(workspace, script, extensions=[ext])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    await runtime.close()
    ext = MemoryExtension(RoderPaths.from_env().data_dir, workspace)
    runtime2, engine = make_runtime(workspace, script[2:], extensions=[ext])
    resumed = await runtime2.resume_thread(thread.id)
    kinds = [type(i) for i in resumed.turns[0].items]
    assert kinds[:4] == [UserMessageItem, AgentMessageItem, ToolCallItem, ToolResultItem]
    await runtime2.run_turn(thread.id, "more")
    roles = [m.role for m in engine.requests[-1].messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    await runtime2.close()


async def test_the_app_server_forks_before_a_message(workspace: Path) -> None:
    from roder_core.server.client import LocalAppClient

    runtime, _ = make_runtime(workspace)
    client = LocalAppClient.for_runtime(runtime)
    await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="test")))
    thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
    await runtime.run_turn(thread.id, "one")
    await runtime.run_turn(thread.id, "two")
    second = runtime.thread(thread.id).turns[1].items[0].id
    result = await client.request("thread/fork", {"threadId": thread.id, "beforeItemId": second})
    fork = runtime.thread(result.thread.id)
    assert [t.items[0].text for t in fork.turns] == ["one"]
    assert result.thread.parent.thread_id == thread.id
    await client.close()
