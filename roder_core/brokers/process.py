"""The process broker: runs commands for tools, scrubbed, limited, sandboxed and killable.

Every command gets an environment without secrets (unless granted by name), resource limits
(CPU time, address space, file size, process count), a working folder inside the workspace, its
own session and process group, and the sandbox backend (see ``sandbox``). Output is streamed,
merged (stdout + stderr) and capped: over 2000 lines or 50 KB the result keeps the head and the
tail and the whole output is spilled to a file. On timeout, on cancellation (turn interrupt) and
when the command ends, the whole process group is killed, so nothing it started lingers.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import resource
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Unpack

from roder_core.brokers import BrokerDenied, OutputSink, ProcessResult, next_action, seccomp, tree_guard
from roder_core.brokers.cgroups import CgroupGate, CgroupSupport, CommandCgroup
from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.command_broker import CommandBroker, CommandEnd, CommandGrants, show_command
from roder_core.brokers.command_output import CommandOutput, RedactedSink
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.netns import LoopbackNetwork, ThreadNetwork, entering, nsenter_path, shared_network_problem
from roder_core.brokers.next_start import HeldCommand, NextStart
from roder_core.brokers.own_folders import OwnFolders, thread_folder
from roder_core.brokers.sandbox import Confinement, SandboxStatus, bubblewrap_argv, path_folders_under_private_tmp
from roder_core.brokers.secret_paths import SecretAliased, default_deny_read, masks
from roder_core.brokers.self_protection import capability_drop_argv, drop_ptrace_capability, mark_non_dumpable

#: Walks after a command while its repairs keep finding the tree changed under them.
_SETTLE_ROUNDS = 3
#: After the main process exits, how long background children may keep writing before the
#: group is killed.
EXIT_GRACE = 0.5


@dataclass(frozen=True)
class ResourceLimits:
    cpu_seconds: int = 600
    #: 0 means unlimited.
    address_space_mb: int = 16_384
    file_size_mb: int = 1_024
    #: How many processes a command may run at once (a cgroup's ``pids.max``; without one,
    #: ``RLIMIT_NPROC`` on top of those you already run, which the kernel ignores for root).
    processes: int = 512
    #: Memory of a command and everything it starts, together (needs a writable cgroup).
    memory_mb: int = 8_192

    def values(self, existing_processes: int) -> list[tuple[int, str, int]]:
        """(rlimit, bash ulimit flag, value in ulimit units), capped at the current hard limits."""
        mib = 1024 * 1024
        wanted = [
            (resource.RLIMIT_CPU, "-t", self.cpu_seconds, 1),
            (resource.RLIMIT_AS, "-v", self.address_space_mb * mib, 1024),
            (resource.RLIMIT_FSIZE, "-f", self.file_size_mb * mib, 1024),
            (resource.RLIMIT_NPROC, "-u", existing_processes + self.processes if self.processes else 0, 1),
        ]
        out = []
        for which, flag, value, unit in wanted:
            if value <= 0:
                continue
            _soft, hard = resource.getrlimit(which)
            capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
            out.append((which, flag, capped // unit))
        return out

    def shell_prefix(self, existing_processes: int) -> str:
        """``ulimit`` commands for bash (in the child, so spawning needs no fork hook)."""
        return " ".join(f"ulimit {flag} {value};" for _w, flag, value in self.values(existing_processes))

    def apply(self, existing_processes: int) -> None:
        """Set the limits in the child between fork and exec (used only when bash is missing)."""
        units = {"-t": 1, "-v": 1024, "-f": 1024, "-u": 1}
        for which, flag, value in self.values(existing_processes):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value * units[flag], value * units[flag]))


def count_user_processes(uid: int | None = None) -> int:
    """Processes owned by ``uid`` (RLIMIT_NPROC counts them all, not just a command's)."""
    uid = os.getuid() if uid is None else uid
    count = 0
    with contextlib.suppress(OSError), os.scandir("/proc") as scan:
        for entry in scan:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        count += 1
    return count


class HostProcessBroker(CommandBroker):
    """``ProcessBroker`` for one workspace and one extension's grants."""

    def __init__(
        self,
        fs: WorkspaceFileSystem,
        *,
        sandbox: SandboxStatus,
        spill_dir: Path,
        quarantine_dir: Path,
        env: Mapping[str, str] | None = None,
        limits: ResourceLimits | None = None,
        network: bool = False,
        deny_read: Iterable[Path] | None = None,
        allow_unix_sockets: bool = False,
        cgroups: CgroupSupport | None = None,
        shown: Iterable[Path] = (),
        own_folders: OwnFolders | None = None,
        **grants: Unpack[CommandGrants],
    ) -> None:
        super().__init__(
            fs, env=os.environ if env is None else env, spill_dir=spill_dir, shell=shutil.which("bash") or "/bin/sh", **grants
        )
        self._fs = fs
        #: Folders outside the workspace commands may read (installed plugins' code, whose
        #: skills run their own scripts); bound read-only, so visible even under a private /tmp.
        self._shown = tuple(shown)
        #: Commands keep the network inside the sandbox (``[network] commands``).
        self._network = network
        self.sandbox = sandbox
        self.sandbox_level = "blocked" if sandbox.blocked else sandbox.effective
        self._quarantine_dir = quarantine_dir
        self._limits = limits or ResourceLimits()
        home = Path(self._env.get("HOME") or os.path.expanduser("~"))
        #: Candidates for masking inside the sandbox (``secret_paths``); existing ones are masked.
        self._deny_read = list(default_deny_read(home) if deny_read is None else deny_read)
        self._allow_unix_sockets = allow_unix_sockets
        self._cgroups = cgroups
        #: Roder's folders, hidden in the sandbox but for the bound thread's own (``own_folders``).
        self._own = own_folders or OwnFolders()
        #: The thread whose loopback network sandboxed commands share and whose own files they
        #: see (``for_thread``); output spills into that thread's folder.
        self._thread_network: ThreadNetwork | None = None
        self._thread_id: str | None = None
        if sandbox.effective == "off":
            mark_non_dumpable()  # no sandbox between Roder and its children: keep /proc/<pid> closed

    def _blocked(self) -> tuple[str, str] | None:
        if not self.sandbox.blocked:
            return None
        return "sandbox unavailable", self.sandbox.notice or "the requested sandbox is unavailable"

    def _command_cgroup(self) -> CommandCgroup | None:
        """A cgroup for the next command when one is writable here (see ``cgroups``)."""
        limits = self._limits
        if limits.processes <= 0 and limits.memory_mb <= 0:
            return None
        support = self._cgroups if self._cgroups is not None else detect_cgroups()
        if not support.available:
            return None
        cgroup = CommandCgroup(support, limits.processes, limits.memory_mb)
        try:
            cgroup.create()
        except OSError as exc:
            # Fail closed: the limits were promised (the sandbox report says they hold), so a
            # command does not run without them.
            cgroup.remove()
            raise self._limits_refused(exc) from exc
        return cgroup

    def _limits_refused(self, exc: OSError) -> BrokerDenied:
        """The refusal of a command whose cgroup could not be made or joined (audited)."""
        self._record("process.denied", reason=f"cgroup limits could not be set: {exc}")
        return BrokerDenied(
            f"the command's process and memory limits could not be set ({exc}); it was not run. "
            "Set [limits] processes = 0 and memory_mb = 0 to run commands without them."
        )

    def which(self, program: str) -> str | None:
        """Where ``program`` is on the PATH commands get (the sandbox sees the same files)."""
        return shutil.which(program, path=self._env.get("PATH", os.defpath))

    def for_thread(self, thread_id: str, network: ThreadNetwork | None) -> HostProcessBroker:
        """This broker for one thread: its sandboxed commands share ``network`` (``netns``),
        its output spills into the thread's own folder, and of Roder's folders its commands see
        that thread's files alone (``own_folders``)."""
        bound = copy.copy(self)
        bound._thread_network = network
        bound._thread_id = thread_id
        return bound

    @property
    def spill_dir(self) -> Path:
        """Where output too long for a result is spilled: the bound thread's own folder."""
        return thread_folder(self._spill_dir, self._thread_id)

    async def _shared_network(self, level: str) -> LoopbackNetwork | None:
        """The thread's loopback network for a sandboxed command, or None: the command then
        gets a private one of its own (no thread bound, host network granted, or unsupported)."""
        if self._thread_network is None or self._network or level == "off" or not self.sandbox.bwrap:
            return None
        probe_argv = tuple(
            bubblewrap_argv(self.sandbox.bwrap, self.sandbox.probe, Confinement(level, (), Path("/"), join_network=True))
        )
        problem = await shared_network_problem(probe_argv, self._shell)
        if problem is None:
            try:
                return await self._thread_network.get(self.sandbox.bwrap)
            except OSError as exc:
                problem = str(exc)
        if not self._thread_network.notice_given:
            self._thread_network.notice_given = True
            self._record("process.network", shared=False, reason=problem)
        return None

    async def _launch(
        self,
        command: str | list[str],
        *,
        cwd: Path | None,
        timeout: float | None,
        env: dict[str, str] | None,
        stdout: OutputSink,
        stderr: OutputSink | None,
        read_only: bool = False,
    ) -> _Launched:
        """Check, confine and start a command whose output flows into ``stdout`` (and
        ``stderr``, when given its own sink). ``timeout`` raises the CPU-time limit to match.
        ``read_only`` (a search of Roder's own): under bubblewrap the command gets the
        ``read-only`` level, so nothing in the tree can change and the guard's walks are
        skipped; without bubblewrap it is guarded as any command is."""
        argv, workdir = self._admit(command, cwd)
        level = self.sandbox.effective
        if read_only and level == "workspace-write" and self.sandbox.bwrap:
            level = "read-only"
        probe = self.sandbox.probe
        in_userns = level != "off" and self.sandbox.bwrap is not None and probe is not None and probe.userns
        cpu = self._limits.cpu_seconds
        limits = self._limits
        if timeout is not None and cpu > 0:
            limits = replace(limits, cpu_seconds=max(cpu, int(timeout) + 5))
        roots = self._fs.roots
        # walked in a thread: a large tree takes a while, the event loop keeps going
        guarded = not next_action.writes_are_allowed()
        walk = functools.partial(tree_guard.scan, roots, next_action=guarded)
        guard = await asyncio.to_thread(walk) if level != "read-only" else None
        if guard is not None and guard.unlistable:
            folder, why = guard.unlistable[0]
            reason = f"Roder cannot list {self._fs.display(folder)} ({why}) to protect what is in it"
            self._record("process.denied", reason=reason)
            raise BrokerDenied(f"{reason}; the command was not run. Make the folder readable, or remove it.")
        too_long = [p for p in guard.readonly_paths() if len(str(p)) >= tree_guard.BIND_MAX] if guard else []
        if too_long and level != "off":
            reason = f"a protected entry lies at a path too long to mount read-only ({str(too_long[0])[:80]}...)"
            self._record("process.denied", reason=reason)
            raise BrokerDenied(f"{reason}; the command was not run. Move it, or remove it.")
        network = await self._shared_network(level)
        bwrapped = level != "off" and self.sandbox.bwrap is not None
        child_env, dropped = self.child_env(env)
        separate = stderr is not None
        # The command's process is a held shell (``next_start``): made ahead for this thread
        # while the model thought, or started now; either way moved into its cgroup before it
        # gets its command line. Where a hook between fork and exec is still needed (no bash,
        # no ``nsenter`` or ``setpriv``, no ``/bin/sh``), the command starts directly instead.
        # unconfined as root: the capabilities are dropped by a ``setpriv`` prefix, or else a hook
        drop = await capability_drop_argv() if not bwrapped and os.geteuid() == 0 else None
        spec = self._start_spec(level, bwrapped, network, workdir, child_env, separate, drop)
        held = await self._held(spec) if spec is not None else None
        try:
            cgroup = held.cgroup if held is not None else self._command_cgroup()
            if cgroup is not None and cgroup.support.pids_parent is not None:
                limits = replace(limits, processes=0)  # the cgroup counts them, for root too
            # In its own user namespace a command's processes are counted apart from yours
            # (RLIMIT_NPROC is checked per namespace), so the limit is the command's alone.
            existing = 0 if in_userns or limits.processes <= 0 else count_user_processes()
            hooks: list[Callable[[], None]] = []
            if cgroup is not None and held is None:
                hooks.append(cgroup.join)
            if self._shell.endswith("bash"):
                # bash sets the limits and execs the command: cheaper than a fork hook in Python
                argv = [self._shell, "-c", f'{limits.shell_prefix(existing)} exec "$@"', "roder-limits", *argv]
            else:
                hooks.append(functools.partial(limits.apply, existing))
            seccomp_fd: int | None = None
            passed: list[int] = []
            if bwrapped and self.sandbox.bwrap:
                if held is not None:
                    seccomp_fd = held.seccomp_fd
                elif probe is not None and probe.seccomp:
                    seccomp_fd = seccomp.filter_fd(allow_unix_sockets=self._allow_unix_sockets)
                try:
                    masked = tuple(masks(self._deny_read, roots))
                except SecretAliased as exc:
                    self._record("process.denied", reason=str(exc))
                    raise
                plan = Confinement(
                    level=level,
                    roots=roots,
                    cwd=workdir,
                    readonly=tuple(guard.readonly_paths()) if guard is not None else (),
                    masked=masked,
                    shown=(
                        *(p for p in self._shown if p.is_dir()),
                        *self._own.for_thread(self._thread_id),
                        *path_folders_under_private_tmp(child_env.get("PATH", ""), tuple(self._own.existing())),
                    ),
                    hidden=tuple(self._own.existing()),
                    network=self._network,
                    seccomp_fd=seccomp_fd,
                    join_network=network is not None,
                )
                argv = bubblewrap_argv(self.sandbox.bwrap, probe, plan) + argv
                if seccomp_fd is not None and held is None:
                    passed.append(seccomp_fd)
                if network is not None:
                    entry = entering(network, argv, self._shell)
                    if entry is None:
                        hooks.append(network.enter)  # after joining the cgroup: that needs the host's view
                    else:
                        argv, network_fds = entry
                        passed += network_fds
            elif os.geteuid() == 0:
                if drop is None:
                    hooks.append(drop_ptrace_capability)
                else:
                    argv = [*drop, *argv]
            # a held start needs none (``_start_spec`` holds a command only where that is so)
            assert held is None or not hooks, hooks
        except BaseException:
            if held is not None:
                await asyncio.shield(asyncio.to_thread(held.discard))
            raise
        self._started(command, workdir, level, dropped, timeout=timeout, shared_network=network is not None)
        started = time.monotonic()
        released: asyncio.Future[None] | None = None
        if held is None:
            proc, read_fd, err_read_fd = await _start_direct(
                argv, workdir, child_env, separate, hooks, tuple(passed), seccomp_fd, cgroup
            )
        else:
            proc, read_fd, err_read_fd = held.proc, held.read_fd, held.err_read_fd
            released = asyncio.ensure_future(_release(held, argv))
        pipes = asyncio.ensure_future(_pipe_pumps(read_fd, stdout, err_read_fd if separate else None, stderr))
        gate = held.gate if held is not None else None
        try:
            if released is not None:
                await asyncio.shield(released)
            transports, pumps = await asyncio.shield(pipes)
        except BaseException as exc:
            # Cancelled (a turn interrupt) after the command started but before this call owned
            # its pipes, or it could not be moved into its cgroup (it is still held then, with
            # nothing run): the command and everything it started end first. Only a failed move
            # is a refusal: one that failed because an interrupt killed the held shell stays the
            # interrupt (else the turn would go on as if the tool had been refused).
            await asyncio.shield(_abandon(proc, pipes, level, cgroup, released, gate))
            if (
                isinstance(exc, OSError)
                and released is not None
                and released.done()
                and not released.cancelled()
                and released.exception() is exc
            ):
                raise self._limits_refused(exc) from exc
            raise
        if gate is not None:
            gate.close()
        reader = asyncio.ensure_future(asyncio.gather(*pumps))
        if guard is not None:
            tree_guard.RUNNING.append(guard)
        return _Launched(proc, reader, transports, guard, cgroup, level, started, roots, spec if held is not None else None)

    def _start_spec(
        self,
        level: str,
        bwrapped: bool,
        network: LoopbackNetwork | None,
        workdir: Path,
        child_env: dict[str, str],
        separate: bool,
        drop: tuple[str, ...] | None,
    ) -> _StartSpec | None:
        """What a held start of this command is made with, or None where it cannot be held:
        no cgroup here (nothing to move it into), or a hook between fork and exec is needed
        (``drop``, ``capability_drop_argv``'s prefix, is None for an unconfined root command)."""
        limits = self._limits
        if limits.processes <= 0 and limits.memory_mb <= 0:
            return None
        support = self._cgroups if self._cgroups is not None else detect_cgroups()
        if not support.available or not CgroupGate.available() or not self._shell.endswith("bash"):
            return None
        if network is not None and nsenter_path() is None:
            return None
        if not bwrapped and os.geteuid() == 0 and drop is None:
            return None
        probe = self.sandbox.probe
        wants_seccomp = bwrapped and probe is not None and probe.seccomp
        return _StartSpec(
            workdir=workdir,
            env=tuple(child_env.items()),
            separate=separate,
            seccomp=self._allow_unix_sockets if wants_seccomp else None,
            network=network,
            processes=limits.processes,
            memory_mb=limits.memory_mb,
            support=support,
        )

    async def _held(self, spec: _StartSpec) -> HeldCommand:
        """The thread's shell made ahead when it is still fit for this command (``next_start``),
        else one started now (its cgroup made; a cgroup that cannot be made refuses the command)."""
        slot = self._thread_network
        if slot is not None and slot.next_start is not None:
            ahead, slot.next_start = slot.next_start, None
            try:
                held = await ahead.take(spec)
            except BaseException:
                ahead.close()
                raise
            if held is not None:
                return held
        cgroup = self._command_cgroup()
        assert cgroup is not None  # the spec said a cgroup is writable and limits are set
        return await _start_held(spec, cgroup)

    async def _make_next(self, spec: _StartSpec) -> None:
        """Make the thread's next command's held shell now (``next_start``): started here (a
        start is never left half done in the background, where a loop that ends would cancel
        it), moved into its cgroup by a worker thread while the model thinks."""
        slot = self._thread_network
        if slot is None or slot.ended or (spec.network is not None and spec.network.closed):
            return
        if slot.next_start is not None:
            slot.next_start.close()
            slot.next_start = None
        held = await _made_ahead(spec)
        if held is None:
            return
        if slot.ended:  # the thread ended meanwhile
            await asyncio.to_thread(held.discard)
            return
        if slot.next_start is not None:  # another command of the thread made one meanwhile
            slot.next_start.close()
        slot.next_start = NextStart(held)

    async def _settle(self, launched: _Launched) -> list[str]:
        """After the command ended: close its pipes, remove its cgroup and put back what it did
        to protected paths; returns what was quarantined. Then the thread's next command is
        made (``next_start``): only now, since a move into a cgroup holds the kernel's cgroup
        lock through its grace period, which the removal would wait for, and its start would
        hold up the walks."""
        for pipe in launched.transports:
            pipe.close()
        if launched.cgroup is not None:
            await asyncio.to_thread(launched.cgroup.remove)
        quarantined = await self._put_back(launched)
        if launched.spec is not None:
            await self._make_next(launched.spec)
        return quarantined

    async def _put_back(self, launched: _Launched) -> list[str]:
        """Quarantine what the command did to protected paths (``tree_guard``)."""
        if launched.guard is None:
            return []
        with contextlib.suppress(ValueError):
            tree_guard.RUNNING.remove(launched.guard)
        quarantined: list[str] = []
        # again while something moved under the repair (a running task swapping folders), so
        # what a refused move left behind is looked for where it went
        for _round in range(_SETTLE_ROUNDS):
            walk = functools.partial(tree_guard.scan, launched.roots, next_action=launched.guard.next_action)
            after = await asyncio.to_thread(walk)
            found = tree_guard.changed_while_running(launched.guard, after)
            lines = tree_guard.quarantine(found, launched.guard, self._quarantine_dir) if found else []
            quarantined += lines
            if all(" -> " in line or ": renamed to " in line for line in lines):
                break
        if quarantined:
            self._record("process.quarantine", paths=quarantined)
        return quarantined

    async def _execute(
        self,
        command: str | list[str],
        *,
        cwd: Path | None,
        timeout: float,
        env: dict[str, str] | None,
        output: CommandOutput,
        read_only: bool,
    ) -> CommandEnd:
        stderr = output.stderr if output.separate else None
        launched = await self._launch(
            command, cwd=cwd, timeout=timeout, env=env, stdout=output.stdout, stderr=stderr, read_only=read_only
        )
        proc, reader = launched.proc, launched.reader
        timed_out = False
        try:
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except TimeoutError:
                timed_out = True
                await _terminate(proc, launched.cgroup)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(EXIT_GRACE):
                        await asyncio.shield(reader)
            # Sandboxed, the PID namespace already took every straggler with it.
            _kill_group(proc.pid, sweep_session=launched.level == "off", cgroup=launched.cgroup)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await asyncio.shield(reader)
        except asyncio.CancelledError:
            await asyncio.shield(_cleanup_cancelled(proc, reader, output, launched.cgroup))
            # an interrupted command is checked like any other: what it made is still there
            quarantined = await asyncio.shield(self._settle(launched))
            self._interrupted(command, launched.elapsed_ms(), quarantined=quarantined)
            raise
        finally:
            if not reader.done():
                reader.cancel()
        quarantined = await self._settle(launched)
        return CommandEnd(proc.returncode, timed_out, launched.elapsed_ms(), launched.level, quarantined)

    async def spawn(self, command: str | list[str], *, output: OutputSink, cwd: Path | None = None) -> BackgroundProcess:
        """Start a long-running command and return at once. Its merged, redacted output flows
        into ``output``; it has no timeout (resource limits still hold) and ends when it exits
        or is killed (``BackgroundProcess.kill``), taking everything it started with it."""
        sink = RedactedSink(output, self._redactor.byte_stream())
        launched = await self._launch(command, cwd=cwd, timeout=None, env=None, stdout=sink, stderr=None)
        return BackgroundProcess(self, launched, sink, show_command(command))


@dataclass
class _Launched:
    """A started command and what must be cleaned up after it."""

    proc: asyncio.subprocess.Process
    reader: asyncio.Future[Any]
    transports: list[asyncio.BaseTransport]
    guard: tree_guard.TreeGuard | None
    cgroup: CommandCgroup | None
    level: str
    started: float
    roots: tuple[Path, ...]
    #: How it was started held (``next_start``): the thread's next command is made alike.
    spec: _StartSpec | None = None

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


class BackgroundProcess:
    """A command started by ``HostProcessBroker.spawn``: wait for it, or kill it and all it started."""

    def __init__(self, broker: HostProcessBroker, launched: _Launched, sink: RedactedSink, command: str) -> None:
        self._broker = broker
        self._launched = launched
        self._sink = sink
        self._command = command
        self._result: ProcessResult | None = None
        self._killed = False

    @property
    def pid(self) -> int:
        return self._launched.proc.pid

    @property
    def sandbox(self) -> str:
        return self._launched.level

    async def wait(self) -> ProcessResult:
        """Until the command exits (or is killed); cancelling the wait kills it."""
        if self._result is not None:
            return self._result
        launched = self._launched
        try:
            await launched.proc.wait()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EXIT_GRACE):
                    await asyncio.shield(launched.reader)
        except asyncio.CancelledError:
            await asyncio.shield(self.kill())
            raise
        return await asyncio.shield(self._finish())

    async def kill(self) -> ProcessResult:
        """SIGTERM to the whole group, a moment to clean up, then SIGKILL; waits for the end."""
        self._killed = True
        if self._launched.proc.returncode is None:
            await _terminate(self._launched.proc, self._launched.cgroup)
        return await self._finish()

    async def _finish(self) -> ProcessResult:
        if self._result is not None:
            return self._result
        launched = self._launched
        _kill_group(launched.proc.pid, sweep_session=launched.level == "off", cgroup=launched.cgroup)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await asyncio.shield(launched.reader)
        if not launched.reader.done():
            launched.reader.cancel()
        self._sink.flush()
        quarantined = await self._broker._settle(launched)
        if self._result is None:
            self._result = self._broker._background_ended(
                self._command,
                exit_code=launched.proc.returncode,
                killed=self._killed,
                duration_ms=launched.elapsed_ms(),
                sandbox=launched.level,
                quarantined=quarantined,
            )
        return self._result


def _chain(hooks: list[Callable[[], None]]) -> Callable[[], None]:
    """One ``preexec_fn`` running each hook in order."""

    def run_all() -> None:
        for hook in hooks:
            hook()

    return run_all


async def _pipe_pump(read_fd: int, collector: OutputSink) -> tuple[asyncio.BaseTransport, asyncio.Task[None]]:
    """Feed a pipe's bytes into ``collector`` from a task; returns the transport and the task."""
    stream = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
    )
    return transport, asyncio.create_task(_pump(stream, collector))


async def _pipe_pumps(
    read_fd: int, stdout: OutputSink, err_read_fd: int | None, stderr: OutputSink | None
) -> tuple[list[asyncio.BaseTransport], list[asyncio.Task[None]]]:
    """Pumps for a command's stdout pipe and, when it has one of its own, its stderr pipe."""
    transport, pump = await _pipe_pump(read_fd, stdout)
    transports, pumps = [transport], [pump]
    if err_read_fd is not None and stderr is not None:
        err_transport, err_pump = await _pipe_pump(err_read_fd, stderr)
        transports.append(err_transport)
        pumps.append(err_pump)
    return transports, pumps


@dataclass(frozen=True)
class _StartSpec:
    """Everything a command's process is started with but its command line: a shell made ahead
    (``next_start``) serves a command only when its spec is equal."""

    workdir: Path
    env: tuple[tuple[str, str], ...]
    separate: bool
    #: None: no seccomp program; else the program's ``allow_unix_sockets``.
    seccomp: bool | None
    #: The thread's network (compared by identity: a network made again is another one).
    network: LoopbackNetwork | None
    processes: int
    memory_mb: int
    support: CgroupSupport


async def _start_held(spec: _StartSpec, cgroup: CommandCgroup) -> HeldCommand:
    """Start the held shell of ``spec`` (``CgroupGate``) and begin moving it into ``cgroup``
    in a worker thread. On failure the cgroup is removed and nothing is left open."""
    try:
        gate = CgroupGate(cgroup)
    except BaseException:
        cgroup.remove()
        raise
    read_fd = err_read_fd = write_fd = err_write_fd = -1
    seccomp_fd: int | None = None
    try:
        read_fd, write_fd = os.pipe()
        err_read_fd, err_write_fd = os.pipe() if spec.separate else (-1, write_fd)
        if spec.seccomp is not None:
            seccomp_fd = seccomp.filter_fd(allow_unix_sockets=spec.seccomp)
        passed = [seccomp_fd] if seccomp_fd is not None else []
        if spec.network is not None:
            nsenter = nsenter_path()
            assert nsenter is not None  # the spec is made only where it is
            passed += spec.network.entry_argv(nsenter)[1]
        proc = await asyncio.create_subprocess_exec(
            *gate.argv(),
            stdin=gate.stdin,
            stdout=write_fd,
            stderr=err_write_fd,
            cwd=str(spec.workdir),
            env=dict(spec.env),
            start_new_session=True,
            pass_fds=tuple(passed),
        )
    except BaseException:
        for fd in (read_fd, err_read_fd):
            if fd >= 0:
                os.close(fd)
        gate.close()
        cgroup.remove()
        raise
    finally:
        for fd in {write_fd, err_write_fd, -1 if seccomp_fd is None else seccomp_fd} - {-1}:
            os.close(fd)
        gate.started()
    admitted = asyncio.ensure_future(asyncio.to_thread(gate.admit, proc.pid))
    admitted.add_done_callback(_seen)  # a shell ended unused never asks how its move went
    return HeldCommand(spec, proc, gate, cgroup, read_fd, err_read_fd, seccomp_fd, admitted, asyncio.get_running_loop())


async def _made_ahead(spec: _StartSpec) -> HeldCommand | None:
    """A thread's next command's shell, or None where it cannot be made now (the command then
    makes its own, and is refused as ever if its cgroup cannot be made)."""
    cgroup = CommandCgroup(spec.support, spec.processes, spec.memory_mb)
    try:
        cgroup.create()
    except OSError:
        cgroup.remove()
        return None
    try:
        return await _start_held(spec, cgroup)
    except OSError:
        return None


async def _start_direct(
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    separate: bool,
    hooks: list[Callable[[], None]],
    passed: tuple[int, ...],
    seccomp_fd: int | None,
    cgroup: CommandCgroup | None,
) -> tuple[asyncio.subprocess.Process, int, int]:
    """Start ``argv`` at once, with ``hooks`` run in the child (where a held start cannot be
    used): the process and the read ends of its output pipes (-1: stderr is merged)."""
    # Our own pipe, not asyncio's: asyncio's wait() would also wait for every holder of the
    # pipe (background children) to close it, and a finished command must not wait for them.
    read_fd, write_fd = os.pipe()
    err_read_fd, err_write_fd = os.pipe() if separate else (-1, write_fd)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=err_write_fd,
            cwd=str(workdir),
            env=env,
            start_new_session=True,
            preexec_fn=_chain(hooks) if hooks else None,
            pass_fds=passed,
        )
    except BaseException:
        os.close(read_fd)
        if separate:
            os.close(err_read_fd)
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        os.close(write_fd)
        if separate:
            os.close(err_write_fd)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    return proc, read_fd, err_read_fd


def _seen(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


async def _release(held: HeldCommand, argv: list[str]) -> None:
    """Once the held shell is in its cgroup, hand it ``argv`` (``CgroupGate``)."""
    await asyncio.shield(held.admitted)
    await asyncio.to_thread(held.gate.release, argv)


async def _abandon(
    proc: asyncio.subprocess.Process,
    pipes: asyncio.Future[tuple[list[asyncio.BaseTransport], list[asyncio.Task[None]]]],
    level: str,
    cgroup: CommandCgroup | None,
    released: asyncio.Future[None] | None,
    gate: CgroupGate | None,
) -> None:
    """End a command whose launch was cancelled or failed: its group killed, reaped, its pipes
    closed (a command still held by its gate ends there, unrun)."""
    _kill_group(proc.pid, sweep_session=level == "off", cgroup=cgroup)
    await proc.wait()
    if released is not None:
        with contextlib.suppress(BaseException):
            await released
    if gate is not None:
        gate.close()
    with contextlib.suppress(BaseException):
        transports, pumps = await pipes
        for pump in pumps:
            pump.cancel()
        for pipe in transports:
            pipe.close()
    if cgroup is not None:
        cgroup.remove()


async def _pump(stream: asyncio.StreamReader, collector: OutputSink) -> None:
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        collector.feed(chunk)


def _kill_group(pgid: int, sig: int = signal.SIGKILL, *, sweep_session: bool = True, cgroup: CommandCgroup | None = None) -> None:
    """Kill the command's process group and, with ``sweep_session``, the rest of its tree:
    off-sandbox commands may create new groups with job control. With a cgroup that is every
    process in it (a new session or a double fork stays inside); without one, what is left in
    its session (a new session escapes that). Sandboxed, bubblewrap's PID namespace takes the
    rest with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    if sweep_session and cgroup is not None:
        cgroup.kill_members(sig)
        return
    for pid in _session_members(pgid) if sweep_session else ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _session_members(sid: int) -> list[int]:
    members: list[int] = []
    with contextlib.suppress(OSError), os.scandir("/proc") as scan:
        for entry in scan:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            # fields after the command name: state ppid pgrp session ...
            fields = raw[raw.rfind(b")") + 2 :].split()
            if len(fields) > 3 and int(fields[3]) == sid and int(entry.name) != os.getpid():
                members.append(int(entry.name))
    return members


async def _terminate(proc: asyncio.subprocess.Process, cgroup: CommandCgroup | None) -> None:
    """Timeout: SIGTERM to the group, a moment to clean up, then SIGKILL."""
    _kill_group(proc.pid, signal.SIGTERM, cgroup=cgroup)
    try:
        async with asyncio.timeout(1.0):
            await proc.wait()
    except TimeoutError:
        pass
    _kill_group(proc.pid, signal.SIGKILL, cgroup=cgroup)
    await proc.wait()


async def _cleanup_cancelled(
    proc: asyncio.subprocess.Process, reader: asyncio.Future[Any], output: CommandOutput, cgroup: CommandCgroup | None
) -> None:
    _kill_group(proc.pid, signal.SIGKILL, cgroup=cgroup)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await reader
    output.close()
