"""The thread's loopback network and background commands, against real bubblewrap.

Sandboxed commands bound to one thread share a network namespace that has only ``lo``: a
server one starts is reached by the next; another thread's commands, unbound commands and the
host cannot reach it, and it cannot reach the host. Every command still gets the whole
per-command confinement (read-only root, protected paths, no namespaces of its own, no
capabilities). CI runs this file as root and as an unprivileged user.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_core.brokers import BrokerDenied, netns
from roder_core.brokers.cgroups import CommandCgroup
from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.netns import LoopbackNetwork, NetworkNamespaceError, ThreadNetwork, ThreadNetworks, bind_thread
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from roder_core.brokers.task_log import TaskLog
from tests.brokers.helpers import Reachable, assert_gone, marker, needs_bwrap, outside_folder, running, serve
from tests.builders import until
from tests.tools.harness import make_brokers

SERVE = (
    'python3 -u -c \'import http.server as h, sys; s = h.HTTPServer(("127.0.0.1", int(sys.argv[1])), '
    'h.SimpleHTTPRequestHandler); print("up", flush=True); s.serve_forever()\' {port} {mark}'
)
FETCH = (
    'python3 -c \'import sys, urllib.request as u; print(u.urlopen("http://127.0.0.1:" + sys.argv[1] + "/", '
    "timeout=5).status)' {port}"
)


class Lines(TaskLog):
    """A task log that lets a test wait for a line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.changed = asyncio.Event()

    def feed(self, data: bytes) -> None:
        super().feed(data)
        self.changed.set()

    async def wait_for(self, line: str) -> None:
        while self.last_line != line:
            self.changed.clear()
            await self.changed.wait()


@pytest.fixture
def networks() -> Iterator[ThreadNetworks]:
    table = ThreadNetworks()
    yield table
    table.close()


def bound(workspace: Path, tmp_path: Path, network: ThreadNetwork | None, **kw: object) -> HostProcessBroker:
    brokers = make_brokers(workspace, tmp_path / "cache", sandbox="workspace-write", **kw)  # type: ignore[arg-type]
    if network is not None:
        brokers = bind_thread(brokers, "t", network)
    assert isinstance(brokers.process, HostProcessBroker)
    return brokers.process


@needs_bwrap
async def test_a_threads_commands_share_loopback_and_nobody_else_does(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    mark, port = marker(), 8000
    thread_a = bound(workspace, tmp_path, networks.handle("thread-a"))
    thread_b = bound(workspace, tmp_path, networks.handle("thread-b"))
    unbound = bound(workspace, tmp_path, None)
    log = Lines(tmp_path / "server.log")
    server = await thread_a.spawn(SERVE.format(port=port, mark=mark), output=log)
    try:
        await log.wait_for("up")
        same = await thread_a.run(FETCH.format(port=port))
        assert same.exit_code == 0 and same.output.strip() == "200", same.output
        for stranger in (thread_b, unbound):
            refused = await stranger.run(FETCH.format(port=port))
            assert refused.exit_code != 0 and "Connection refused" in refused.output, refused.output
        # the same port is free in thread b's own network: nothing of thread a is there
        other_log = Lines(tmp_path / "other.log")
        other = await thread_b.spawn(SERVE.format(port=port, mark=mark + "-b"), output=other_log)
        await other_log.wait_for("up")
        await other.kill()
    finally:
        result = await server.kill()
    assert result.interrupted and result.sandbox == "workspace-write"
    assert_gone(mark)


@needs_bwrap
async def test_the_host_network_stays_out_of_reach(workspace: Path, tmp_path: Path, networks: ThreadNetworks) -> None:
    proc = bound(workspace, tmp_path, networks.handle("thread"))
    with serve(Reachable) as host_port:
        probe = await proc.run(
            "python3 - <<'EOF'\n"
            "import socket\n"
            f"for target in (('127.0.0.1', {host_port}), ('1.1.1.1', 80)):\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=3); print('REACHED', target)\n"
            "    except OSError as exc:\n"
            "        print('blocked', target, exc)\n"
            "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
            "EOF"
        )
    assert "REACHED" not in probe.output and probe.output.count("blocked") == 2, probe.output
    assert "['lo']" in probe.output
    # and the host never sees a server of the thread: it listens in the thread's network only
    log = Lines(tmp_path / "server.log")
    server = await proc.spawn(SERVE.format(port=8001, mark=marker()), output=log)
    await log.wait_for("up")
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", 8001)
    await server.kill()


@needs_bwrap
async def test_each_command_is_still_confined_inside_the_shared_network(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    proc = bound(workspace, tmp_path, networks.handle("thread"))
    with outside_folder("roder-outside-") as outside:
        result = await proc.run(
            f"echo x > {outside}/escape; echo out=$?; echo evil >> .git/config; echo git=$?; "
            "unshare -n true; echo unshare=$?; "
            "ls -l /proc/self/fd | grep -c 'net:\\|user:' ; "
            "grep CapEff /proc/self/status; echo ok > inside.txt"
        )
        assert not (outside / "escape").exists()
    assert "out=1" in result.output and "git=1" in result.output, result.output
    assert "unshare=0" not in result.output  # no namespaces of its own (seccomp, no capabilities)
    assert "\n0\n" in result.output, result.output  # no namespace descriptor leaked into the command
    assert "CapEff:\t0000000000000000" in result.output
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


@needs_bwrap
async def test_a_released_network_is_gone_for_new_commands(workspace: Path, tmp_path: Path, networks: ThreadNetworks) -> None:
    mark = marker()
    first = networks.handle("thread")
    proc = bound(workspace, tmp_path, first)
    log = Lines(tmp_path / "server.log")
    server = await proc.spawn(SERVE.format(port=8002, mark=mark), output=log)
    await log.wait_for("up")
    networks.release("thread")
    # the running server keeps the old namespace alive; a resumed thread gets a fresh one
    fresh = bound(workspace, tmp_path, networks.handle("thread"))
    refused = await fresh.run(FETCH.format(port=8002))
    assert refused.exit_code != 0 and "Connection refused" in refused.output
    assert running(mark)
    await server.kill()
    assert_gone(mark)


def command_groups() -> list[Path]:
    """The per-command cgroups this process has now (``roder-<pid>-<n>``), in every hierarchy."""
    support = detect_cgroups()
    parents = {p for p in (support.pids_parent, support.memory_parent) if p is not None}
    return [group for parent in parents for group in parent.glob(f"roder-{os.getpid()}-*")]


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, from the host's /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, grew = {pid}, True
    while grew:
        below = {child for child, parent in parents.items() if parent in found}
        grew = not below <= found
        found |= below
    return found


@needs_bwrap
async def test_a_command_starts_inside_its_threads_network_and_its_cgroup(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks
) -> None:
    """Roder puts a command into its thread's network and its own cgroup before anything of it
    runs (a shell holds it while Roder moves it, ``nsenter`` joins the network): the command's
    first act sees both, and from the host every process of the command is in them. Its cgroup
    namespace is rooted at its own group, so the sandbox itself was made inside it."""
    limits = ResourceLimits(processes=64, memory_mb=512)
    proc = bound(workspace, tmp_path, networks.handle("thread"), limits=limits)
    log = Lines(tmp_path / "probe.log")
    task = await proc.spawn("cat /proc/self/cgroup; readlink /proc/self/ns/net; echo ready; exec sleep 600", output=log)
    try:
        await log.wait_for("ready")
        lines = log.read().text.splitlines()
        inside_net = next(line for line in lines if line.startswith("net:["))
        assert inside_net != os.readlink("/proc/self/ns/net")
        tree = descendants(task.pid)
        assert len(tree) >= 3, tree  # bubblewrap, the sandbox's init, the command
        for pid in tree:
            assert os.readlink(f"/proc/{pid}/ns/net") == inside_net
        groups = command_groups()
        if detect_cgroups().available:
            assert groups
            for group in groups:
                assert tree <= {int(pid) for pid in (group / "cgroup.procs").read_text().split()}, group
            # /proc/self/cgroup inside: the command's own group is the root of its namespace
            cgroup_lines = [line.split(":", 2) for line in lines if line[:1].isdigit() and line.count(":") >= 2]
            mine = [path for _id, controllers, path in cgroup_lines if {"pids", "memory", ""} & set(controllers.split(","))]
            assert mine and all(path == "/" for path in mine), lines
    finally:
        await task.kill()
    assert not any(group.exists() for group in groups)
    # what is left is the thread's next command's groups, holding its held shell alone, until
    # the thread ends
    handle = networks.handle("thread")
    if detect_cgroups().available:
        assert handle.next_start is not None
        held = await handle.next_start.ready()
        assert held is not None and held.cgroup.holds_only(held.proc.pid)
    networks.release("thread")
    assert not command_groups()


@needs_bwrap
@pytest.mark.skipif(not detect_cgroups().available, reason="no writable cgroup for this user")
async def test_a_command_that_cannot_join_its_cgroup_never_runs(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: a command held for its cgroup whose move is refused ends there, unrun."""
    mark = marker()

    def refuse(self: CommandCgroup, pid: int) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(CommandCgroup, "add", refuse)
    proc = bound(workspace, tmp_path, networks.handle("thread"), limits=ResourceLimits(processes=64, memory_mb=512))
    with pytest.raises(BrokerDenied, match=r"limits could not be set .*Permission denied.*it was not run"):
        await proc.run(f"touch ran; sleep 600 # {mark}")
    assert not (workspace / "ran").exists()
    assert_gone(mark)
    assert not command_groups()


def namespace_fds() -> list[str]:
    """This process's open namespace descriptors, as ``net:[inode]`` / ``user:[inode]``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed already
        if target.startswith(("net:", "user:")):
            found.append(target)
    return sorted(found)


@needs_bwrap
def test_a_loopback_network_holds_only_descriptors(tmp_path: Path) -> None:
    """No process holds the namespace: the holder exits once Roder opened it."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    before = namespace_fds()
    network = LoopbackNetwork.create(bwrap)
    opened = [t for t in namespace_fds() if t not in before]
    assert sorted(t.split(":")[0] for t in opened) == (["net"] if os.geteuid() == 0 else ["net", "user"])
    network.close()
    assert network.closed and namespace_fds() == before


def test_a_network_bubblewrap_cannot_create_says_why(tmp_path: Path) -> None:
    """A bubblewrap that refuses (here a stand-in that exits 1 saying so) is reported in one
    line, and no namespace descriptor is left open."""
    refusing = tmp_path / "bwrap"
    refusing.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    refusing.chmod(0o755)
    before = namespace_fds()
    with pytest.raises(NetworkNamespaceError, match=r"^bubblewrap could not create the network \(bwrap: setting up uid map"):
        LoopbackNetwork.create(str(refusing))
    assert namespace_fds() == before


async def test_background_output_is_redacted_and_the_whole_tree_is_killed(workspace: Path, tmp_path: Path) -> None:
    secret = "sk-proj-" + "Q7" * 20
    mark = marker()
    brokers = make_brokers(workspace, tmp_path / "cache", sandbox="off", env={**os.environ, "OPENAI_API_KEY": secret})
    log = Lines(tmp_path / "task.log")
    command = (
        f"python3 -c 'import time; time.sleep(600)' {mark}-child & "
        f"echo key={secret}; echo started; exec python3 -c 'import time; time.sleep(600)' {mark}"
    )
    process = await brokers.process.spawn(command, output=log)
    await log.wait_for("started")
    # "started" is printed before the shell execs, and the backgrounded child may not have
    # exec'd python yet either: wait until both carry the marker.
    await until(lambda: len(running(mark)) >= 2)
    result = await process.kill()
    assert result.interrupted
    assert_gone(mark)
    text = log.read().text
    assert secret not in text and "key=" in text
    assert secret not in (tmp_path / "task.log").read_text()


def test_task_log_reads_since_an_offset_caps_and_restarts(tmp_path: Path) -> None:
    log = TaskLog(tmp_path / "t.log", cap_bytes=200_000)
    log.write("one\ntwo\n")
    first = log.read()
    assert first.text == "one\ntwo\n" and first.next == 8 and log.last_line == "two"
    log.write("three")
    assert log.read(first.next).text == "three" and log.last_line == "three"
    big = "".join(f"line {i}\n" for i in range(30_000))  # ~300 KB: over the cap and the read limits
    log.write(big)
    whole = log.read(0)
    assert whole.discarded_before > 0 and whole.text.startswith("[output before byte")
    assert "bytes); full output:" in whole.text and whole.text.rstrip().endswith("line 29999")
    assert whole.omitted_bytes > 0 and whole.next == log.total_bytes
    with pytest.raises(ValueError):
        log.read(-1)
    log.close()


def test_only_brokers_that_can_join_a_network_are_bound(workspace: Path, tmp_path: Path, networks: ThreadNetworks) -> None:
    """A wrapper that forwards attributes to a process broker (the ACP editor terminal, an
    embedder's) must not be swapped for the broker it wraps: it is left as it is."""

    class Forwarding:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    brokers = make_brokers(workspace, tmp_path / "cache", sandbox="workspace-write")
    wrapped = dataclasses.replace(brokers, process=Forwarding(brokers.process))  # type: ignore[arg-type]
    assert bind_thread(wrapped, "t", networks.handle("t")).process is wrapped.process
    bound_process = bind_thread(brokers, "t", networks.handle("t")).process
    assert isinstance(bound_process, HostProcessBroker) and bound_process is not brokers.process


@needs_bwrap
async def test_a_planted_nsenter_on_the_path_never_runs(
    workspace: Path, tmp_path: Path, networks: ThreadNetworks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nsenter`` starts a command before bubblewrap does, so it runs unconfined. A folder of
    the workspace on Roder's own PATH (direnv's ``PATH_add bin``, ``./node_modules/.bin``, ``.``)
    holds whatever the agent's commands left there: a program named ``nsenter`` in it must not
    be the one Roder runs, whatever the order of the PATH."""
    outside = tmp_path / "escaped"
    planted = workspace / "bin" / "nsenter"
    planted.parent.mkdir()
    real = shutil.which("nsenter")
    assert real is not None
    planted.write_text(f'#!/bin/sh\ntouch {outside}\nexec {real} "$@"\n')
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)
    netns.nsenter_path.cache_clear()
    try:
        proc = bound(workspace, tmp_path, networks.handle("thread"))
        result = await proc.run("echo inside")
    finally:
        netns.nsenter_path.cache_clear()
    assert "inside" in result.output, result.output
    assert not outside.exists()
