"""runners/* over ``roder app-server`` (real pipes and a real WebSocket), from a client written
from seed 004: the list with availability and reasons, selecting, describing, git snapshots
(restore puts tracked and untracked files back, outside the workspace's own git), listening
ports, deleting sessions, and every bad request answered with a clear error."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.support import PipePeer, RemoteServer, WsPeer, trusted_workspace

pytestmark = pytest.mark.e2e

TOKEN = "runner-test-token-0123456789"


def _tool_path(tmp_path: Path) -> str:
    """A PATH where Podman is installed but broken and Docker is missing, with the usual tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "bash", "env", "cat", "bwrap", "true"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    fake = bin_dir / "podman"
    fake.write_text("#!/bin/sh\necho 'Error: cannot connect to Podman: no such socket' >&2\nexit 125\n")
    fake.chmod(0o755)
    return str(bin_dir)


async def test_list_select_snapshot_ports_and_delete_over_stdio(tmp_path: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(
        '[runners.pod]\nkind = "container"\nimage = "localhost/roder-none:latest"\ndescription = "tests in a box"\n'
    )
    workspace, env = trusted_workspace(tmp_path)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tracked.txt").write_text("v1\n")
    subprocess.run(["git", "-C", str(workspace), "add", "tracked.txt"], check=True)
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "untracked.txt").write_text("u1\n")
    # The engine is looked up in the system's folders first (``host_programs.system_program``), so
    # where Podman is installed the fake on the PATH is not the one probed: that one is pointed at
    # a socket nobody serves, and fails as the fake does.
    env = {**env, "PATH": _tool_path(tmp_path), "CONTAINER_HOST": f"unix://{tmp_path}/no-podman.sock"}
    listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    peer = await PipePeer.start(workspace, env)
    try:
        info = await peer.call("initialize")
        groups = {g["name"]: g for g in info["methodGroups"]}
        assert groups["runners"]["available"] is True
        assert set(groups["runners"]["methods"]) == {
            "runners/list",
            "runners/select",
            "runners/session",
            "runners/snapshot",
            "runners/delete",
            "runners/ports",
        }
        assert groups["auth"]["available"] is True

        runners = {r["name"]: r for r in (await peer.call("runners/list"))["runners"]}
        assert runners["local"]["available"] is True and runners["local"]["kind"] == "local"
        pod = runners["pod"]
        assert pod["available"] is False and pod["description"] == "tests in a box"
        assert "neither Podman nor Docker works here" in pod["reason"]
        assert "connect to podman" in pod["reason"].lower() and "docker is not installed" in pod["reason"]
        refused = await peer.request("runners/select", {"threadId": "nope", "runner": "local"})
        assert refused["error"]["code"] == -32602

        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        unavailable = await peer.request("runners/select", {"threadId": thread["id"], "runner": "pod"})
        assert unavailable["error"]["code"] == -32000 and "unavailable" in unavailable["error"]["message"]
        unknown = await peer.request("runners/select", {"threadId": thread["id"], "runner": "mars"})
        assert unknown["error"]["code"] == -32000 and "unknown runner 'mars'" in unknown["error"]["message"]

        before = await peer.call("runners/session", {"threadId": thread["id"]})
        assert before["threadRunner"] == "local" and before["session"]["live"] is False
        selected = await peer.call("runners/select", {"threadId": thread["id"], "runner": "local"})
        assert selected["session"]["live"] and selected["session"]["runnerWorkspace"] == str(workspace)

        # snapshots: tracked and untracked files, ignored ones left alone, the repository untouched
        head_before = subprocess.run(["git", "-C", str(workspace), "status", "--porcelain"], capture_output=True, text=True)
        snap = (await peer.call("runners/snapshot", {"threadId": thread["id"], "itemId": "item_1", "label": "start"}))["snapshot"]
        # tracked.txt, untracked.txt, .gitignore and the test tools under .roder/
        assert snap["files"] == 4 and snap["itemId"] == "item_1"
        (workspace / "tracked.txt").write_text("v2\n")
        (workspace / "untracked.txt").unlink()
        (workspace / "later.txt").write_text("made later\n")
        (workspace / "build").mkdir()
        (workspace / "build" / "out.bin").write_text("ignored")
        listed = await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "list", "itemId": "item_1"})
        assert [s["id"] for s in listed["snapshots"]] == [snap["id"]]
        await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "restore", "snapshotId": snap["id"]})
        assert (workspace / "tracked.txt").read_text() == "v1\n"
        assert (workspace / "untracked.txt").read_text() == "u1\n"
        assert not (workspace / "later.txt").exists()
        assert (workspace / "build" / "out.bin").read_text() == "ignored"
        head_after = subprocess.run(["git", "-C", str(workspace), "status", "--porcelain"], capture_output=True, text=True)
        assert head_after.stdout == head_before.stdout
        assert subprocess.run(["git", "-C", str(workspace), "stash", "list"], capture_output=True, text=True).stdout == ""

        await peer.call("session/set_mode", {"mode": "plan"})
        planned = await peer.request(
            "runners/snapshot", {"threadId": thread["id"], "action": "restore", "snapshotId": snap["id"]}
        )
        assert planned["error"]["code"] == -32004 and "plan mode" in planned["error"]["message"]
        await peer.call("session/set_mode", {"mode": "ask"})
        missing = await peer.request("runners/snapshot", {"threadId": thread["id"], "action": "restore"})
        assert missing["error"]["code"] == -32602 and "snapshotId" in missing["error"]["message"]
        bogus = await peer.request("runners/snapshot", {"threadId": thread["id"], "action": "restore", "snapshotId": "../x"})
        assert bogus["error"]["code"] == -32000 and "not a snapshot id" in bogus["error"]["message"]
        deleted = await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "delete", "snapshotId": snap["id"]})
        assert deleted["snapshot"]["id"] == snap["id"]
        assert (await peer.call("runners/snapshot", {"threadId": thread["id"], "action": "list"}))["snapshots"] == []

        ports = await peer.call("runners/ports", {"threadId": thread["id"]})
        assert port in [p["port"] for p in ports["ports"]]
        forwarded = (await peer.call("runners/ports", {"threadId": thread["id"], "forward": port}))["forwarded"]
        assert forwarded["localPort"] == port and "already on this machine" in forwarded["how"]
        closed_port = _closed_port()
        nothing = await peer.request("runners/ports", {"threadId": thread["id"], "forward": closed_port})
        assert nothing["error"]["code"] == -32602 and f"nothing listens on port {closed_port}" in nothing["error"]["message"]

        no_target = await peer.request("runners/delete", {})
        assert no_target["error"]["code"] == -32602
        gone = await peer.call("runners/delete", {"threadId": thread["id"]})
        assert gone == {"runner": "local", "closed": 1}
        assert (await peer.call("runners/session", {"threadId": thread["id"]}))["session"]["live"] is False
    finally:
        code, stderr = await peer.close()
        listener.close()
    assert code == 0, stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_runners_over_a_websocket(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "a.txt").write_text("a\n")
    env = {**env, "RODER_TEST_TOKEN": TOKEN}
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
    try:
        peer = await WsPeer.connect(server.url, TOKEN)
        try:
            info = await peer.call("initialize")
            assert {g["name"]: g["available"] for g in info["methodGroups"]}["runners"] is True
            names = [r["name"] for r in (await peer.call("runners/list"))["runners"]]
            assert names[0] == "local"
            session = await peer.call("runners/session", {"workspace": str(workspace)})
            assert session["session"]["runner"] == "local" and session["session"]["live"] is False
            snap = (await peer.call("runners/snapshot", {"workspace": str(workspace), "label": "ws"}))["snapshot"]
            (workspace / "a.txt").write_text("changed\n")
            await peer.call("runners/snapshot", {"workspace": str(workspace), "action": "restore", "snapshotId": snap["id"]})
            assert (workspace / "a.txt").read_text() == "a\n"
            relative = await peer.request("runners/session", {"workspace": "rel/path"})
            assert relative["error"]["code"] == -32602
        finally:
            await peer.close()
    finally:
        assert await server.stop() in (0, -15)
    assert os.path.isdir(workspace)
