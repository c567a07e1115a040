"""The ``container`` runner with a real Podman, when Podman can run containers on this machine.

No image is pulled from anywhere: the test builds one from a local root filesystem (this
machine's own bash, coreutils and their libraries, ``podman import``ed). When Podman is missing
or cannot start a container here (nested containers often cannot), the test says why it skips,
in Podman's own words.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.server.support import PipePeer, call, trusted_workspace

pytestmark = pytest.mark.e2e

IMAGE = "localhost/roder-runner-test:latest"
PROGRAMS = ("bash", "sh", "env", "cat", "ls", "pwd", "touch", "kill", "setsid", "sleep", "id", "printf")


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


@pytest.fixture(scope="module")
def podman_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman is not installed (.ci/run installs it where apt-get works)")
    folder = tmp_path_factory.mktemp("podman")
    imported = subprocess.run([podman, "import", str(_rootfs_tarball(folder)), IMAGE], capture_output=True, text=True)
    if imported.returncode != 0:
        pytest.skip(f"podman cannot import a local image here: {imported.stderr.strip()[-300:]}")
    tried = subprocess.run(
        [podman, "run", "--rm", "--pull=never", "--network", "none", IMAGE, "/usr/bin/sh", "-c", "echo ok"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if tried.returncode != 0 or tried.stdout.strip() != "ok":
        pytest.skip(f"podman cannot run containers on this machine: {(tried.stderr or tried.stdout).strip()[-300:]}")
    return IMAGE


async def test_commands_run_in_the_container_with_the_workspace_mounted(
    tmp_path: Path, podman_image: str, roder_home: Path
) -> None:
    (roder_home / "config.toml").write_text(
        f'[policy]\ndeny = ["bash(rm *)"]\n\n[runners.box]\nkind = "container"\nengine = "podman"\nimage = "{podman_image}"\n'
    )
    steps = [
        {"text": "Where?", "tool_calls": [call("bash", command="pwd; echo made-inside > inside.txt; cat /proc/net/dev")]},
        {"text": "Remove.", "tool_calls": [call("bash", command="rm -f keep.txt")]},
        {"text": "Done."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    (workspace / "keep.txt").write_text("keep\n")
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
        await peer.call("runners/delete", {"runner": "box"})
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
