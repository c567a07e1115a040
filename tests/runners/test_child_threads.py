"""Child threads (subagents of the ``task`` tool, agent background tasks) work where their
parent works: they inherit its runner unless they were given one of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ParentRef
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from tests.runners.sshd import Sshd
from tests.server.support import PipePeer, call, trusted_workspace


async def test_a_child_thread_inherits_its_parents_runner_unless_given_its_own(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text('[runners.here]\nkind = "local"\n\n[runners.there]\nkind = "local"\n')
    runtime = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="bypass", trust=False, interactive=False)).runtime
    try:
        parent = await runtime.start_thread(workspace)
        await runtime.set_thread_runner(parent.id, "here")
        child = await runtime.start_thread(workspace, parent=ParentRef(thread_id=parent.id, turn_id="turn_1"))
        grandchild = await runtime.start_thread(workspace, parent=ParentRef(thread_id=child.id, turn_id="turn_2"))
        assert runtime.thread_runner(child.id) == "here" and runtime.thread_runner(grandchild.id) == "here"
        # the very same broker set as the parent's: the child acts on the parent's runner session
        assert runtime.brokers_for(workspace, "x", thread_id=child.id) is runtime.brokers_for(workspace, "x", thread_id=parent.id)

        await runtime.set_thread_runner(child.id, "there")  # given one explicitly: it wins
        assert runtime.thread_runner(child.id) == "there"
        assert runtime.thread_runner(grandchild.id) == "there"  # the nearest choice up the chain
        assert runtime.thread_runner(parent.id) == "here"
        unrelated = await runtime.start_thread(workspace)
        assert runtime.thread_runner(unrelated.id) is None
    finally:
        await runtime.close()


@pytest.mark.e2e
async def test_a_subagents_tools_act_on_the_parents_ssh_workspace(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = tmp_path / "remote-ws"
    remote.mkdir()
    (remote / "hello.txt").write_text("hello from the remote side\n")
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote))
    # The mock engine keeps a position per thread: the parent and its subagent both play these
    # steps (in the child, ``task`` is not a tool and answers an error).
    steps = [
        {
            "text": "Delegating.",
            "tool_calls": [
                call("task", description="look at the remote files", prompt="read and run"),
                call("read", path="hello.txt"),
                call("bash", command="pwd; echo one-more >> ran.txt"),
            ],
        },
        {"text": "Done."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    workspace.mkdir(parents=True, exist_ok=True)
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.call("runners/select", {"threadId": thread["id"], "runner": "box"})
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "delegate"})
        done = await peer.next_notification("turn/completed", threadId=thread["id"], timeout=120)
        assert done["turn"]["status"] == "completed"
        read = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
        results = {i["name"]: i for i in read["turns"][0]["items"] if i["type"] == "toolResult"}
        task = results["task"]
        assert not task["isError"], task
        child: dict[str, Any] = {
            i["name"]: i for i in task["data"]["subagent"]["items"] if i["type"] == "toolResult" and i["name"] != "task"
        }
        assert "hello from the remote side" in child["read"]["text"]
        assert str(remote.resolve()) in child["bash"]["text"] and not child["bash"]["isError"]
        assert str(workspace) not in child["bash"]["text"]

        # an agent background task's child thread works there too
        await peer.call("tasks/subscribe", {})
        agent = await peer.call("tasks/submit", {"executorId": "agent", "threadId": thread["id"], "params": {"prompt": "go"}})
        while True:
            update = (await peer.next_notification("tasks/updated", timeout=120))["task"]
            if update["id"] == agent["task"]["id"] and update["status"] not in ("queued", "running"):
                break
        assert update["status"] == "completed", update
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
    # the parent's, the subagent's and the agent task's commands all ran on the ssh host, none here
    assert (remote / "ran.txt").read_text() == "one-more\n" * 3
    assert not (workspace / "ran.txt").exists()
