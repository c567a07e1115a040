"""thread/close, trust/get, trust/set and the sandbox in session/get, on a real runtime and store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RpcError
from roder_core.server.protocol import (
    SESSION_GET,
    THREAD_CLOSE,
    THREAD_RESUME,
    THREAD_START,
    TRUST_GET,
    TRUST_SET,
    TURN_START,
    SessionGetParams,
    ThreadCloseParams,
    ThreadResumeParams,
    ThreadStartParams,
    TrustGetParams,
    TrustSetParams,
    TurnStartParams,
)


def start(workspace: Path, **settings: object) -> LocalAppClient:
    return LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", **settings))  # type: ignore[arg-type]


async def test_thread_close_frees_the_thread_for_another_process(workspace: Path) -> None:
    first = start(workspace)
    thread = (await first.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
    events = first.subscribe()
    turn = (await first.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hello"))).turn
    async for event in events:
        if event.method == "turn/completed" and event.turn.id == turn.id:
            break
    second = start(workspace)
    try:
        with pytest.raises(RpcError, match="another Roder process"):
            await second.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread.id))
        assert (await first.call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread.id))).closed
        assert thread.id not in (await first.call(SESSION_GET, SessionGetParams())).open_threads
        assert not (await first.call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread.id))).closed  # idempotent
        resumed = (await second.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread.id))).thread
        assert [t.id for t in resumed.turns] == [turn.id]  # closing kept the stored thread
    finally:
        await second.close()
        await first.close()


async def test_thread_resume_can_leave_the_turns_out_of_its_reply(workspace: Path) -> None:
    """``includeTurns: false`` answers with the thread's header only; the runtime still holds
    (and continues) the whole history."""
    first = start(workspace)
    thread = (await first.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
    events = first.subscribe()
    turn = (await first.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hello"))).turn
    async for event in events:
        if event.method == "turn/completed" and event.turn.id == turn.id:
            break
    await first.close()
    async with start(workspace) as second:
        light = await second.request("thread/resume", {"threadId": thread.id, "includeTurns": False})
        assert light.wire()["thread"]["id"] == thread.id
        assert light.wire()["thread"]["turns"] == []
        assert [t.id for t in second.runtime.thread(thread.id).turns] == [turn.id]
        full = (await second.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread.id))).thread
        assert [t.id for t in full.turns] == [turn.id]  # the default reply is unchanged


async def test_session_get_reports_the_sandbox(workspace: Path) -> None:
    async with start(workspace, sandbox="off") as client:
        sandbox = (await client.call(SESSION_GET, SessionGetParams())).sandbox
        assert (sandbox.requested, sandbox.effective, sandbox.blocked) == ("off", "off", False)
        wire = (await client.request("session/get", {})).wire()
        assert wire["sandbox"]["effective"] == "off"


async def test_trust_get_and_set(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text("")
    async with start(workspace, trust=False) as client:
        before = await client.call(TRUST_GET, TrustGetParams())
        assert (before.trusted, before.decided_at, before.loaded) == (False, None, False)
        assert before.items == [".roder/config.toml"] and before.cwd == str(workspace.resolve())
        after = await client.call(TRUST_SET, TrustSetParams(trusted=True))
        assert after.trusted and after.decided_at == str(workspace.resolve()) and not after.loaded
        stored = json.loads((roder_home / "data" / "trusted-folders.json").read_text())
        assert stored == {str(workspace.resolve()): True}
        sub = workspace / "sub"
        sub.mkdir()
        inherited = await client.call(TRUST_GET, TrustGetParams(cwd=str(sub)))
        assert inherited.trusted and inherited.decided_at == str(workspace.resolve())
        assert not (
            await client.call(TRUST_SET, TrustSetParams(trusted=False, cwd=str(sub)))
        ).trusted  # the nearest decision wins
        assert "trust.set" in (roder_home / "data" / "audit.jsonl").read_text()
        for bad in ({"cwd": "relative/path"}, {"cwd": str(tmp_path / "missing")}):
            with pytest.raises(RpcError) as raised:
                await client.request("trust/get", bad)
            assert raised.value.code == INVALID_PARAMS
    async with start(workspace) as trusted_now:  # interactive start: the stored decision applies
        assert (await trusted_now.call(TRUST_GET, TrustGetParams())).loaded
