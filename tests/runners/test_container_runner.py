"""The ``container`` runner with a real Podman, when Podman can run containers on this machine.

No image is pulled from anywhere: the test builds one from a local root filesystem (this
machine's own bash, coreutils and their libraries, ``podman import``ed under a tag of its own,
removed afterwards). The container is started with the runner's own ``--ulimit`` options; where
crun cannot run (cgroups in hybrid mode) and runc is installed, the runner's ``oci_runtime = "runc"``
setting is used, as a user would. When Podman is missing or cannot start a container here, the
test says why it skips, in Podman's own words.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from roder_ext_runners.container import container_ulimits

from tests.brokers.helpers import assert_gone, marker, running
from tests.server.support import PipePeer, RpcPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e
PROGRAMS = ("bash", "sh", "env", "cat", "ls", "pwd", "touch", "kill", "setsid", "sleep", "id", "printf", "busybox")


def _rootfs_tarball(folder: Path) -> Path:
    """A tarball of a minimal root: the host's binaries above and the libraries they load."""
    root = folder / "rootfs"
    (root / "usr" / "bin").mkdir(parents=True)
    for name in ("proc", "dev", "sys", "tmp", "workspace", "root", "etc"):
        (root / name).mkdir()
    (root / "bin").symlink_to("usr/bin")
    for program in PROGRAMS:
        found = shutil.which(program)
        if found is None:
            continue
        real = Path(found).resolve()
        shutil.copy2(real, root / "usr" / "bin" / program)
        linked = subprocess.run(["ldd", str(real)], capture_output=True, text=True).stdout
        for word in linked.split():
            if word.startswith("/") and Path(word).exists():
                target = root / word.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    shutil.copy2(Path(word).resolve(), target)
    tarball = folder / "rootfs.tar"
    with tarfile.open(tarball, "w") as archive:
        archive.add(root, arcname=".")
    return tarball


@dataclass(frozen=True)
class Podman:
    image: str
    #: The ``oci_runtime`` setting the runner needs here (None: Podman's default works).
    runtime: str | None

    def runner_table(self, name: str) -> str:
        runtime = f'oci_runtime = "{self.runtime}"\n' if self.runtime else ""
        return f'[runners.{name}]\nkind = "container"\nengine = "podman"\nimage = "{self.image}"\n{runtime}'


def _try_run(podman: str, image: str, runtime: str | None) -> subprocess.CompletedProcess[str]:
    engine = [podman, "--runtime", runtime] if runtime else [podman]
    argv = [*engine, "run", "--rm", "--pull=never", "--network", "none", *container_ulimits()]
    argv += [image, "/usr/bin/sh", "-c", "echo ok"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    binary = shutil.which("podman")
    if binary is None:
        pytest.skip("podman is not installed (.ci/run installs it where apt-get works)")
    folder = tmp_path_factory.mktemp("podman")
    image = f"localhost/roder-runner-test-{secrets.token_hex(4)}:latest"
    imported = subprocess.run([binary, "import", str(_rootfs_tarball(folder)), image], capture_output=True, text=True)
    if imported.returncode != 0:
        pytest.skip(f"podman cannot import a local image here: {imported.stderr.strip()[-300:]}")
    try:
        runtime = None
        tried = _try_run(binary, image, runtime)
        if "cgroups in hybrid mode" in tried.stderr and shutil.which("runc"):
            runtime = "runc"
            tried = _try_run(binary, image, runtime)
        if tried.returncode != 0 or tried.stdout.strip() != "ok":
            pytest.skip(f"podman cannot run containers on this machine: {(tried.stderr or tried.stdout).strip()[-300:]}")
        yield Podman(image, runtime)
    finally:
        subprocess.run([binary, "rmi", "-f", image], capture_output=True, check=False)


def sleeper(mark: str) -> str:
    """Prints where it runs, then a line, then waits on a child of its own (both marked)."""
    return f'sh -c \'pwd; sh -c "sleep 600" "$0" & echo ready; wait\' {mark}'


async def until_task(peer: RpcPeer, task_id: str, predicate: Any) -> dict[str, Any]:
    while True:
        task = (await peer.next_notification("tasks/updated", timeout=120))["task"]
        if task["id"] == task_id and predicate(task):
            return task


async def test_commands_run_in_the_container_with_the_workspace_mounted(tmp_path: Path, podman: Podman, roder_home: Path) -> None:
    config = '[policy]\ndeny = ["bash(rm *)", "read(secret.env)"]\n\n'
    (roder_home / "config.toml").write_text(config + podman.runner_table("box"))
    steps = [
        {"text": "Where?", "tool_calls": [call("bash", command="pwd; echo made-inside > inside.txt; cat /proc/net/dev")]},
        {"text": "Remove.", "tool_calls": [call("bash", command="rm -f keep.txt")]},
        {"text": "Search.", "tool_calls": [call("grep", pattern="TOKEN_VALUE", path=".")]},
        {"text": "Done."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    (workspace / "keep.txt").write_text("keep\n")
    (workspace / "secret.env").write_text("TOKEN_VALUE=hidden\n")
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        box = next(r for r in (await peer.call("runners/list"))["runners"] if r["name"] == "box")
        assert box["available"], box
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        session = (await peer.call("runners/select", {"threadId": thread["id"], "runner": "box"}))["session"]
        assert session["runnerWorkspace"] == "/workspace" and session["details"]["network"] is False
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "go"})
        done = await peer.next_notification("turn/completed", threadId=thread["id"], timeout=120)
        assert done["turn"]["status"] == "completed"
        read = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
        results = [i for i in read["turns"][0]["items"] if i["type"] == "toolResult"]
        out = results[0]["text"]
        assert "/workspace" in out and "container (no network)" in out
        interfaces = [line.split(":")[0].strip() for line in out.splitlines() if ":" in line and "|" not in line]
        assert interfaces == ["lo"]  # --network none: loopback only
        assert (workspace / "inside.txt").read_text() == "made-inside\n"
        assert results[1]["isError"] and (workspace / "keep.txt").exists()  # policy still decides
        # the local file rules hold for the mounted folder: a denied file's content stays out
        assert "hidden" not in results[2]["text"] and "withheld from the model" in results[2]["text"], results[2]

        # command/exec for the thread runs in the container too (a container path or a local one)
        ran = await peer.call("command/exec", {"threadId": thread["id"], "command": ["cat", "/workspace/inside.txt"]})
        assert ran["stdout"] == "made-inside\n" and ran["sandbox"] == "container (no network)", ran
        listed = await peer.call("command/exec", {"threadId": thread["id"], "command": ["ls", "/"], "cwd": str(workspace)})
        assert "workspace" in listed["stdout"].split()

        # a background task runs in the container and tasks/cancel kills its whole group there
        await peer.call("tasks/subscribe", {})
        mark = marker()
        shell = {"executorId": "shell", "threadId": thread["id"], "params": {"command": sleeper(mark)}}
        submitted = (await peer.call("tasks/submit", shell))["task"]
        ready = await until_task(peer, submitted["id"], lambda t: t["lastLine"] == "ready")
        assert (await peer.call("tasks/output", {"taskId": ready["id"]}))["text"] == "/workspace\nready\n"
        assert len(running(mark)) >= 2  # rootful Podman: the container's processes are visible here
        cancelled = (await peer.call("tasks/cancel", {"taskId": submitted["id"]}))["task"]
        assert cancelled["status"] == "cancelled"
        assert_gone(mark, within=30)

        session = (await peer.call("runners/session", {"threadId": thread["id"]}))["session"]
        assert session["details"]["ociRuntime"] == (podman.runtime or "the engine's default")
        await peer.call("runners/delete", {"runner": "box"})
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_a_container_port_is_forwarded_while_its_network_stays_off(
    tmp_path: Path, podman: Podman, roder_home: Path
) -> None:
    if shutil.which("busybox") is None:
        pytest.skip("busybox is missing here, so the test image has no server (apt-get install busybox-static)")
    (roder_home / "config.toml").write_text(podman.runner_table("box"))
    workspace, env = trusted_workspace(tmp_path)
    (workspace / "www").mkdir(parents=True)
    (workspace / "www" / "index.txt").write_text("served from the container\n")
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize")
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
        await peer.call("runners/select", {"threadId": thread, "runner": "box"})
        server = {"command": "busybox httpd -f -p 127.0.0.1:8080 -h /workspace/www"}
        task = (await peer.call("tasks/submit", {"executorId": "shell", "threadId": thread, "params": server}))["task"]
        listed: list[dict[str, Any]] = []
        for _attempt in range(600):  # each listing is a round trip into the container
            listed = (await peer.call("runners/ports", {"threadId": thread}, timeout=60))["ports"]
            if any(p["port"] == 8080 for p in listed):
                break
        assert [(p["port"], p["loopbackOnly"]) for p in listed] == [(8080, True)], listed
        forwarded = (await peer.call("runners/ports", {"threadId": thread, "forward": 8080}, timeout=60))["forwarded"]
        assert forwarded["localHost"] == "127.0.0.1" and "exec bridge" in forwarded["how"]
        reader, writer = await asyncio.open_connection(forwarded["localHost"], forwarded["localPort"])
        writer.write(b"GET /index.txt HTTP/1.0\r\nHost: box\r\n\r\n")
        await writer.drain()
        async with asyncio.timeout(60):
            answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.") and answer.endswith(b"served from the container\n"), answer
        session = (await peer.call("runners/session", {"threadId": thread}))["session"]
        assert session["details"]["network"] is False and [p["port"] for p in session["forwardedPorts"]] == [8080]
        await peer.call("tasks/cancel", {"taskId": task["id"]})
        await peer.call("runners/delete", {"runner": "box"})
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_a_batch_runs_its_tools_in_the_container(tmp_path: Path, podman: Podman, roder_home: Path) -> None:
    from roder_tui.cli import main
    from tests.batch.conftest import result, write_jsonl, write_script

    (roder_home / "config.toml").write_text(podman.runner_table("box"))
    source = tmp_path / "calc"
    source.mkdir()
    (source / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    steps = [
        {"text": "Where am I?", "tool_calls": [call("bash", command="pwd > where.txt")]},
        {"text": "Fixing.", "tool_calls": [call("edit", path="calc.py", old_string="a - b", new_string="a + b")]},
        {"text": "Fixed."},
    ]
    task = {
        "id": "fix",
        "prompt": "Fix add.",
        "workspace": str(source),
        "score": "grep -q 'a + b' calc.py",
        "env": {"RODER_MOCK_SCRIPT": str(write_script(tmp_path / "fix.json", steps))},
    }
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task])
    out = tmp_path / "out"
    args = ["batch", str(tasks), "--out", str(out), "--workers", "1", "--no-progress", "--provider", "mock", "--runner", "box"]
    assert await asyncio.to_thread(main, args) == 0
    fix = result(out, "fix")
    assert fix["passed"], fix
    assert fix["runner"]["name"] == "box" and fix["runner"]["kind"] == "container"
    diff = (out / "rollouts/fix/0/workspace.diff").read_text()
    assert "+    return a + b" in diff and "+/workspace" in diff  # the command ran in the mounted copy
    assert (source / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
