"""The memory extension: the SQLite FTS5 store, its tools in a real turn, recall in the prompt,
and the seed 003 contract (manifest == installed services)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from roder_ext_memory import MemoryExtension, SqliteMemoryStore, SqliteMemoryStoreFactory, project_key

from roder_core import ExtensionRegistryBuilder, ProvidedService
from roder_core.errors import RoderError
from roder_core.ir import ToolResultItem
from roder_core.kernel.services import resolve_memory_store
from roder_core.settings.paths import RoderPaths

from .harness import make_runtime


@pytest.fixture
def store(tmp_path: Path, workspace: Path) -> SqliteMemoryStore:
    return SqliteMemoryStore(tmp_path / "memory" / "memory.sqlite", workspace)


async def test_save_and_search_rank_the_best_match_first(store: SqliteMemoryStore) -> None:
    await store.save("The release process: bump the version, tag it, then run make publish", tags=["release"])
    await store.save("Tests run with pytest -q from the repository root", tags=["testing"])
    await store.save("Prefer small commits with clear messages")
    found = await store.search("how do we publish a release?")
    assert found[0].text.startswith("The release process")
    assert found[0].scope == "project"
    assert found[0].tags == ["release"]
    assert found[0].score is not None
    assert (await store.search("running the tests"))[0].text.startswith("Tests run"), "stemming: running ~ run"
    assert await store.search("kubernetes") == []
    assert await store.search("") == []
    assert await store.search("the of and") == []


async def test_queries_with_fts_syntax_are_plain_words(store: SqliteMemoryStore) -> None:
    await store.save('Use "double quotes" in config and NEAR(x) is fine')
    for query in ['"double', "NEAR(x", "config*", "a OR", "-quotes", "col:umn", "'; DROP TABLE memories; --"]:
        await store.search(query)
    assert (await store.search('"double quotes"'))[0].text.startswith("Use")


async def test_project_notes_stay_in_their_project_and_global_ones_go_everywhere(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    other = tmp_path / "other-project"
    other.mkdir()
    await store.save("deploy with the blue pipeline")
    await store.save("deploy notes for the other project", project=str(other))
    await store.save("always deploy on weekdays", scope="global")
    here = {m.text for m in await store.search("deploy")}
    assert here == {"deploy with the blue pipeline", "always deploy on weekdays"}
    there = {m.text for m in await store.search("deploy", project=str(other))}
    assert there == {"deploy notes for the other project", "always deploy on weekdays"}
    only = await store.search("deploy", include_global=False)
    assert [m.text for m in only] == ["deploy with the blue pipeline"]
    assert len(await store.list()) == 2
    assert len(await store.list(scope="global")) == 1


async def test_a_subfolder_of_a_repository_is_the_same_project(store: SqliteMemoryStore, workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    sub = workspace / "pkg" / "mod"
    sub.mkdir(parents=True)
    assert project_key(sub) == str(workspace.resolve())
    await store.save("the parser lives in pkg/mod", project=str(sub))
    assert (await store.search("parser", project=str(workspace)))[0].project == str(workspace.resolve())


async def test_update_delete_and_bad_input(store: SqliteMemoryStore) -> None:
    memory_id = await store.save("old text", tags=["a"])
    updated = await store.update(memory_id, text="new text about widgets", tags=["b c"])
    assert updated.text == "new text about widgets"
    assert updated.tags == ["b-c"]
    assert (await store.search("widgets"))[0].id == memory_id
    assert await store.search("old") == []
    assert await store.delete(memory_id)
    assert not await store.delete(memory_id)
    assert await store.get(memory_id) is None
    with pytest.raises(RoderError, match="needs some text"):
        await store.save("   ")
    with pytest.raises(RoderError, match="scope"):
        await store.save("x", scope="team")  # type: ignore[arg-type]
    with pytest.raises(RoderError, match="at most"):
        await store.save("y" * 10_000)


async def test_the_like_fallback_gives_the_same_answers(store: SqliteMemoryStore) -> None:
    store._fts = False  # as on a SQLite built without FTS5
    await store.save("cache invalidation is hard")
    await store.save("naming things is hard too")
    found = await store.search("cache hard")
    assert found[0].text == "cache invalidation is hard"
    assert len(found) == 2


def test_manifest_matches_what_is_installed(workspace: Path, tmp_path: Path) -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(MemoryExtension(tmp_path / "memory", workspace))
    registry = builder.build()
    assert {
        ProvidedService.MemoryStore("sqlite-memory"),
        ProvidedService.ContextProvider("memory-context"),
        ProvidedService.ToolProvider("memory-tools"),
    } <= registry.provided_services()
    assert {"memory_save", "memory_search"} <= set(registry.tool_registry().names())
    factory = registry.memory_stores[0]
    assert isinstance(factory, SqliteMemoryStoreFactory)
    assert resolve_memory_store(factory) is factory.create()
    assert [c.id for c in registry.manifest("roder-ext-memory").required_capabilities] == ["fs.readwrite.roder-home"]


async def test_the_agent_saves_then_recalls_a_memory_in_later_turns(workspace: Path) -> None:
    data_dir = RoderPaths.from_env().data_dir
    script = [
        {
            "tool_calls": [
                {"name": "memory_save", "arguments": {"text": "The staging database is called wombat-db", "tags": ["db"]}}
            ]
        },
        {"text": "Saved."},
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "staging database"}}]},
        {"text": "It is wombat-db."},
    ]
    runtime, engine = make_runtime(workspace, script, extensions=[MemoryExtension(data_dir / "memory", workspace)])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "remember the staging db name")
    await runtime.run_turn(thread.id, "which staging database do we use?")
    results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    assert results[0].text.startswith("saved memory mem_")
    assert results[0].data["scope"] == "project"
    assert "wombat-db" in results[1].text
    assert results[1].data["memories"][0]["tags"] == ["db"]
    second_turn = engine.requests[2].messages[-1].text()  # recall rides with the turn's own message
    assert "# Memories" in second_turn and "wombat-db" in second_turn, "recall put the note in the prompt"
    assert "# Memories" not in engine.requests[0].messages[0].text()
    assert engine.requests[2].system == engine.requests[0].system  # the system prompt never changed
    assert (data_dir / "memory" / "memory.sqlite").stat().st_mode & 0o777 == 0o600
    await runtime.close()


async def test_memory_save_keeps_secrets_out(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = RoderPaths.from_env().data_dir
    script = [{"tool_calls": [{"name": "memory_save", "arguments": {"text": "the key is sk-live-123456789"}}]}, {"text": "ok"}]
    runtime, _ = make_runtime(workspace, script, extensions=[MemoryExtension(data_dir / "memory", workspace)])
    runtime.redact = lambda text: text.replace("sk-live-123456789", "[redacted]")
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "remember the key")
    await runtime.close()
    saved = await SqliteMemoryStore(data_dir / "memory" / "memory.sqlite", workspace).list()
    assert saved[0].text == "the key is [redacted]"
    assert "sk-live" not in json.dumps([m.to_json() for m in saved])
