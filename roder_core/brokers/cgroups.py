"""Per-command control groups: a process count and a memory cap that root cannot ignore.

``RLIMIT_NPROC`` is never enforced for the real uid 0 and ``RLIMIT_AS`` is per process, so as
root (and for memory, for everyone) only a cgroup holds a whole command tree: every process it
starts stays in the cgroup (inside the sandbox ``/sys`` is read-only and no capability is left
to move out), ``pids.max`` makes ``fork`` fail past the limit and the memory limit has the kernel
kill what is over it. Roder uses one when it can write a cgroup hierarchy: cgroup v2 with the
``pids`` and ``memory`` controllers delegated, or the v1 ``pids`` and ``memory`` hierarchies
(hybrid layouts). Each command gets its own child group of Roder's own group, removed when it ends.

The memory cap covers swap too: a group that may swap holds its RAM limit while the rest of its
memory goes to swap, so six processes of 64 MiB each live happily under a 200 MiB cap on a
machine with swap. v2 sets ``memory.swap.max`` to 0; v1 caps RAM plus swap (``memsw``) and sets
the group's swappiness to 0, which keeps the group's own reclaim from swapping even where the
kernel keeps no swap accounts. Where neither is possible (v2 without swap accounting) the
sandbox report says the cap leaves swap out.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shlex
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


def _mounts() -> list[tuple[str, Path, set[str]]]:
    """(fstype, mount point, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) > 4 and tail and tail[0] in ("cgroup", "cgroup2"):
                options = set(tail[2].split(",")) if len(tail) > 2 else set()
                found.append((tail[0], Path(fields[4].replace("\\040", " ")), options))
    return found


def _own_paths() -> dict[str, str]:
    """Roder's own cgroup per controller (``""`` is the v2 unified hierarchy)."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _writable_parent(mount: Path, own: str) -> Path | None:
    parent = mount / own.lstrip("/")
    probe = parent / f"roder-probe-{os.getpid()}-{next(_counter)}"
    try:
        probe.mkdir()
    except OSError:
        return None
    with contextlib.suppress(OSError):
        probe.rmdir()
    return parent


@dataclass(frozen=True)
class CgroupSupport:
    """Where Roder can create per-command groups, per limit (None: not here)."""

    version: str = ""
    pids_parent: Path | None = None
    memory_parent: Path | None = None
    reason: str = ""
    #: Whether a group's memory cap keeps it out of swap as well (see the module's docstring).
    swap_capped: bool = False

    @property
    def available(self) -> bool:
        return self.pids_parent is not None or self.memory_parent is not None


@functools.cache
def detect() -> CgroupSupport:
    """Probe once per process which cgroup hierarchies Roder may write."""
    mounts = _mounts()
    own = _own_paths()
    for fstype, point, _options in mounts:
        if fstype == "cgroup2" and point == _ROOT:
            return _detect_v2(point, own.get("", "/"))
    pids = memory = None
    for fstype, point, options in mounts:
        if fstype != "cgroup":
            continue
        if "pids" in options and pids is None:
            pids = _writable_parent(point, own.get("pids", "/"))
        if "memory" in options and memory is None:
            memory = _writable_parent(point, own.get("memory", "/"))
    if pids or memory:
        for parent in {p for p in (pids, memory) if p is not None}:
            _sweep_stale(parent)
        swap_capped = memory is not None and any(
            (memory / name).exists() for name in ("memory.memsw.limit_in_bytes", "memory.swappiness")
        )
        return CgroupSupport("v1", pids, memory, swap_capped=swap_capped)
    if not mounts:
        return CgroupSupport(reason="no cgroup file system is mounted")
    return CgroupSupport(reason="no cgroup hierarchy is writable by this user")


def _detect_v2(mount: Path, own: str) -> CgroupSupport:
    parent = _writable_parent(mount, own)
    if parent is None:
        return CgroupSupport(reason="the cgroup v2 hierarchy is not writable by this user")
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        enabled = set()
    for controller in ("pids", "memory"):
        if controller not in enabled:
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text(f"+{controller}")
                enabled.add(controller)
    pids = parent if "pids" in enabled else None
    memory = parent if "memory" in enabled else None
    if not (pids or memory):
        return CgroupSupport(reason="cgroup v2 is writable but the pids and memory controllers are not delegated")
    _sweep_stale(parent)
    return CgroupSupport("v2", pids, memory, swap_capped=memory is not None and _child_has(parent, "memory.swap.max"))


def _child_has(parent: Path, filename: str) -> bool:
    """Whether a new child group of ``parent`` gets ``filename`` (the root group lacks files its
    children have, so the parent alone cannot tell)."""
    probe = parent / f"roder-probe-{os.getpid()}-{next(_counter)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / filename).exists()
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _sweep_stale(parent: Path) -> None:
    """Remove the empty groups a Roder that died mid-command left behind (``roder-<pid>-<n>``
    whose process is gone)."""
    with contextlib.suppress(OSError), os.scandir(parent) as scan:
        for entry in scan:
            parts = entry.name.split("-")
            if len(parts) != 3 or parts[0] != "roder" or not parts[1].isdigit() or not entry.is_dir():
                continue
            if int(parts[1]) == os.getpid() or Path(f"/proc/{parts[1]}").exists():
                continue
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)


@dataclass
class CommandCgroup:
    """The groups of one command: join them in the child before exec, remove them after."""

    support: CgroupSupport
    processes: int
    memory_mb: int
    groups: list[Path] = field(default_factory=list)
    procs_files: list[str] = field(default_factory=list)

    def create(self) -> None:
        """Make the groups and set their limits (only the limits that are set, > 0)."""
        name = f"roder-{os.getpid()}-{next(_counter)}"
        wanted: dict[Path, list[tuple[str, int]]] = {}
        support = self.support
        if self.processes > 0 and support.pids_parent is not None:
            wanted.setdefault(support.pids_parent, []).append(("pids.max", self.processes))
        if self.memory_mb > 0 and support.memory_parent is not None:
            limit = self.memory_mb * 1024 * 1024
            if support.version == "v2":
                files = [("memory.max", limit), ("memory.swap.max", 0)]
            else:
                files = [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit), ("memory.swappiness", 0)]
            wanted.setdefault(support.memory_parent, []).extend(files)
        for parent, settings in wanted.items():
            group = parent / name
            group.mkdir(exist_ok=True)
            self.groups.append(group)
            for filename, value in settings:
                with contextlib.suppress(FileNotFoundError):  # no swap accounting: see swap_capped
                    (group / filename).write_text(str(value))
            self.procs_files.append(str(group / "cgroup.procs"))

    def join(self) -> None:
        """Move the calling process into the groups (runs in the child between fork and exec,
        where ``CgroupGate`` is not used)."""
        self.add(os.getpid())

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the groups."""
        text = str(pid).encode()
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)

    def kill_members(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process in the groups: the command's whole tree, whatever sessions or
        process groups it made (``setsid`` and double forks included)."""
        for group in self.groups:
            _signal_members(group, sig)

    def holds_only(self, pid: int) -> bool:
        """Whether every group still exists and holds process ``pid`` and nothing else."""
        want = [str(pid)]
        for group in self.groups:
            try:
                if (group / "cgroup.procs").read_text().split() != want:
                    return False
            except OSError:
                return False
        return bool(self.groups)

    def remove(self) -> None:
        """Kill anything left in the groups, then remove them (a few tries while the kernel
        reaps the last processes)."""
        for group in self.groups:
            for _attempt in range(50):
                if not _signal_members(group, signal.SIGKILL):
                    break
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.groups.clear()


def _signal_members(group: Path, sig: int) -> bool:
    """Send ``sig`` to every process in ``group``; False when the group cannot be read (gone)."""
    try:
        members = (group / "cgroup.procs").read_text().split()
    except OSError:
        return False
    for pid in members:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid), sig)
    return True


#: The gate's shell: reads its command line from its standard input (a pipe from Roder) and
#: becomes that command. Roder writes it only once the shell is in the command's groups; a
#: closed pipe (Roder gone, or the move refused) ends it with nothing run.
_GATE_SCRIPT = ". /dev/stdin"


class CgroupGate:
    """Starts a command's process as ``/bin/sh``, held until Roder has moved it into the
    command's groups and handed it the command line.

    The shell waits on a pipe (its standard input); once released it reads the command line
    from it and execs it, which becomes the same process, so everything the command starts
    begins inside the groups, as do the namespaces bubblewrap creates (a cgroup namespace rooted
    at the command's group). The start needs no hook between fork and exec, which would make
    Python fork the whole interpreter instead of using ``vfork``; and since the command line
    comes last, the shell can be started and moved (the move waits for the kernel) before the
    command is known (``next_start``). The line is one brace group, which the shell runs only
    once it has read all of it: a line cut short (Roder gone while writing) runs nothing.

    Use: ``argv`` to start it, ``stdin`` as the child's standard input, ``started`` once it
    runs, ``admit`` (blocking: from a worker thread), ``release`` with the command line (also
    blocking while the shell reads a long one), and ``close`` always."""

    def __init__(self, cgroup: CommandCgroup) -> None:
        self.cgroup = cgroup
        self.stdin, self._script = os.pipe()

    @staticmethod
    def available() -> bool:
        return os.access("/bin/sh", os.X_OK) and os.path.lexists("/dev/stdin")

    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", _GATE_SCRIPT, "roder-cgroup"]

    def started(self) -> None:
        """The child holds its end: close Roder's copy, so the shell sees the end of the pipe
        should Roder go away."""
        with contextlib.suppress(OSError):
            os.close(self.stdin)
        self.stdin = -1

    def admit(self, pid: int) -> None:
        """Move the held shell (``pid``) into the groups. Raises ``OSError`` when the move
        failed: the shell is still held; ``close`` ends it unrun."""
        self.cgroup.add(pid)

    def release(self, argv: list[str]) -> None:
        """Let the admitted shell run ``argv``, its standard input ``/dev/null``."""
        line = f"{{ exec {shlex.join(argv)} </dev/null\n}}\n".encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self._script, view) :]
        os.close(self._script)
        self._script = -1

    def close(self) -> None:
        for fd in (self.stdin, self._script):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.stdin = self._script = -1


def swap_active() -> bool:
    """Whether the machine has swap on (``/proc/swaps`` lists a device or file)."""
    try:
        return len(Path("/proc/swaps").read_text().splitlines()) > 1
    except OSError:
        return False


def describe(support: CgroupSupport) -> str:
    if not support.available:
        return support.reason
    parts = []
    if support.pids_parent is not None:
        parts.append(f"pids under {support.pids_parent}")
    if support.memory_parent is not None:
        uncapped = not support.swap_capped and swap_active()
        swap = " (swap not capped: this kernel keeps no swap accounts)" if uncapped else ""
        parts.append(f"memory under {support.memory_parent}{swap}")
    return f"cgroup {support.version}: " + ", ".join(parts)
