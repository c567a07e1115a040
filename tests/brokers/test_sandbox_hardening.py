"""The hardening parts of the sandbox on their own: the seccomp program, the tree guard, masks,
per-command cgroups and scrubbing secrets by value, with real bubblewrap where it matters."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

import roder_core.brokers.process as process_module
from roder_core.brokers import BrokerDenied, cgroups, host_programs, sandbox, seccomp, tree_guard
from roder_core.brokers.cgroups import CgroupSupport, CommandCgroup
from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from roder_core.brokers.sandbox import sandbox_status
from roder_core.brokers.secret_paths import masks
from roder_core.brokers.secrets import SecretRedactor
from tests.brokers.helpers import needs_bwrap


def broker(workspace: Path, tmp_path: Path, *, sandbox: str | None = None, **kw: object) -> HostProcessBroker:
    return HostProcessBroker(
        WorkspaceFileSystem(workspace),
        sandbox=sandbox_status(sandbox),
        spill_dir=tmp_path / "spill",
        quarantine_dir=tmp_path / "quarantine",
        **kw,  # type: ignore[arg-type]
    )


def test_seccomp_program_per_architecture() -> None:
    x86 = seccomp.filter_program(machine="x86_64")
    arm = seccomp.filter_program(machine="aarch64")
    assert x86
    assert arm
    assert len(x86) % 8 == 0
    assert len(arm) % 8 == 0
    assert len(seccomp.filter_program(machine="x86_64", allow_unix_sockets=True) or b"") < len(x86)
    assert seccomp.filter_program(machine="riscv64") is None


@needs_bwrap
async def test_unix_sockets_refused_socketpair_kept(workspace: Path, tmp_path: Path) -> None:
    script = (
        "import socket\na, b = socket.socketpair(); a.sendall(b'pair-ok'); print(b.recv(16).decode())\n"
        "try:\n    socket.socket(socket.AF_UNIX); print('unix-created')\nexcept OSError as e:\n    print('unix', e.strerror)"
    )
    result = await broker(workspace, tmp_path).run(["python3", "-c", script])
    assert "pair-ok" in result.output
    assert "unix Operation not permitted" in result.output


@needs_bwrap
async def test_allow_unix_sockets_lets_the_workspace_use_them(workspace: Path, tmp_path: Path) -> None:
    script = (
        "import socket, os\ns = socket.socket(socket.AF_UNIX); s.bind('app.sock'); s.listen(1)\n"
        "c = socket.socket(socket.AF_UNIX); c.connect('app.sock'); conn, _ = s.accept()\n"
        "c.sendall(b'unix-ok'); print(conn.recv(16).decode()); os.unlink('app.sock')"
    )
    result = await broker(workspace, tmp_path, allow_unix_sockets=True).run(["python3", "-c", script])
    assert "unix-ok" in result.output, result.output


@pytest.mark.skipif(not detect_cgroups().available, reason="no writable cgroup for this user")
async def test_each_command_gets_its_own_cgroup_removed_after(workspace: Path, tmp_path: Path) -> None:
    proc = broker(workspace, tmp_path, sandbox="off", limits=ResourceLimits(processes=64, memory_mb=256))
    result = await proc.run("cat /proc/self/cgroup")
    lines = [line for line in result.output.splitlines() if "/roder-" in line]
    assert lines, result.output
    support = detect_cgroups()
    for line in lines:
        name = line.rsplit("/", 1)[1]
        for parent in (support.pids_parent, support.memory_parent):
            assert parent is None or not (parent / name).exists()


@pytest.mark.skipif(detect_cgroups().memory_parent is None, reason="no writable memory cgroup for this user")
def test_a_memory_cap_keeps_the_command_out_of_swap() -> None:
    """Without this a machine with swap lets a command hold far more than its cap (the kernel
    swaps the rest out instead of killing): CI caught six 64 MiB processes under a 200 MiB cap."""
    support = detect_cgroups()
    group = CommandCgroup(support, processes=0, memory_mb=200)
    group.create()
    try:
        (folder,) = group.groups
        if support.version == "v2":
            swap_max = folder / "memory.swap.max"
            assert swap_max.exists() == support.swap_capped
            assert not swap_max.exists() or swap_max.read_text().strip() == "0"
        else:
            assert support.swap_capped
            assert (folder / "memory.swappiness").read_text().strip() == "0"
            memsw = folder / "memory.memsw.limit_in_bytes"
            assert not memsw.exists() or int(memsw.read_text()) == 200 << 20
    finally:
        group.remove()
    assert not folder.exists()


@pytest.mark.parametrize("swap_on", [True, False])
def test_the_report_says_when_swap_escapes_the_memory_cap(monkeypatch: pytest.MonkeyPatch, swap_on: bool) -> None:
    """v2 without swap accounting cannot keep a group out of swap: said only where swap is on."""
    monkeypatch.setattr(cgroups, "swap_active", lambda: swap_on)
    uncapped = CgroupSupport("v2", memory_parent=Path("/sys/fs/cgroup/x"), swap_capped=False)
    capped = CgroupSupport("v2", memory_parent=Path("/sys/fs/cgroup/x"), swap_capped=True)
    assert ("swap not capped" in cgroups.describe(uncapped)) == swap_on
    assert "swap not capped" not in cgroups.describe(capped)


async def test_limits_that_cannot_be_set_refuse_the_command(workspace: Path, tmp_path: Path) -> None:
    """A command never runs without the limits the sandbox report promised."""
    gone = CgroupSupport("v1", memory_parent=tmp_path / "no-such-cgroup", swap_capped=True)
    proc = broker(workspace, tmp_path, sandbox="off", limits=ResourceLimits(memory_mb=256), cgroups=gone)
    with pytest.raises(BrokerDenied, match="limits could not be set"):
        await proc.run("touch ran")
    assert not (workspace / "ran").exists()


def test_scrubbed_by_value_but_passed_secrets_stay(workspace: Path, tmp_path: Path) -> None:
    token = "remote-token-Zq81mK0pX"
    redactor = SecretRedactor({"app-server token": token, "NPM_TOKEN": "npm-secret-value-1"})
    proc = broker(
        workspace,
        tmp_path,
        sandbox="off",
        redactor=redactor,
        pass_env=["NPM_TOKEN"],
        env={"PATH": os.environ["PATH"], "INNOCENT": token, "WRAPPED": f"x{token}x", "NPM_TOKEN": "npm-secret-value-1"},
    )
    env, dropped = proc.child_env()
    assert "INNOCENT" not in env
    assert "WRAPPED" not in env
    assert {"INNOCENT", "WRAPPED"} <= set(dropped)
    assert env["NPM_TOKEN"] == "npm-secret-value-1"


def test_tree_guard_finds_what_git_refers_to(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "config", "core.hooksPath", "tools/hooks"], check=True)
    (ws / "tools" / "hooks").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--separate-git-dir", str(ws / "store"), str(ws / "app")], check=True)
    (ws / "deep" / "x").mkdir(parents=True)
    (ws / "deep" / "x" / ".envrc").write_text("")
    guard = tree_guard.scan([ws])
    readonly = set(guard.readonly_paths())
    assert {ws / ".git", ws / "tools/hooks", ws / "store", ws / "app/.git", ws / "deep/x/.envrc"} <= readonly
    (ws / "deep" / "x" / ".roder").mkdir()
    (ws / "fake" / "objects").mkdir(parents=True)
    (ws / "fake" / "refs").mkdir()
    (ws / "fake" / "HEAD").write_text("ref: refs/heads/main\n")
    assert tree_guard.changed(guard, tree_guard.scan([ws])) == [ws / "fake", ws / "deep/x/.roder"]


def test_masks_never_hide_the_workspace(tmp_path: Path) -> None:
    home = Path("/var/tmp") / f"roder-mask-test-{os.getpid()}"
    (home / "project").mkdir(parents=True, exist_ok=True)
    (home / ".ssh").mkdir(exist_ok=True)
    try:
        chosen = masks([home, home / ".ssh", tmp_path], [home / "project"])
        assert chosen == [home / ".ssh"]  # home holds the workspace; /tmp is private anyway
    finally:
        (home / ".ssh").rmdir()
        (home / "project").rmdir()
        home.rmdir()


def test_masks_are_the_resolved_existing_paths_whatever_the_links_on_the_way() -> None:
    """Each candidate is masked where it really is: through links to files and folders (also
    relative ones, and links among the folders above it), ``..`` and a trailing slash; missing
    ones and dangling links are not masked, and one inside another masked folder is covered."""
    base = Path("/var/tmp") / f"roder-mask-links-{os.getpid()}"
    real = base / "real"
    (real / "keys").mkdir(parents=True)
    (real / "keys" / "id").write_text("k")
    (real / "token").write_text("t")
    (base / "home").mkdir()
    (base / "home" / ".keys").symlink_to(real / "keys")  # a link to a folder
    (base / "home" / ".token").symlink_to("../real/token")  # relative
    (base / "home" / ".gone").symlink_to(base / "nowhere")  # dangling
    (base / "linked").symlink_to(base / "home")  # a linked folder above the candidates
    try:
        candidates = [
            base / "linked" / ".keys",
            base / "linked" / ".keys" / "id",  # inside a masked folder
            base / "linked" / ".token",
            base / "linked" / ".gone",
            base / "linked" / ".missing",
            Path(f"{base}/home/../real/token"),
            Path(f"{base}/real/keys/"),
            base / "real" / "keys" / ".." / "token",
        ]
        chosen = masks(candidates, [])
        assert chosen == [real / "keys", real / "token"]
        assert chosen == masks([Path(os.path.realpath(c)) for c in candidates if os.path.exists(c)], [])
    finally:
        shutil.rmtree(base)


@needs_bwrap
@pytest.mark.skipif(not detect_cgroups().available, reason="no writable cgroup for this user")
async def test_an_interrupt_while_the_command_is_held_stays_an_interrupt(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn interrupt that lands while Roder moves the held shell into its cgroup kills the
    shell; the move then fails (the shell is gone, its pipe has no reader). That failure is the
    interrupt's consequence, not a refusal: the call must end cancelled, or the turn goes on
    as if the tool had been refused, and the command must never have run."""
    killed = threading.Event()
    moving = asyncio.Event()
    loop = asyncio.get_running_loop()
    real_kill, real_add = process_module._kill_group, CommandCgroup.add

    def kill(pgid: int, *args: Any, **kw: Any) -> None:
        real_kill(pgid, *args, **kw)
        killed.set()

    def add(self: CommandCgroup, pid: int) -> None:
        loop.call_soon_threadsafe(moving.set)
        killed.wait()
        with contextlib.suppress(ChildProcessError):  # gone, without reaping it (asyncio does)
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        real_add(self, pid)

    monkeypatch.setattr(process_module, "_kill_group", kill)
    monkeypatch.setattr(CommandCgroup, "add", add)
    proc = broker(workspace, tmp_path, limits=ResourceLimits(processes=64))
    task = asyncio.create_task(proc.run("touch ran"))
    async with asyncio.timeout(30):
        await moving.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not (workspace / "ran").exists()


@needs_bwrap
async def test_a_planted_bwrap_on_the_path_is_not_the_sandbox(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap itself runs unconfined: with a workspace folder first on Roder's PATH, a
    program named ``bwrap`` the agent left there must not be the one Roder finds where the
    system has one."""
    real = shutil.which("bwrap")
    assert real is not None and os.path.dirname(real) in host_programs.SYSTEM_FOLDERS
    outside = tmp_path / "escaped"
    planted = workspace / "bin" / "bwrap"
    planted.parent.mkdir()
    planted.write_text(f'#!/bin/sh\ntouch {outside}\nexec {real} "$@"\n')
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted.parent}:{os.environ.get('PATH', os.defpath)}")
    sandbox.probe_bubblewrap.cache_clear()
    try:
        result = await broker(workspace, tmp_path).run("echo inside")
    finally:
        sandbox.probe_bubblewrap.cache_clear()
    assert "inside" in result.output and result.sandbox == "workspace-write", result
    assert not outside.exists()
