"""The thread's next command made ahead (``brokers.next_start``), with real cgroups and processes.

After each command the process broker starts the thread's next command's process (a held
``/bin/sh``) and moves it into that command's fresh cgroup while the model thinks. The next
command becomes that shell only while everything still holds: its groups exist and hold that
shell and nothing else, the shell is alive, and the command starts the same way. Otherwise the
shell is ended, its groups removed with whatever got into them, and the command starts in
groups of its own, as the first command of a thread does. CI runs this file as root and as an
unprivileged user (where no cgroup is writable, nothing is made ahead and it skips).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.netns import ThreadNetwork, ThreadNetworks, bind_thread
from roder_core.brokers.next_start import HeldCommand
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from tests.brokers.helpers import needs_bwrap
from tests.tools.harness import make_brokers

pytestmark = pytest.mark.skipif(not detect_cgroups().available, reason="no writable cgroup for this user")

LIMITS = ResourceLimits(processes=64, memory_mb=512)


@pytest.fixture
def networks() -> Iterator[ThreadNetworks]:
    table = ThreadNetworks()
    yield table
    table.close()


def bound(workspace: Path, tmp_path: Path, network: ThreadNetwork, sandbox: str) -> HostProcessBroker:
    brokers = bind_thread(make_brokers(workspace, tmp_path / "cache", sandbox=sandbox, limits=LIMITS), "t", network)
    assert isinstance(brokers.process, HostProcessBroker)
    return brokers.process


async def made_ahead(network: ThreadNetwork) -> HeldCommand:
    assert network.next_start is not None
    held = await network.next_start.ready()
    assert held is not None
    return held


def own_groups(output: str) -> set[str]:
    """The per-command groups (``roder-<pid>-<n>``) ``cat /proc/self/cgroup`` printed."""
    return {line.rsplit("/", 1)[1] for line in output.splitlines() if "/roder-" in line}


async def test_the_next_command_becomes_the_shell_made_ahead_inside_its_own_group(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    network = networks.handle("thread")
    proc = bound(workspace, tmp_path, network, "off")
    assert (await proc.run("true")).exit_code == 0
    held = await made_ahead(network)
    name = held.cgroup.groups[0].name
    result = await proc.run("cat /proc/self/cgroup")
    assert own_groups(result.output) == {name}, result.output
    assert all(not group.exists() for group in held.cgroup.groups)  # removed when the command ended
    after = await made_ahead(network)
    assert after.cgroup.groups[0].name != name and after.cgroup.holds_only(after.proc.pid)


class Ready:
    """An output sink that says when the command printed ``ready``."""

    def __init__(self) -> None:
        self.text = b""
        self.seen = asyncio.Event()

    def feed(self, data: bytes) -> None:
        self.text += data
        if b"ready\n" in self.text:
            self.seen.set()

    def flush(self) -> None:
        pass


@needs_bwrap
async def test_a_sandboxed_command_made_ahead_runs_inside_its_group_and_its_threads_network(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    network = networks.handle("thread")
    proc = bound(workspace, tmp_path, network, "workspace-write")
    first = await proc.run("readlink /proc/self/ns/net")
    held = await made_ahead(network)
    output = Ready()
    task = await proc.spawn("readlink /proc/self/ns/net; echo ready; exec sleep 600", output=output)
    try:
        async with asyncio.timeout(30):
            await output.seen.wait()
        assert task.pid == held.proc.pid  # the held shell became the command (bubblewrap)
        for group in held.cgroup.groups:
            assert task.pid in {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
        inside = output.text.decode().split()[0]
        assert inside == first.output.split()[0] != os.readlink("/proc/self/ns/net")
    finally:
        await task.kill()
    assert all(not group.exists() for group in held.cgroup.groups)


def _stranger_joins(held: HeldCommand) -> subprocess.Popen[bytes]:
    stranger = subprocess.Popen(["sleep", "600"])
    for group in held.cgroup.groups:
        (group / "cgroup.procs").write_text(str(stranger.pid))
    return stranger


async def _group_removed(held: HeldCommand) -> None:
    for group in held.cgroup.groups:
        (group.parent / "cgroup.procs").write_text(str(held.proc.pid))  # the shell lives on, elsewhere
        group.rmdir()


async def _shell_ended(held: HeldCommand) -> None:
    os.kill(held.proc.pid, signal.SIGKILL)
    await held.proc.wait()


@pytest.mark.parametrize("change", ["a stranger joined its group", "its group was removed", "its shell ended", "another folder"])
async def test_a_shell_made_ahead_that_no_longer_fits_is_never_used(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks, change: str
) -> None:
    network = networks.handle("thread")
    proc = bound(workspace, tmp_path, network, "off")
    (workspace / "sub").mkdir()
    assert (await proc.run("true")).exit_code == 0
    held = await made_ahead(network)
    name = held.cgroup.groups[0].name
    stranger = None
    cwd = None
    tamper: dict[str, Callable[[HeldCommand], Awaitable[None]]] = {
        "its group was removed": _group_removed,
        "its shell ended": _shell_ended,
    }
    if change == "a stranger joined its group":
        stranger = _stranger_joins(held)
    elif change == "another folder":
        cwd = workspace / "sub"
    else:
        await tamper[change](held)
    result = await proc.run("cat /proc/self/cgroup; pwd", cwd=cwd)
    assert result.exit_code == 0, result.output
    mine = own_groups(result.output)
    assert mine and name not in mine, result.output  # a group of its own, made for it
    if cwd is not None:
        assert str(cwd) in result.output
    # the unfit shell ended unrun and its groups went, with whatever was in them
    async with asyncio.timeout(30):
        await held.proc.wait()
    assert all(not group.exists() for group in held.cgroup.groups)
    if stranger is not None:
        assert stranger.wait(timeout=30) == -signal.SIGKILL


async def test_a_thread_that_ends_ends_its_shell_made_ahead_unrun(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    network = networks.handle("thread")
    proc = bound(workspace, tmp_path, network, "off")
    assert (await proc.run("true")).exit_code == 0
    held = await made_ahead(network)
    networks.release("thread")
    async with asyncio.timeout(30):
        await held.proc.wait()
    assert all(not group.exists() for group in held.cgroup.groups)
    assert network.next_start is None


async def test_a_command_in_another_loop_does_not_take_a_shell_made_in_this_one(workspace: Path, tmp_path: Path) -> None:
    """A shell made ahead belongs to the event loop that watches it: a thread driven from
    another loop starts its command afresh."""
    network = ThreadNetwork("thread")
    proc = bound(workspace, tmp_path, network, "off")
    try:
        assert (await proc.run("true")).exit_code == 0
        held = await made_ahead(network)
        name = held.cgroup.groups[0].name

        def elsewhere() -> str:
            return asyncio.run(proc.run("cat /proc/self/cgroup")).output

        output = await asyncio.to_thread(elsewhere)
        assert own_groups(output) and name not in own_groups(output), output
    finally:
        network.close()


@needs_bwrap
async def test_a_sandboxed_command_cannot_reach_another_threads_shell_made_ahead(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    """The shell made ahead waits outside any sandbox for its command line on a pipe: a
    sandboxed command of another thread (same user) must not find it, signal it, or write a
    command line of its own into it through ``/proc/PID/fd/0``."""
    first = networks.handle("first")
    proc = bound(workspace, tmp_path, first, "workspace-write")
    assert (await proc.run("true")).exit_code == 0
    held = await made_ahead(first)
    marker = tmp_path / "injected"
    attacker = bind_thread(
        make_brokers(workspace, tmp_path / "cache2", sandbox="workspace-write", limits=LIMITS), "t2", networks.handle("second")
    ).process
    pid = held.proc.pid
    attempt = await attacker.run(
        f"ls /proc/{pid} >/dev/null 2>&1 && echo SEEN; "
        f"printf 'touch {marker}\\n' > /proc/{pid}/fd/0 2>/dev/null && echo WROTE; "
        f"kill -STOP {pid} 2>/dev/null && echo SIGNALLED; true"
    )
    assert "SEEN" not in attempt.output and "WROTE" not in attempt.output and "SIGNALLED" not in attempt.output, attempt.output
    result = await proc.run("echo own")
    assert result.output.strip() == "own" and not marker.exists()
