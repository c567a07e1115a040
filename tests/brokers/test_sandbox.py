"""The bubblewrap backends, run for real (skipped only when the probe says bubblewrap cannot
work on this machine), and the probe/fallback logic, which always runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_core.brokers import BrokerDenied, ProcessBroker
from roder_core.brokers.sandbox import probe_bubblewrap, sandbox_status
from tests.brokers.helpers import Reachable, assert_gone, marker, needs_bwrap, outside_folder, serve
from tests.tools.harness import make_brokers


@pytest.fixture
def loopback_server() -> Iterator[int]:
    with serve(Reachable) as port:
        yield port


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_folder("roder-outside-") as folder:
        yield folder


def sandboxed(workspace: Path, tmp_path: Path, level: str = "workspace-write") -> ProcessBroker:
    return make_brokers(workspace, tmp_path / "cache", sandbox=level).process


# ---------------------------------------------------------------------------- probe and fallback


def test_missing_bubblewrap_falls_back_to_off_with_one_notice() -> None:
    status = sandbox_status(None, bwrap="/nonexistent/bwrap")
    assert status.effective == "off"
    assert not status.blocked
    assert "not installed" in (status.notice or "")
    assert status.label == "sandbox: off (no bubblewrap)"


def test_refused_bubblewrap_is_reported_plainly(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    probe = probe_bubblewrap(str(fake))
    assert not probe.works
    assert "Creating new namespace failed" in probe.reason
    status = sandbox_status(None, bwrap=str(fake))
    assert status.effective == "off"
    assert "Creating new namespace failed" in (status.notice or "")


async def test_explicit_level_without_bubblewrap_refuses_commands(workspace: Path, tmp_path: Path) -> None:
    status = sandbox_status("workspace-write", bwrap="/nonexistent/bwrap")
    assert status.blocked
    assert "--sandbox off" in (status.notice or "")
    brokers = make_brokers(workspace, tmp_path / "cache")
    brokers.process.sandbox = status  # type: ignore[attr-defined]
    with pytest.raises(BrokerDenied, match="bubblewrap"):
        await brokers.process.run("echo hi")


def test_off_is_off_without_probing() -> None:
    status = sandbox_status("off", bwrap="/nonexistent/bwrap")
    assert status.effective == "off"
    assert status.notice is None
    assert not status.blocked


def test_unknown_level_is_an_error() -> None:
    with pytest.raises(ValueError, match="workspace-write"):
        sandbox_status("everything")


# ---------------------------------------------------------------------------- bubblewrap, for real


@needs_bwrap
async def test_workspace_writable_rest_read_only(workspace: Path, tmp_path: Path, outside: Path) -> None:
    proc = sandboxed(workspace, tmp_path)
    result = await proc.run(
        f"echo ok > inside.txt; echo x > {outside}/escape.txt; echo rc=$?; touch /etc/roder-test 2>&1; echo rc=$?"
    )
    assert result.sandbox == "workspace-write"
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert not (outside / "escape.txt").exists()
    assert "Read-only file system" in result.output
    assert not Path("/etc/roder-test").exists()


@needs_bwrap
async def test_read_only_level(workspace: Path, tmp_path: Path) -> None:
    (workspace / "seen.txt").write_text("visible")
    result = await sandboxed(workspace, tmp_path, "read-only").run("cat seen.txt; echo x > new.txt; echo rc=$?")
    assert "visible" in result.output
    assert "rc=1" in result.output
    assert not (workspace / "new.txt").exists()


@needs_bwrap
async def test_a_read_only_run_gets_the_read_only_level_under_workspace_write(workspace: Path, tmp_path: Path) -> None:
    """A caller's read-only command (grep's ripgrep) runs with the workspace read-only, so
    nothing it could do changes the tree and the guard's walks around it are not needed."""
    (workspace / "seen.txt").write_text("visible")
    proc = sandboxed(workspace, tmp_path)
    result = await proc.run("cat seen.txt; echo x > new.txt; echo a=$?; echo '{}' > .mcp.json; echo b=$?", read_only=True)
    assert "visible" in result.output
    assert "a=1" in result.output and "b=1" in result.output, result.output
    assert result.sandbox == "read-only"
    assert not (workspace / "new.txt").exists()
    assert not (workspace / ".mcp.json").exists()
    writing = await proc.run("echo x > new.txt")
    assert writing.sandbox == "workspace-write"
    assert (workspace / "new.txt").read_text() == "x\n"


@needs_bwrap
async def test_private_tmp(workspace: Path, tmp_path: Path) -> None:
    name = f"/tmp/{marker()}"
    result = await sandboxed(workspace, tmp_path).run(f"echo hi > {name} && cat {name}")
    assert "hi" in result.output
    assert not Path(name).exists()


@needs_bwrap
async def test_protected_paths_are_rebound_read_only(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / ".bashrc").write_text("# mine\n")
    (workspace / ".roder").mkdir()
    proc = sandboxed(workspace, tmp_path)
    result = await proc.run(
        "echo evil >> .git/config; echo a=$?; echo evil > .git/hooks/pre-commit; echo b=$?; "
        "echo evil >> .bashrc; echo c=$?; echo evil > .roder/config.toml; echo d=$?"
    )
    for flag in ("a=1", "b=1", "c=1", "d=1"):
        assert flag in result.output
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".bashrc").read_text() == "# mine\n"
    assert not (workspace / ".roder" / "config.toml").exists()


@needs_bwrap
async def test_git_reads_work_and_writes_are_refused_inside_the_sandbox(workspace: Path, tmp_path: Path) -> None:
    setup = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        "git init -q && echo x > f.txt && git add f.txt && git -c user.email=a@b -c user.name=a commit -qm one",
        cwd=workspace,
    )
    assert await setup.wait() == 0
    proc = sandboxed(workspace, tmp_path)
    read = await proc.run("git log --oneline && git status --short && git diff HEAD")
    assert read.exit_code == 0 and "one" in read.output, read.output
    write = await proc.run("echo y > g.txt && git add g.txt")
    assert write.exit_code != 0
    assert "Read-only file system" in write.output
    assert not (workspace / ".git" / "index.lock").exists()


@needs_bwrap
async def test_created_protected_paths_are_quarantined(workspace: Path, tmp_path: Path) -> None:
    result = await sandboxed(workspace, tmp_path).run("echo '{}' > .mcp.json; mkdir .roder; echo x > .roder/hooks.toml")
    assert not (workspace / ".mcp.json").exists()
    assert not (workspace / ".roder").exists()
    assert any(q.startswith(".mcp.json -> ") for q in result.quarantined)
    moved = Path(next(q for q in result.quarantined if q.startswith(".mcp.json")).split(" -> ")[1])
    assert moved.read_text() == "{}\n"  # kept, out of the workspace


@needs_bwrap
@pytest.mark.parametrize(
    "probe",
    [
        "curl -sS --max-time 3 http://127.0.0.1:{port}/",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\"",
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        "wget -q -T 3 -O - http://127.0.0.1:{port}/",
    ],
    ids=["curl", "python-socket", "dev-tcp", "wget"],
)
async def test_no_network_inside(workspace: Path, tmp_path: Path, loopback_server: int, probe: str) -> None:
    with socket.create_connection(("127.0.0.1", loopback_server), timeout=3):
        pass  # reachable from the host: the sandbox is what stops it
    if probe.split()[0] in ("curl", "wget") and shutil.which(probe.split()[0]) is None:
        pytest.skip(f"{probe.split()[0]} is not installed")
    result = await sandboxed(workspace, tmp_path).run(probe.format(port=loopback_server), timeout=20)
    assert result.exit_code != 0
    assert "reachable" not in result.output
    assert "connected" not in result.output


@needs_bwrap
async def test_fresh_proc_and_pid_namespace(workspace: Path, tmp_path: Path) -> None:
    result = await sandboxed(workspace, tmp_path).run("ls /proc | grep -c '^[0-9]'")
    assert int(result.output.split()[0]) < 10  # only the sandbox's own processes


@needs_bwrap
async def test_timeout_and_new_sessions_leave_no_orphans(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    command = f"setsid bash -c 'exec -a {mark} sleep 300' & (exec -a {mark} sleep 300) & exec -a {mark} sleep 300"
    result = await sandboxed(workspace, tmp_path).run(command, timeout=1)
    assert result.timed_out
    assert_gone(mark)


@needs_bwrap
async def test_interrupt_kills_the_sandbox(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    started = asyncio.Event()
    command = f"setsid bash -c 'exec -a {mark} sleep 300' & echo started; wait"
    task = asyncio.create_task(sandboxed(workspace, tmp_path).run(command, on_output=lambda text: started.set()))
    async with asyncio.timeout(30):
        await started.wait()  # the sandbox runs the command
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_gone(mark)


def test_probe_answer_is_cached_on_disk_until_bwrap_changes(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\nexit 0\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache" / "sandbox-probe.json"
    uncached = probe_bubblewrap.__wrapped__  # the per-process memo would hide the disk cache
    first = uncached(str(fake), cache)
    assert first.works
    assert first.userns
    assert first.no_nested_userns
    assert first.seccomp
    probes = calls.read_text().count("x")  # the isolation, then each hardening on top of it
    assert uncached(str(fake), cache) == first
    assert calls.read_text().count("x") == probes
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    probe = uncached(str(fake), cache)
    assert not probe.works
    assert "No permissions" in probe.reason
    assert calls.read_text().count("x") == probes + 1


@needs_bwrap
async def test_a_virtualenv_under_tmp_on_the_path_stays_visible(workspace: Path, tmp_path: Path) -> None:
    """A clone under /tmp with its .venv there: the private /tmp must not hide the interpreter
    and the tools on the command's PATH (they are shown read-only), while the rest of /tmp stays
    private."""
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="roder-clone-") as clone:
        venv = Path(clone) / ".venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "lib").mkdir()
        (venv / "lib" / "module.txt").write_text("from the venv\n")
        tool = venv / "bin" / "venv-tool"
        tool.write_text('#!/bin/sh\necho "tool ran: $(cat "$(dirname "$0")/../lib/module.txt")"\n')
        tool.chmod(0o755)
        (Path(clone) / "beside.txt").write_text("private\n")
        env = {**os.environ, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
        broker = make_brokers(workspace, tmp_path / "cache", sandbox="workspace-write", env=env).process
        result = await broker.run(f"venv-tool; cat {clone}/beside.txt || echo hidden; touch {venv}/x || echo read-only")
    assert "tool ran: from the venv" in result.output
    assert "hidden" in result.output  # the clone's other files are still behind the private /tmp
    assert "read-only" in result.output


def test_only_path_folders_strictly_under_tmp_are_shown(tmp_path: Path) -> None:
    from roder_core.brokers.sandbox import path_folders_under_private_tmp

    assert path_folders_under_private_tmp("/tmp:/usr/bin:relative/bin", ()) == []
    hidden = (tmp_path / "roder-home",)
    assert path_folders_under_private_tmp(str(tmp_path), hidden) == []  # it holds Roder's hidden folder
    assert path_folders_under_private_tmp(str(tmp_path), ()) == ([tmp_path] if tmp_path.is_relative_to("/tmp") else [])
