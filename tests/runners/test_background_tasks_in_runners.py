"""Background tasks in an ssh runner: bash's ``run_in_background`` and ``tasks/submit shell``
run their command on the host (in its sandbox when bubblewrap works there), stream its output into
the task's log, and ``task_kill`` / ``tasks/cancel`` kill its whole process group there before
they answer. Against a real OpenSSH server on loopback (this machine, so the test can look for
the command's processes in /proc)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.brokers.helpers import assert_gone, marker, running
from tests.runners.sshd import Sshd
from tests.server.support import PipePeer, RpcPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e


def sleeper(mark: str) -> str:
    """Prints where it runs, then a line, then sleeps with a child of its own (both marked)."""
    return (
        "python3 -u -c 'import os, subprocess, sys, time; print(os.getcwd()); "
        'child = subprocess.Popen(["sh", "-c", "sleep 600", sys.argv[1]]); print("ready"); time.sleep(600)\' ' + mark
    )


async def until_task(peer: RpcPeer, task_id: str, predicate: Any) -> dict[str, Any]:
    while True:
        task = (await peer.next_notification("tasks/updated", timeout=60))["task"]
        if task["id"] == task_id and predicate(task):
            return task


async def test_background_tasks_run_and_die_on_the_ssh_host(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = tmp_path / "remote-ws"
    remote.mkdir()
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote))
    first, second = marker(), marker()
    steps = [
        {"text": "Starting.", "tool_calls": [call("bash", command=sleeper(first), run_in_background=True)]},
        {"text": "Started."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    workspace.mkdir(parents=True, exist_ok=True)
    remote_root = str(remote.resolve())
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
        sandbox = (await peer.call("runners/select", {"threadId": thread, "runner": "box"}))["session"]["details"]["sandbox"]
        await peer.call("tasks/subscribe", {})

        # the model's bash run_in_background: a task of the thread, running on the host
        await peer.call("turn/start", {"threadId": thread, "prompt": "start it"})
        done = await peer.next_notification("turn/completed", threadId=thread, timeout=120)
        assert done["turn"]["status"] == "completed"
        [task] = (await peer.call("tasks/list", {"threadId": thread}))["tasks"]
        task = await until_task(peer, task["id"], lambda t: t["lastLine"] == "ready")
        output = await peer.call("tasks/output", {"taskId": task["id"]})
        assert output["text"] == f"{remote_root}\nready\n"
        assert len(running(first)) >= 2  # the command and its child
        assert not (workspace / "nothing-here").exists()
        kill = {"threadId": thread, "toolName": "task_kill", "arguments": {"task_id": task["id"]}}
        killed = await peer.call("tools/call", kill)
        assert not killed["isError"] and killed["data"]["status"] == "cancelled", killed
        assert_gone(first, within=30)  # the whole group on the host, the child included

        # a client's shell task: same path, stopped by tasks/cancel
        submitted = (
            await peer.call("tasks/submit", {"executorId": "shell", "threadId": thread, "params": {"command": sleeper(second)}})
        )["task"]
        await until_task(peer, submitted["id"], lambda t: t["lastLine"] == "ready")
        assert running(second)
        cancelled = (await peer.call("tasks/cancel", {"taskId": submitted["id"]}))["task"]
        assert cancelled["status"] == "cancelled"
        assert_gone(second, within=30)

        # a task that ends by itself: all its output arrives, its exit is the task's result
        many = (
            await peer.call(
                "tasks/submit", {"executorId": "shell", "threadId": thread, "params": {"command": "seq 1 50000; echo done"}}
            )
        )["task"]
        finished = await until_task(peer, many["id"], lambda t: t["status"] in ("completed", "failed"))
        expected = sum(len(f"{n}\n") for n in range(1, 50001)) + len("done\n")
        assert finished["status"] == "completed" and finished["outputBytes"] == expected, finished
        assert finished["result"]["exit_code"] == 0 and finished["result"]["sandbox"] == (
            "workspace-write" if sandbox == "bubblewrap" else "off"
        )
        failing = (await peer.call("tasks/submit", {"executorId": "shell", "threadId": thread, "params": {"command": "exit 3"}}))[
            "task"
        ]
        failed = await until_task(peer, failing["id"], lambda t: t["status"] in ("completed", "failed"))
        assert failed["status"] == "failed" and "code 3" in failed["error"]

        # closing the runner's session stops what still runs there, and says why
        third = marker()
        orphan = (
            await peer.call("tasks/submit", {"executorId": "shell", "threadId": thread, "params": {"command": sleeper(third)}})
        )["task"]
        await until_task(peer, orphan["id"], lambda t: t["lastLine"] == "ready")
        assert (await peer.call("runners/delete", {"runner": "box"}))["closed"] == 1
        ended = await until_task(peer, orphan["id"], lambda t: t["status"] not in ("queued", "running"))
        assert ended["status"] == "failed" and "ssh session was closed" in ended["error"], ended
        assert_gone(third, within=30)
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
