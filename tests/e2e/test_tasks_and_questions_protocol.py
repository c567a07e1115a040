"""Background tasks (``tasks/*``) and questions to the user (``userInput/requested``,
``session/resolve_user_input``) through `roder app-server` over real pipes and a real
WebSocket, with the JSON-RPC client of ``tests.server.support`` written from seed 004; and
``ask_user`` in headless ``roder -p``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.brokers.helpers import assert_gone, marker, running
from tests.server.support import PipePeer, RemoteServer, RpcPeer, WsPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "test-token-tasks-0123456789"

QUESTIONS = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [{"label": "SQLite", "description": "one file"}, {"label": "Postgres", "description": "a server"}],
    }
]
ASK_STEPS = [{"tool_calls": [call("ask_user", questions=QUESTIONS)]}, {"text": "noted"}]


def sleeper(mark: str, first: str = "warming up", second: str = "ready") -> str:
    return f'python3 -u -c \'import time; print("{first}"); print("{second}"); time.sleep(600)\' {mark}'


async def task_update(peer: RpcPeer, task_id: str, predicate: Any) -> dict[str, Any]:
    """The first tasks/updated of ``task_id`` whose task satisfies ``predicate``."""
    while True:
        task = (await peer.next_notification("tasks/updated"))["task"]
        if task["id"] == task_id and predicate(task):
            return task


async def exercise_shell_task(peer: RpcPeer, workspace: Path) -> None:
    info = await peer.call("initialize", {"clientInfo": {"name": "seed-004-client"}})
    groups = {g["name"]: g for g in info["methodGroups"]}
    assert groups["tasks"]["available"]
    assert {"tasks/submit", "tasks/list", "tasks/get", "tasks/cancel", "tasks/subscribe"} <= set(groups["tasks"]["methods"])
    assert groups["session"]["available"] and "session/resolve_user_input" in groups["session"]["methods"]

    thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
    assert (await peer.call("tasks/subscribe", {})) == {"ok": True}
    mark = marker()
    submitted = (
        await peer.call("tasks/submit", {"executorId": "shell", "threadId": thread["id"], "params": {"command": sleeper(mark)}})
    )["task"]
    assert submitted["status"] == "running" and submitted["threadId"] == thread["id"]
    assert submitted["title"].startswith("python3 -u -c")
    task = await task_update(peer, submitted["id"], lambda t: t["lastLine"] == "ready")
    assert task["status"] == "running" and task["outputBytes"] > 0 and task["outputPath"]

    output = await peer.call("tasks/output", {"taskId": task["id"]})
    assert output["text"] == "warming up\nready\n" and output["since"] == 0 and output["next"] == len(output["text"])
    again = await peer.call("tasks/output", {"taskId": task["id"], "since": output["next"]})
    assert again["text"] == "" and again["next"] == output["next"]
    listed = await peer.call("tasks/list", {"threadId": thread["id"]})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    assert {"shell", "agent"} <= set(listed["executors"])
    assert (await peer.call("tasks/get", {"taskId": task["id"]}))["task"]["status"] == "running"

    kept = (await peer.call("tasks/keep", {"taskId": task["id"], "keep": True}))["task"]
    assert kept["keep"] is True
    assert running(mark)
    cancelled = (await peer.call("tasks/cancel", {"taskId": task["id"]}))["task"]
    assert cancelled["status"] == "cancelled" and cancelled["finishedAt"] is not None
    await task_update(peer, task["id"], lambda t: t["status"] == "cancelled")
    assert_gone(mark)

    # bad requests get clear errors and change nothing
    unknown = await peer.request("tasks/submit", {"executorId": "nope", "params": {}})
    assert unknown["error"]["code"] == -32602 and "unknown task executor 'nope'" in unknown["error"]["message"]
    empty = await peer.request("tasks/submit", {"executorId": "shell", "params": {"command": ""}})
    assert empty["error"]["code"] == -32602 and "params.command" in empty["error"]["message"]
    missing = await peer.request("tasks/get", {"taskId": "task_missing"})
    assert missing["error"]["code"] == -32602
    negative = await peer.request("tasks/output", {"taskId": task["id"], "since": -1})
    assert negative["error"]["code"] == -32602
    # policy: in plan mode a shell task is a command like any other, and denied
    await peer.call("session/set_mode", {"mode": "plan"})
    denied = await peer.request("tasks/submit", {"executorId": "shell", "params": {"command": "touch x"}})
    assert denied["error"]["code"] == -32004
    assert not (workspace / "x").exists()
    assert len((await peer.call("tasks/list", {}))["tasks"]) == 1


async def exercise_question(peer: RpcPeer, workspace: Path) -> None:
    await peer.call("initialize", {"clientInfo": {"name": "seed-004-client"}})
    thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
    await peer.call("turn/start", {"threadId": thread["id"], "prompt": "set it up"})
    asked = await peer.next_notification("userInput/requested", threadId=thread["id"])
    question = asked["questions"][0]
    assert question == {
        "id": "q1",
        "header": "Database",
        "question": "Which database?",
        "options": [{"label": "SQLite", "description": "one file"}, {"label": "Postgres", "description": "a server"}],
        "multiSelect": False,
        "allowFreeText": True,
    }
    pending = (await peer.call("session/get"))["pendingUserInputs"]
    assert [p["requestId"] for p in pending] == [asked["requestId"]]
    wrong = await peer.request("session/resolve_user_input", {"requestId": "input_nope", "answers": {}})
    assert wrong["error"]["code"] == -32602
    resolved = await peer.call("session/resolve_user_input", {"requestId": asked["requestId"], "answers": {"q1": "Postgres"}})
    assert resolved == {"resolved": True}
    done = await peer.next_notification("turn/completed", threadId=thread["id"])
    assert done["turn"]["status"] == "completed"
    items = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]["turns"][0]["items"]
    result = next(i for i in items if i["type"] == "toolResult")
    assert '"Which database?" → Postgres' in result["text"] and not result["isError"]


async def test_shell_tasks_over_stdio(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [])
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await exercise_shell_task(peer, workspace)
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_a_question_over_stdio(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, ASK_STEPS)
    peer = await PipePeer.start(workspace, env)
    try:
        await exercise_question(peer, workspace)
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_tasks_and_a_question_over_websocket(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, ASK_STEPS)
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
    try:
        peer = await WsPeer.connect(server.url, TOKEN)
        await exercise_question(peer, workspace)
        await peer.call("session/set_mode", {"mode": "bypass"})
        await exercise_shell_task(peer, workspace)
        await peer.close()
    finally:
        await server.stop()


async def test_an_agent_task_runs_a_child_thread_in_the_background(tmp_path: Path) -> None:
    steps = [{"text": "I looked around: the repository has one file."}]
    workspace, env = trusted_workspace(tmp_path, steps)
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.call("tasks/subscribe", {})
        task = (
            await peer.call(
                "tasks/submit",
                {"executorId": "agent", "threadId": thread["id"], "params": {"prompt": "survey the repository"}},
            )
        )["task"]
        assert task["title"] == "survey the repository"
        done = await task_update(peer, task["id"], lambda t: t["status"] not in ("queued", "running"))
        assert done["status"] == "completed", done
        assert done["result"]["answer"] == "I looked around: the repository has one file."
        output = await peer.call("tasks/output", {"taskId": task["id"]})
        assert "the repository has one file" in output["text"]
        no_thread = (await peer.call("tasks/submit", {"executorId": "agent", "params": {"prompt": "x"}}))["task"]
        failed = await task_update(peer, no_thread["id"], lambda t: t["status"] == "failed")
        assert "needs a thread" in failed["error"]
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


def test_headless_ask_user_gets_a_no_user_result(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": ASK_STEPS}))
    proc = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", "set it up", "--provider", "mock", "--output-format", "stream-json"],
        cwd=workspace,
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "RODER_MOCK_SCRIPT": str(script)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    result = next(e["item"] for e in events if e["type"] == "item/completed" and e["item"]["type"] == "toolResult")
    assert result["text"].startswith("No user is available to answer questions")
    assert result["data"] == {"no_user": True}
    assert not any(e["type"] == "userInput/requested" for e in events)
