"""Feature methods through the in-process client on a real distribution (built-in extensions plus
the trusted test extension): memory, tasks, user input, plan review, commands, agents, direct
tool calls, hunks and git changes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, POLICY_DENIED, RpcError
from roder_core.server.protocol import (
    SESSION_GET,
    SESSION_SET_MODE,
    THREAD_READ,
    THREAD_START,
    TURN_START,
    SessionGetParams,
    SessionSetModeParams,
    ThreadReadParams,
    ThreadStartParams,
    TurnStartParams,
)
from tests.server.support import call, trusted_workspace


def start(tmp_path: Path, steps: list[dict[str, Any]] | None = None, mode: str = "ask") -> tuple[LocalAppClient, Path]:
    workspace, env = trusted_workspace(tmp_path, steps)
    env["RODER_HOME"] = os.environ["RODER_HOME"]
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", trust=True, env=env, mode=mode))
    return client, workspace


async def wait_for(events: Any, method: str, **match: Any) -> Any:
    async def find() -> Any:
        async for event in events:
            if event.method == method and all(getattr(event, k) == v for k, v in match.items()):
                return event
        raise AssertionError("stream ended")

    return await asyncio.wait_for(find(), 20)


async def run_turn(client: LocalAppClient, prompt: str) -> tuple[str, Any]:
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt=prompt))).turn
    done = await wait_for(events, "turn/completed", thread_id=thread.id)
    events.close()
    assert done.turn.id == turn.id
    return thread.id, done.turn


async def expect_error(code: int, coro: Any) -> RpcError:
    with pytest.raises(RpcError) as raised:
        await coro
    assert raised.value.code == code, raised.value.message
    return raised.value


async def test_memory_methods(tmp_path: Path) -> None:
    client, _workspace = start(tmp_path)
    async with client:
        events = client.subscribe()
        providers = (await client.request("memory/provider/list")).providers
        assert [p.active for p in providers] == [True]
        saved = (await client.request("memory/save", {"text": "release with make publish", "tags": ["ops"]})).memory
        assert saved.scope == "project" and saved.tags == ["ops"]
        note = await wait_for(events, "memory/updated")
        assert note.action == "saved" and note.id == saved.id
        await client.request("memory/save", {"text": "prefer tabs globally", "scope": "global"})
        listed = (await client.request("memory/list", {})).memories
        assert {m.text for m in listed} == {"release with make publish", "prefer tabs globally"}
        found = (await client.request("memory/query", {"text": "release"})).memories
        assert [m.id for m in found] == [saved.id]
        updated = (await client.request("memory/update", {"id": saved.id, "text": "release with make ship"})).memory
        assert (await client.request("memory/read", {"id": saved.id})).memory.text == updated.text
        preview = await client.request("memory/recall/preview", {"text": "how do we release?"})
        assert "release with make ship" in preview.context and preview.memories
        await client.request("memory/delete", {"id": saved.id})
        await expect_error(INVALID_PARAMS, client.request("memory/read", {"id": saved.id}))
        await expect_error(INVALID_PARAMS, client.request("memory/provider/set", {"provider": "nope"}))
        await expect_error(INVALID_PARAMS, client.request("memory/save", {"text": ""}))


async def test_tasks(tmp_path: Path) -> None:
    client, _ = start(tmp_path)
    async with client:
        events = client.subscribe()
        await client.request("tasks/subscribe", {})
        task = (await client.request("tasks/submit", {"executorId": "echo", "params": {"x": 1}})).task
        update = await wait_for(events, "tasks/updated")
        while update.task.status != "completed":
            update = await wait_for(events, "tasks/updated")
        assert update.task.result == {"echo": {"x": 1}} and update.task.id == task.id
        slow = (await client.request("tasks/submit", {"executorId": "echo", "params": {"sleep": 30}})).task
        assert (await client.request("tasks/cancel", {"taskId": slow.id})).task.status == "cancelled"
        failing = (await client.request("tasks/submit", {"executorId": "echo", "params": {"fail": True}})).task
        await asyncio.sleep(0.1)
        assert (await client.request("tasks/get", {"taskId": failing.id})).task.error == "ValueError: asked to fail"
        listing = await client.request("tasks/list", {})
        assert listing.executors == ["echo"] and len(listing.tasks) == 3
        await expect_error(INVALID_PARAMS, client.request("tasks/submit", {"executorId": "missing"}))


async def test_user_input_round_trip(tmp_path: Path) -> None:
    client, _ = start(tmp_path, [{"tool_calls": [call("ask", question="which color?")]}, {"text": "thanks"}])
    async with client:
        events = client.subscribe()
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="ask me"))
        asked = await wait_for(events, "userInput/requested")
        assert asked.questions[0]["question"] == "which color?"
        pending = (await client.call(SESSION_GET, SessionGetParams())).pending_user_inputs
        assert [p.request_id for p in pending] == [asked.request_id]
        await expect_error(INVALID_PARAMS, client.request("session/resolve_user_input", {"requestId": "nope"}))
        resolved = await client.request(
            "session/resolve_user_input", {"requestId": asked.request_id, "answers": {"choice": "blue"}}
        )
        assert resolved.resolved
        await wait_for(events, "turn/completed", thread_id=thread.id)
        items = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread.turns[0].items
        assert any(i.type == "toolResult" and "blue" in i.text for i in items)


async def test_exit_plan_switches_mode(tmp_path: Path) -> None:
    steps = [{"tool_calls": [call("exit_plan", plan="1. do it")]}, {"text": "starting"}]
    client, _ = start(tmp_path, steps, mode="plan")
    async with client:
        events = client.subscribe()
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="plan it"))
        review = await wait_for(events, "approval/requested")
        assert review.request.tool == "exit_plan"
        await expect_error(INVALID_PARAMS, client.request("session/exit_plan", {"requestId": "x", "approved": True}))
        await client.request(
            "session/exit_plan", {"requestId": review.request.approval_id, "approved": True, "mode": "auto-edit"}
        )
        await wait_for(events, "turn/completed", thread_id=thread.id)
        assert (await client.call(SESSION_GET, SessionGetParams())).mode == "auto-edit"


async def test_commands_and_agents(tmp_path: Path) -> None:
    client, workspace = start(tmp_path, [{"text": "reviewed"}])
    (workspace / ".roder" / "commands").mkdir(parents=True)
    (workspace / ".roder" / "commands" / "review.md").write_text("---\ndescription: review a file\n---\nReview $1 now")
    async with client:
        names = {c.name: c.kind for c in (await client.request("commands/list", {})).commands}
        assert names["help"] == "builtin" and names["review"] == "custom"
        expanded = await client.request("commands/expand", {"name": "review", "arguments": "app.py"})
        assert expanded.text.strip() == "Review app.py now"
        assert (await client.request("commands/expand", {"name": "new"})).action == "new"
        await expect_error(INVALID_PARAMS, client.request("commands/expand", {"name": "nope"}))
        assert (await client.request("commands/run", {"name": "mode", "arguments": "plan"})).data == {"mode": "plan"}
        events = client.subscribe()
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        ran = await client.request("commands/run", {"threadId": thread.id, "name": "review", "arguments": "a.py"})
        assert ran.kind == "turn"
        await wait_for(events, "turn/completed", thread_id=thread.id)
        agents = {a.name for a in (await client.request("agents/list", {})).agents}
        assert {"explore", "general"} <= agents
        assert (await client.request("turn/subagentTraces/list", {"threadId": thread.id})).traces == []


async def test_direct_tool_calls_follow_policy(tmp_path: Path) -> None:
    client, workspace = start(tmp_path)
    async with client:
        peeked = await client.request("tools/call", {"toolName": "peek", "arguments": {"x": "y"}})
        assert peeked.text == "peeked y" and not peeked.is_error
        written = await client.request("tools/call", {"toolName": "write_note", "arguments": {"path": "n.txt", "text": "t"}})
        assert not written.is_error and (workspace / "n.txt").read_text() == "t"
        await client.call(SESSION_SET_MODE, SessionSetModeParams(mode="plan"))
        err = await expect_error(
            POLICY_DENIED, client.request("tools/call", {"toolName": "write_note", "arguments": {"path": "m.txt", "text": "t"}})
        )
        assert "plan" in err.message and not (workspace / "m.txt").exists()
        await expect_error(INVALID_PARAMS, client.request("tools/call", {"toolName": "nope"}))


async def test_hunks_and_workspace_changes(tmp_path: Path) -> None:
    client, workspace = start(
        tmp_path,
        [
            {"tool_calls": [call("edit", path="code.py", old_string="b = 2", new_string="b = 20")]},
            {"text": "edited"},
        ],
        mode="bypass",
    )
    (workspace / "code.py").write_text("a = 1\nb = 2\nc = 3\n")
    async with client:
        thread_id, turn = await run_turn(client, "change b")
        assert (workspace / "code.py").read_text() == "a = 1\nb = 20\nc = 3\n"
        changes = (await client.request("workspace/changes/list", {"threadId": thread_id})).files
        assert [(c.path.endswith("code.py"), c.kind, c.additions, c.deletions) for c in changes] == [(True, "update", 1, 1)]
        hunks = (await client.request("hunk/list", {"threadId": thread_id, "turnId": turn.id})).hunks
        assert len(hunks) == 1
        read = await client.request("hunk/read", {"threadId": thread_id, "hunkId": hunks[0].hunk_id})
        assert "b = 2" in read.old_lines and "b = 20" in read.new_lines
        await client.request("hunk/rollback", {"threadId": thread_id, "hunkId": hunks[0].hunk_id})
        assert (workspace / "code.py").read_text() == "a = 1\nb = 2\nc = 3\n"
        with pytest.raises(RpcError) as again:
            await client.request("hunk/rollback", {"threadId": thread_id, "hunkId": hunks[0].hunk_id})
        assert "changed since" in again.value.message
        await expect_error(INVALID_PARAMS, client.request("hunk/read", {"threadId": thread_id, "hunkId": "x"}))


async def test_git_changes_mark_binary_files(tmp_path: Path) -> None:
    client, workspace = start(tmp_path)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "tracked.txt").write_text("one\ntwo\n")
    subprocess.run([*git, "add", "tracked.txt"], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=workspace, check=True)
    (workspace / "tracked.txt").write_text("one\nTWO\nthree\n")
    (workspace / "new.txt").write_text("a\nb\n")
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    async with client:
        files = {f.path: f for f in (await client.request("git/changes/list", {"workspace": str(workspace)})).files}
        assert (files["tracked.txt"].status, files["tracked.txt"].additions, files["tracked.txt"].deletions) == ("M", 2, 1)
        assert (files["new.txt"].status, files["new.txt"].additions, files["new.txt"].binary) == ("??", 2, False)
        assert (files["blob.bin"].binary, files["blob.bin"].additions) == (True, 0)
        blob = await client.request("git/changes/read", {"workspace": str(workspace), "path": "blob.bin"})
        assert blob.binary and "Binary file blob.bin" in blob.patch
        tracked = await client.request("git/changes/read", {"workspace": str(workspace), "path": "tracked.txt"})
        assert "+TWO" in tracked.patch and not tracked.binary
        await expect_error(POLICY_DENIED, client.request("git/changes/list", {"workspace": "/"}))
    assert json.dumps(blob.wire())


async def test_provider_and_settings_changes_persist_with_comments(tmp_path: Path) -> None:
    config_file = Path(os.environ["RODER_HOME"]) / "config.toml"
    config_file.write_text('# my settings\nmode = "ask"\n')
    client, _ = start(tmp_path)
    async with client:
        selected = await client.request("providers/select", {"provider": "mock", "model": "mock-large", "reasoning": "high"})
        assert (selected.model, selected.reasoning, selected.persisted) == ("mock-large", "high", True)
        assert (await client.call(THREAD_START, ThreadStartParams())).thread.model == "mock-large"
        settings = await client.request("settings/set_web_search", {"mode": "auto"})
        assert settings.web_search == "auto"
        settings = await client.request("settings/set_default_mode", {"mode": "auto-edit"})
        assert settings.default_mode == "auto-edit" and settings.mode == "ask"
        await client.request(
            "providers/configure",
            {"provider": "openrouter", "apiKeyEnv": "OPENROUTER_API_KEY", "baseUrl": "https://openrouter.ai/api/v1"},
        )
        stored = await client.request("providers/configure", {"provider": "openrouter", "api_key": "sk-test"})
        assert stored.key_stored and stored.auth_source == "stored" and not stored.restart_required
        refused = await expect_error(
            INVALID_PARAMS, client.request("providers/configure", {"provider": "openrouter", "apiKey": "two words"})
        )
        assert "two words" not in refused.message
        await expect_error(INVALID_PARAMS, client.request("providers/configure", {"provider": "x"}))
        await expect_error(INVALID_PARAMS, client.request("settings/set_web_search", {"mode": "sometimes"}))
    text = config_file.read_text()
    assert text.startswith("# my settings")
    for line in (
        'provider = "mock"',
        'model = "mock-large"',
        'reasoning_effort = "high"',
        'web_search = "auto"',
        'mode = "auto-edit"',
        'api_key_env = "OPENROUTER_API_KEY"',
        "[providers.openrouter]",
    ):
        assert line in text, line
    assert "sk-test" not in text
