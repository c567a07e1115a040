"""Each `roder` subcommand is control-plane calls: what a command prints is what its method answers.

The commands run in process through ``roder_tui.cli.main`` (each starts its own in-process
client); the methods are called through a second ``LocalAppClient`` over the same RODER_HOME and
folder, as any other client would call them.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RpcError
from roder_core.server.protocol import (
    EXTENSIONS_LIST,
    MODEL_LIST,
    PROVIDERS_LIST,
    THREAD_LIST,
    THREAD_READ,
    TOOLS_LIST,
    TRUST_GET,
    ModelListParams,
    NoParams,
    ThreadListParams,
    ThreadReadParams,
    ToolsListParams,
    TrustGetParams,
)
from roder_core.server.protocol_audit import AUDIT_TAIL, AUDIT_VERIFY, AuditTailParams
from roder_core.server.protocol_sessions import (
    THREAD_CUSTOM_SET,
    THREAD_EXPORT,
    THREAD_FIND,
    ThreadCustomSetParams,
    ThreadExportParams,
    ThreadFindParams,
)
from roder_core.server.protocol_trust import TRUST_LIST
from roder_core.settings.paths import RoderPaths
from roder_tui.cli import main

T = TypeVar("T")


@pytest.fixture
def here(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workspace)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return workspace


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _with_client(workspace: Path, use: Callable[[LocalAppClient], Awaitable[T]], **settings: Any) -> T:
    """``use(client)`` on a client started like the commands start theirs (headless, no config writes)."""

    async def run() -> T:
        client = LocalAppClient.start(StartSettings(cwd=workspace, interactive=False, **settings), persist_config=False)
        async with client:
            return await use(client)

    return asyncio.run(run())


def _ask(capsys: pytest.CaptureFixture[str], prompt: str) -> str:
    out = _out(capsys, "-p", prompt, "--provider", "mock", "--output-format", "json")
    return str(json.loads(out)["thread_id"])


def test_sessions_commands_print_the_thread_methods_answers(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _ask(capsys, "first question")
    fork_id = _out(capsys, "sessions", "fork", thread_id).strip()

    async def answers(client: LocalAppClient) -> dict[str, Any]:
        found = await client.call(THREAD_FIND, ThreadFindParams(query=thread_id[4:14]))
        exports = {
            form: (await client.call(THREAD_EXPORT, ThreadExportParams(thread_id=thread_id, format=form))).text
            for form in ("markdown", "json", "atif")
        }
        read = await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))
        listed = await client.call(THREAD_LIST, ThreadListParams())
        return {"found": found.thread_id, "exports": exports, "read": read.thread.wire(), "rows": listed.threads}

    got = _with_client(here, answers)
    assert got["found"] == thread_id
    assert _out(capsys, "sessions", "show", thread_id[:12]) == got["exports"]["markdown"] + "\n"
    shown = json.loads(_out(capsys, "sessions", "show", thread_id, "--json"))
    read = json.loads(json.dumps(got["read"]))
    # a stored thread's updatedAt is when it was loaded (Thread.updated_at defaults to now), not stored
    assert {**shown, "updatedAt": None} == {**read, "updatedAt": None}
    for form in ("markdown", "json", "atif"):
        assert _out(capsys, "sessions", "export", thread_id, "--format", form) == got["exports"][form]
    listed = json.loads(_out(capsys, "sessions", "list", "--all", "--json"))
    assert [row["id"] for row in listed] == [row.id for row in got["rows"]] == [fork_id, thread_id]

    assert _out(capsys, "sessions", "rm", fork_id) == f"deleted {fork_id}\n"

    async def find_deleted(client: LocalAppClient) -> RpcError:
        with pytest.raises(RpcError) as refused:
            await client.call(THREAD_FIND, ThreadFindParams(query=fork_id))
        return refused.value

    refused = _with_client(here, find_deleted)
    assert refused.code == INVALID_PARAMS
    assert f"no thread {fork_id!r}" in refused.message
    assert not (RoderPaths.from_env().threads_dir / f"{fork_id}.jsonl").exists()


def test_thread_find_says_when_a_prefix_is_ambiguous_and_the_cli_says_the_same(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _ask(capsys, "one"), _ask(capsys, "two")

    async def ambiguous(client: LocalAppClient) -> RpcError:
        with pytest.raises(RpcError) as refused:
            await client.call(THREAD_FIND, ThreadFindParams(query="thr_"))
        return refused.value

    refused = _with_client(here, ambiguous)
    assert refused.code == INVALID_PARAMS
    assert "'thr_' matches 2 threads" in refused.message
    assert first in refused.message
    assert second in refused.message
    assert main(["sessions", "show", "thr_"]) == 1
    assert capsys.readouterr().err == f"roder: {refused.message}\n"


def test_custom_state_set_by_a_client_is_in_the_stored_thread(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _ask(capsys, "hello")

    async def save(client: LocalAppClient) -> None:
        params = ThreadCustomSetParams(thread_id=thread_id, namespace="my.client", data={"pinned": True}, version=2)
        await client.call(THREAD_CUSTOM_SET, params)

    _with_client(here, save)
    shown = json.loads(_out(capsys, "sessions", "show", thread_id, "--json"))
    assert shown["custom"]["my.client"]["data"] == {"pinned": True}
    assert shown["custom"]["my.client"]["version"] == 2


def test_trust_and_audit_commands_do_the_methods_work(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _out(capsys, "trust", str(here)) == f"trusted: {here.resolve()}\n"

    async def state(client: LocalAppClient) -> dict[str, Any]:
        return {
            "list": await client.call(TRUST_LIST),
            "get": await client.call(TRUST_GET, TrustGetParams(cwd=str(here))),
            "tail": await client.call(AUDIT_TAIL, AuditTailParams(limit=50)),
            "verify": await client.call(AUDIT_VERIFY, NoParams()),
        }

    got = _with_client(here, state, trust=False)
    assert json.loads(_out(capsys, "trust", "--list", "--json")) == {d.path: d.trusted for d in got["list"].decisions}
    assert got["get"].trusted
    trust_records = [line.record for line in got["tail"].lines if line.record and line.record["kind"] == "trust.set"]
    assert trust_records == [{**trust_records[0], "folder": str(here.resolve()), "trusted": True, "client": "roder trust"}]
    assert _out(capsys, "audit", "tail", "-n", "50", "--json").splitlines() == [line.raw for line in got["tail"].lines]
    assert got["verify"].ok
    assert f"ok: {got['verify'].records} records" in _out(capsys, "audit", "verify")

    log = RoderPaths.from_env().audit_file
    lines = log.read_text().splitlines()
    lines[0] = lines[0].replace('"trusted": true', '"trusted": false')  # someone rewrites history
    log.write_text("\n".join(lines) + "\n")
    broken = _with_client(here, lambda client: client.call(AUDIT_VERIFY, NoParams()), trust=False)
    assert not broken.ok
    assert main(["audit", "verify"]) == 1
    printed = capsys.readouterr().out
    assert all(problem in printed for problem in broken.problems)
    assert "line 1: content does not match its hash (modified)" in broken.problems


def test_listing_commands_print_the_discovery_methods_answers(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def listings(client: LocalAppClient) -> dict[str, Any]:
        return {
            "extensions": await client.call(EXTENSIONS_LIST),
            "tools": await client.call(TOOLS_LIST, ToolsListParams(wait=5)),
            "providers": await client.call(PROVIDERS_LIST),
            "models": await client.call(MODEL_LIST, ModelListParams(provider="mock")),
        }

    got = _with_client(here, listings, profile="offline")
    extensions = json.loads(_out(capsys, "extensions", "list", "--json", "--profile", "offline"))
    assert extensions["extensions"] == got["extensions"].extensions
    assert extensions["capability_statuses"] == got["extensions"].capability_statuses
    dropped = [{"source": s.source, "reason": s.reason} for s in got["extensions"].skipped]
    assert dropped, "the offline profile leaves the network providers out"
    assert all(s.expected for s in got["extensions"].skipped)
    assert extensions["skipped"] == dropped

    tools = json.loads(_out(capsys, "tools", "list", "--json", "--profile", "offline", "--wait", "5"))
    assert tools["tools"] == [json.loads(json.dumps(t.wire())) for t in got["tools"].tools]
    assert {t["name"]: t["extension"] for t in tools["tools"]}["read"] == "roder-ext-builtin-coding-tools"

    providers = json.loads(_out(capsys, "providers", "list", "--json", "--profile", "offline"))
    assert [row["id"] for row in providers["providers"]] == [p.id for p in got["providers"].providers]
    assert providers["default"] == {"id": got["providers"].provider, "reason": got["providers"].default_reason}
    assert got["providers"].default_reason == "no key is set and no local model server answers"

    models = json.loads(_out(capsys, "models", "--provider", "mock", "--json", "--profile", "offline"))
    assert [m["id"] for m in models[0]["models"]] == [m.id for m in got["models"].models]
    assert [(m["known"], m["sentOutputLimit"]) for m in models[0]["models"]] == [
        (n.known, n.sent_output_limit) for n in got["models"].notes
    ]
