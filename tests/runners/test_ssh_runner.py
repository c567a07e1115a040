"""The ``ssh`` runner against a real OpenSSH server on loopback, driven through ``roder app-server``
over real pipes by a client written from seed 004: read, edit and bash act on the remote
workspace (not the local one), policy rules and approvals still decide, a rejected or denied
command never runs, the choice survives a restart (resume), snapshots and port forwarding work
over the connection."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.runners.sshd import Sshd
from tests.server.support import PipePeer, call, trusted_workspace

pytestmark = pytest.mark.e2e


def _remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote-ws"
    remote.mkdir()
    (remote / "hello.txt").write_text("hello from the remote side\n")
    return remote


async def _approve_next(peer: PipePeer, thread_id: str, tool: str, approved: bool) -> dict[str, Any]:
    request = (await peer.next_notification("approval/requested", threadId=thread_id))["request"]
    assert request["tool"] == tool, request
    await peer.call("session/resolve_approval", {"approvalId": request["approvalId"], "approved": approved})
    return request


async def test_tools_act_on_the_remote_workspace_under_the_same_policy(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = _remote(tmp_path)
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["bash(rm *)"]\n\n' + sshd.runner_table("box", remote))
    steps = [
        {"text": "Reading.", "tool_calls": [call("read", path="hello.txt")]},
        {"text": "Editing.", "tool_calls": [call("edit", path="hello.txt", old_string="remote side", new_string="edited side")]},
        {"text": "Running.", "tool_calls": [call("bash", command="pwd; echo ran > ran.txt; cat hello.txt")]},
        {"text": "Trying.", "tool_calls": [call("bash", command="touch rejected.txt")]},
        {"text": "Removing.", "tool_calls": [call("bash", command="rm -f hello.txt")]},
        {"text": "Done."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    workspace.mkdir(parents=True, exist_ok=True)
    peer = await PipePeer.start(workspace, env, "--mode", "ask")
    try:
        await peer.call("initialize", {"clientInfo": {"name": "runner-test"}})
        listed = {r["name"]: r for r in (await peer.call("runners/list"))["runners"]}
        assert listed["box"]["kind"] == "ssh" and listed["box"]["available"], listed
        assert listed["local"]["available"]
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        selected = await peer.call("runners/select", {"threadId": thread["id"], "runner": "box"})
        session = selected["session"]
        assert session["live"] and session["kind"] == "ssh"
        assert session["runnerWorkspace"] == str(remote.resolve())
        # bubblewrap is detected on the host and the session says which way it went
        assert session["details"]["sandbox"] in ("bubblewrap", "off")
        assert session["details"]["sandboxReason"]

        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "work on the remote files"})
        await _approve_next(peer, thread["id"], "edit", True)
        await _approve_next(peer, thread["id"], "bash", True)
        await _approve_next(peer, thread["id"], "bash", False)  # the user says no: it never runs
        done = await peer.next_notification("turn/completed", threadId=thread["id"])
        assert done["turn"]["status"] == "completed"

        read = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
        results = [i for i in read["turns"][0]["items"] if i["type"] == "toolResult"]
        assert "hello from the remote side" in results[0]["text"]
        assert results[1]["isError"] is False, results[1]
        bash_out = results[2]["text"]
        assert str(remote.resolve()) in bash_out and "edited side" in bash_out
        assert f"sandbox {'workspace-write' if session['details']['sandbox'] == 'bubblewrap' else 'off'}" in bash_out
        assert results[3]["isError"] and results[4]["isError"]
        assert "deny" in results[4]["text"].lower() or "denied" in results[4]["text"].lower()

        # the remote workspace changed; the local one did not
        assert (remote / "hello.txt").read_text() == "hello from the edited side\n"
        assert (remote / "ran.txt").read_text() == "ran\n"
        assert not (remote / "rejected.txt").exists()
        assert not (workspace / "hello.txt").exists() and not (workspace / "ran.txt").exists()
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr

    # a new server process: the resumed thread still runs its tools on the ssh host
    peer = await PipePeer.start(workspace, env, "--mode", "ask")
    try:
        await peer.call("initialize")
        await peer.call("thread/resume", {"threadId": thread["id"]})
        described = await peer.call("runners/session", {"threadId": thread["id"]})
        assert described["threadRunner"] == "box"
        ran = await peer.call("tools/call", {"threadId": thread["id"], "toolName": "bash", "arguments": {"command": "pwd"}})
        assert str(remote.resolve()) in ran["text"], ran
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_protected_paths_and_escapes_are_refused_on_the_host(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = _remote(tmp_path)
    (remote / ".git").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (remote / "link").symlink_to(outside)
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote))
    workspace, env = trusted_workspace(tmp_path)
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.call("runners/select", {"threadId": thread["id"], "runner": "box"})

        async def tool(name: str, **arguments: Any) -> dict[str, Any]:
            """The tool's result, or the policy's refusal (before any broker is reached)."""
            response = await peer.request("tools/call", {"threadId": thread["id"], "toolName": name, "arguments": arguments})
            if "error" in response:
                return {"isError": True, "text": response["error"]["message"], "policy": True}
            result: dict[str, Any] = response["result"]
            return result

        git = await tool("write", path=".git/config", content="[core]\n")
        assert git["isError"] and "protected" in git["text"]
        escape = await tool("write", path="../escape.txt", content="x")
        assert escape["isError"] and "outside" in escape["text"]
        # what only the broker on the host can see: a symlink out, a folder turning into a git dir
        through_link = await tool("write", path="link", content="x")
        assert through_link["isError"] and "policy" not in through_link and "outside" in through_link["text"]
        (remote / "fake" / "objects").mkdir(parents=True)
        (remote / "fake" / "refs").mkdir()
        planted = await tool("write", path="fake/HEAD", content="ref: refs/heads/main\n")
        assert planted["isError"] and "policy" not in planted and "git directory" in planted["text"]
        assert outside.read_text() == "keep" and not (tmp_path / "escape.txt").exists()
        assert not (remote / "fake" / "HEAD").exists()
        # an absolute path of the local workspace lands in the remote one
        mapped = await tool("write", path=str(workspace / "made.txt"), content="mapped\n")
        assert not mapped["isError"], mapped
        assert (remote / "made.txt").read_text() == "mapped\n" and not (workspace / "made.txt").exists()
        listed = await tool("ls", path=".")
        assert "made.txt" in listed["text"] and "hello.txt" in listed["text"]
        found = await tool("grep", pattern="remote side")
        assert "hello.txt" in found["text"]
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_snapshots_ports_and_delete_over_ssh(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = _remote(tmp_path)
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote))
    workspace, env = trusted_workspace(tmp_path)
    # a service listening on the ssh host (loopback only): the forward must reach it
    service = await asyncio.start_server(_answer, "127.0.0.1", 0)
    service_port = service.sockets[0].getsockname()[1]
    peer = await PipePeer.start(workspace, env)
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.call("runners/select", {"threadId": thread["id"], "runner": "box"})

        taken = (await peer.call("runners/snapshot", {"threadId": thread["id"], "label": "before"}))["snapshot"]
        assert taken["files"] == 1 and taken["label"] == "before"
        (remote / "hello.txt").write_text("changed\n")
        (remote / "new.txt").write_text("new\n")
        listed = (await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "list"}))["snapshots"]
        assert [s["id"] for s in listed] == [taken["id"]]
        await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "restore", "snapshotId": taken["id"]})
        assert (remote / "hello.txt").read_text() == "hello from the remote side\n"
        assert not (remote / "new.txt").exists()
        # the snapshot store lives on the host, outside the workspace
        assert not any(p.name.endswith(".git") for p in remote.iterdir())

        ports = await peer.call("runners/ports", {"threadId": thread["id"]})
        assert service_port in [p["port"] for p in ports["ports"]] and sshd.port in [p["port"] for p in ports["ports"]]
        forwarded = (await peer.call("runners/ports", {"threadId": thread["id"], "forward": service_port}))["forwarded"]
        assert forwarded["port"] == service_port and forwarded["localPort"] != service_port
        reader, writer = await asyncio.open_connection(forwarded["localHost"], forwarded["localPort"])
        writer.write(b"ping\n")
        await writer.drain()
        async with asyncio.timeout(30):
            assert await reader.readline() == b"pong ping\n"
        writer.close()
        session = (await peer.call("runners/session", {"threadId": thread["id"]}))["session"]
        assert [p["port"] for p in session["forwardedPorts"]] == [service_port]

        deleted = await peer.call("runners/delete", {"runner": "box"})
        assert deleted == {"runner": "box", "closed": 1}
        after = (await peer.call("runners/session", {"threadId": thread["id"]}))["session"]
        assert after["live"] is False
        # the next use opens it again
        ran = await peer.call("tools/call", {"threadId": thread["id"], "toolName": "bash", "arguments": {"command": "pwd"}})
        assert str(remote.resolve()) in ran["text"]
    finally:
        code, stderr = await peer.close()
        service.close()
    assert code == 0, stderr


async def test_a_host_with_an_unknown_key_is_refused(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = _remote(tmp_path)
    stranger = tmp_path / "known_hosts_without_it"
    stranger.write_text("")
    table = sshd.runner_table("box", remote).replace(str(sshd.known_hosts), str(stranger))
    (roder_home / "config.toml").write_text(table)
    workspace, env = trusted_workspace(tmp_path)
    peer = await PipePeer.start(workspace, env)
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        refused = await peer.request("runners/select", {"threadId": thread["id"], "runner": "box"})
        assert refused["error"]["code"] == -32000
        assert "could not connect" in refused["error"]["message"]
        described = await peer.call("runners/session", {"threadId": thread["id"]})
        assert described["threadRunner"] == "local"
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    line = await reader.readline()
    writer.write(b"pong " + line)
    await writer.drain()
    writer.close()


async def test_a_read_rule_added_while_running_reaches_an_open_runner_session(
    tmp_path: Path, workspace: Path, sshd: Sshd, roder_home: Path
) -> None:
    """A deny rule an answer adds while the session runs (``reject always``) withholds the file
    on the ssh host at once, as it does on this machine: the runner's content gate asks the
    runtime's live rules, not a copy made when the session opened."""
    from roder_core.brokers import BrokerDenied
    from roder_core.policy.rules import PolicyVerdict
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    remote = _remote(tmp_path)
    (remote / "token.txt").write_text("remote-token-mark\n")
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote))
    runtime = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="bypass", trust=False, interactive=False)).runtime
    try:
        thread = await runtime.start_thread()
        await runtime.set_thread_runner(thread.id, "box")
        fs = runtime.brokers_for(workspace, "rule-test", frozenset({"fs.read.workspace"}), thread_id=thread.id).fs
        assert fs.read_bytes("token.txt") == b"remote-token-mark\n"  # the host's file, readable
        assert fs.withheld("token.txt") is None
        runtime.persist_rule("read(token.txt)", PolicyVerdict.DENY)
        with pytest.raises(BrokerDenied, match=r"withheld by the rule deny read\(token\.txt\)"):
            fs.read_bytes("token.txt")
        assert fs.withheld("token.txt") is not None
        assert [i.display for i in fs.list_dir(".")] == ["hello.txt"]  # a listing leaves it out too
    finally:
        await runtime.close()
