"""``fs/readFile``, ``fs/readDirectory`` and ``command/exec`` act where a thread's tools act: with
``threadId`` on that thread's ssh runner (or with an explicit ``runner``), against a real
OpenSSH server on loopback, through ``roder app-server`` over real pipes. Policy decides the same
way as on this machine: deny rules and the outside-the-workspace check refuse before anything
reaches the host."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.runners.sshd import Sshd
from tests.server.support import PipePeer, trusted_workspace

pytestmark = pytest.mark.e2e

POLICY_DENIED = -32004


async def test_fs_and_command_exec_act_on_the_threads_ssh_runner(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    remote = tmp_path / "remote-ws"
    (remote / "sub").mkdir(parents=True)
    (remote / "hello.txt").write_text("hello from the remote side\n")
    (remote / "sub" / "deep.txt").write_text("deep\n")
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["bash(rm *)"]\n\n' + sshd.runner_table("box", remote))
    workspace, env = trusted_workspace(tmp_path)
    workspace.mkdir(parents=True, exist_ok=True)
    remote_root = str(remote.resolve())
    peer = await PipePeer.start(workspace, env, "--mode", "ask")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
        await peer.call("runners/select", {"threadId": thread, "runner": "box"})

        # a path of the runner's workspace, and the same file named by its local-workspace path
        for path in (f"{remote_root}/hello.txt", str(workspace / "hello.txt")):
            read = await peer.call("fs/readFile", {"threadId": thread, "path": path})
            assert base64.b64decode(read["dataBase64"]) == b"hello from the remote side\n", path
        listed = await peer.call("fs/readDirectory", {"threadId": thread, "path": remote_root})
        assert [(e["name"], e["kind"]) for e in listed["entries"]] == [("sub", "dir"), ("hello.txt", "file")]
        assert listed["entries"][1]["path"] == f"{remote_root}/hello.txt"
        # without threadId the same path is this machine's, where it does not exist in any workspace
        local = await peer.request("fs/readFile", {"path": f"{remote_root}/hello.txt"})
        assert local["error"]["code"] == POLICY_DENIED
        outside = await peer.request("fs/readFile", {"threadId": thread, "path": "/etc/hostname"})
        assert (
            outside["error"]["code"] == POLICY_DENIED and "outside the workspace of runner 'box'" in outside["error"]["message"]
        )

        ran = await peer.call("command/exec", {"threadId": thread, "command": ["sh", "-c", "pwd; echo made > made.txt"]})
        assert ran["exitCode"] == 0 and ran["stdout"].strip() == remote_root, ran
        assert ran["sandbox"] in ("workspace-write", "off")
        assert (remote / "made.txt").read_text() == "made\n" and not (workspace / "made.txt").exists()
        deeper = await peer.call(
            "command/exec", {"threadId": thread, "command": ["cat", "deep.txt"], "cwd": f"{remote_root}/sub"}
        )
        assert deeper["stdout"] == "deep\n"
        mapped = await peer.call("command/exec", {"threadId": thread, "command": ["pwd"], "cwd": str(workspace / "sub")})
        assert mapped["stdout"].strip() == f"{remote_root}/sub"

        # streamed: the output arrives as command/exec/output_delta notifications
        streamed = await peer.call(
            "command/exec",
            {
                "threadId": thread,
                "command": ["sh", "-c", "echo out; echo err >&2"],
                "streamStdoutStderr": True,
                "processId": "p1",
            },
        )
        assert streamed["stdout"] == "" and streamed["exitCode"] == 0
        chunks: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        while b"out" not in chunks["stdout"] or b"err" not in chunks["stderr"]:
            delta = await peer.next_notification("command/exec/output_delta", processId="p1")
            chunks[delta["stream"]] += base64.b64decode(delta["deltaBase64"])

        # the same policy: the deny rule refuses before the host is reached; escapes are refused
        denied = await peer.request("command/exec", {"threadId": thread, "command": ["rm", "-f", "hello.txt"]})
        assert denied["error"]["code"] == POLICY_DENIED and (remote / "hello.txt").exists()
        escape = await peer.request("command/exec", {"threadId": thread, "command": ["pwd"], "cwd": "/tmp"})
        assert escape["error"]["code"] == POLICY_DENIED

        # an explicit runner without a thread: that runner's session for the server's folder
        named = await peer.call("command/exec", {"runner": "box", "command": ["pwd"]})
        assert named["stdout"].strip() == remote_root
        unknown = await peer.request("command/exec", {"runner": "nowhere", "command": ["pwd"]})
        assert "unknown runner 'nowhere'" in unknown["error"]["message"]

        # plan mode is read-only for commands on the runner too
        await peer.call("session/set_mode", {"threadId": thread, "mode": "plan"})
        planned = await peer.request("command/exec", {"threadId": thread, "command": ["touch", "planned.txt"]})
        assert planned["error"]["code"] == POLICY_DENIED and not (remote / "planned.txt").exists()
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
