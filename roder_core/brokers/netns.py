"""One private, loopback-only network per thread, which that thread's sandboxed commands share.

Each sandboxed command used to get a network namespace of its own, so a dev server started in
the background could never be reached by the next command. Now the first sandboxed command of
a thread creates a ``LoopbackNetwork``: bubblewrap, the sandbox's own, starts a holder with
``--unshare-net`` (and ``--unshare-user`` when Roder is not root, mapping only the user's own
ids), which brings ``lo`` up, and holds it before its command (``--block-fd``) while Roder
opens the holder's ``/proc/<pid>/ns/*`` files (the pid from ``--info-fd``); then Roder lets it
run ``true`` and exit. The open descriptors keep the namespace alive, with no process holding
it: nothing is left to orphan. (A Python helper did this before: its interpreter start was
five times the CPU of bubblewrap's, paid by every rollout of a batch.)

Every later command of the thread (and of its child threads: subagents, agent tasks) enters
that namespace before bubblewrap starts: util-linux ``nsenter`` comes first on its command line
(``entering``; Roder passes it the descriptors and the limits prefix closes them before the
command), or, where ``nsenter`` or bash is missing, ``setns`` between fork and exec (which
makes Python fork the whole interpreter instead of ``vfork``). Bubblewrap then wraps it exactly
as before, minus ``--unshare-net``: its own user, PID, IPC, UTS and mount namespaces, no
capabilities, the seccomp filter (which refuses ``setns`` and ``unshare``), the tree guard's
read-only binds and the write rules all still apply per command. The namespace has no
interface but ``lo``, so the host network stays unreachable; another thread's namespace is
reachable only through its descriptors, which live in Roder alone (close-on-exec) and which a
command, in its own PID namespace and without capabilities, cannot open or join.

When the thread closes, Roder closes the descriptors; processes still inside (tasks the user
kept) keep the namespace until they end.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace

from roder_core.brokers import Brokers
from roder_core.brokers.host_programs import SYSTEM_FOLDERS
from roder_core.brokers.next_start import NextStart

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


class NetworkNamespaceError(OSError):
    """A loopback network namespace could not be created or entered here."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int, kind: int) -> None:
    if _libc().setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _child_pid(info: bytes) -> int | None:
    """The holder's pid from bubblewrap's ``--info-fd`` report, or None if it has none."""
    try:
        pid = json.loads(info).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class LoopbackNetwork:
    """A network namespace with only ``lo`` (up), held by open namespace descriptors."""

    def __init__(self, net_fd: int, user_fd: int | None) -> None:
        self._net_fd = net_fd
        self._user_fd = user_fd

    @classmethod
    def create(cls, bwrap: str) -> LoopbackNetwork:
        """Blocking (it starts bubblewrap and waits for it): call it from a worker thread."""
        true = shutil.which("true") or "/bin/true"
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        argv = [bwrap, "--unshare-net", *(["--unshare-user"] if os.geteuid() != 0 else [])]
        argv += ["--info-fd", str(info_write), "--block-fd", str(block_read), "--bind", "/", "/", "--", true]
        try:
            holder = subprocess.Popen(
                argv,
                pass_fds=(info_write, block_read),
                env={"PATH": os.defpath},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (info_read, info_write, block_read, block_write):
                os.close(fd)
            raise NetworkNamespaceError(exc.errno, f"could not start bubblewrap for the network: {exc}") from exc
        os.close(info_write)
        os.close(block_read)
        fds: list[int] = []
        problem: str | None = None
        try:
            with os.fdopen(info_read, "rb") as info:
                pid = _child_pid(info.read())
            if pid is not None:
                fds.append(os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC))
                if os.geteuid() != 0:
                    fds.append(os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC))
        except OSError as exc:
            _close_all(fds)
            fds, problem = [], f"could not open the network's namespace: {exc}"
        else:
            if not fds:
                problem = "bubblewrap did not say which process holds the network"
        finally:
            os.close(block_write)  # the holder reads end-of-file and runs ``true``
            _, err = holder.communicate()
        # Exit 0 means the holder lived, blocked, until ``block_write`` closed, so the pid
        # opened above was still it (never a reused pid of another process's namespace).
        if holder.returncode != 0:
            detail = (err.decode(errors="replace").strip().splitlines() or [f"exit code {holder.returncode}"])[-1]
            problem = f"bubblewrap could not create the network ({detail})"
        if problem is not None:
            _close_all(fds)
            raise NetworkNamespaceError(problem)
        return cls(fds[0], fds[1] if len(fds) > 1 else None)

    @property
    def closed(self) -> bool:
        return self._net_fd < 0

    def enter(self) -> None:
        """In a forked child before exec: join the namespace (its user namespace first). Used
        only where ``nsenter`` is missing: a hook between fork and exec makes Python fork the
        whole interpreter instead of using ``vfork``."""
        if self._user_fd is not None:
            _setns(self._user_fd, _CLONE_NEWUSER)
        _setns(self._net_fd, _CLONE_NEWNET)

    def entry_argv(self, nsenter: str) -> tuple[list[str], tuple[int, ...]]:
        """A command line prefix that joins the namespace (its user namespace first, keeping
        the caller's ids) and then execs the rest, and the descriptors it must inherit. They
        stay open in what it execs: the caller closes them before the command runs."""
        fds = (self._net_fd,) if self._user_fd is None else (self._user_fd, self._net_fd)
        argv = [nsenter, "--preserve-credentials"]
        if self._user_fd is not None:
            argv.append(f"--user=/proc/self/fd/{self._user_fd}")
        argv += [f"--net=/proc/self/fd/{self._net_fd}", "--"]
        return argv, fds

    def close(self) -> None:
        for fd in (self._net_fd, self._user_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._net_fd, self._user_fd = -1, None


@functools.cache
def nsenter_path() -> str | None:
    """util-linux ``nsenter``, which joins a thread's network without a hook in Python; None
    where it is not in a system folder (then the hook joins it). Never through the PATH:
    it runs before bubblewrap (``host_programs.SYSTEM_FOLDERS``)."""
    return shutil.which("nsenter", path=os.pathsep.join(SYSTEM_FOLDERS))


def shell_closing(fds: tuple[int, ...]) -> str:
    """Redirections that close ``fds`` for the command a shell's ``exec`` starts."""
    return "".join(f" {fd}<&-" for fd in fds)


def entering(network: LoopbackNetwork, argv: list[str], shell: str) -> tuple[list[str], tuple[int, ...]] | None:
    """``argv`` (a bwrap command line whose command is ``shell -c SCRIPT NAME ...``, the limits
    prefix) started inside ``network`` through ``nsenter``, the descriptors to pass, and the
    prefix made to close them before the command; None where that cannot be done here (no
    ``nsenter``, or no bash to close the descriptors): then ``network.enter`` is the hook."""
    nsenter = nsenter_path()
    if nsenter is None or not shell.endswith("bash"):
        return None
    prefix, fds = network.entry_argv(nsenter)
    script = argv.index("-c", argv.index("--")) + 1
    closed = [*argv[:script], argv[script] + shell_closing(fds), *argv[script + 1 :]]
    return [*prefix, *closed], fds


_verdicts: dict[tuple[str, ...], str | None] = {}


async def shared_network_problem(bwrap_argv: tuple[str, ...], shell: str) -> str | None:
    """None when a command wrapped by ``bwrap_argv`` (the sandbox's own isolation, without
    ``--unshare-net``) runs inside a ``LoopbackNetwork``, started the way commands are; else
    why not. Probed once per process."""
    key = (shell, *bwrap_argv)
    if key not in _verdicts:
        _verdicts[key] = await asyncio.to_thread(_probe_shared_network, bwrap_argv, shell)
    return _verdicts[key]


def _probe_shared_network(bwrap_argv: tuple[str, ...], shell: str) -> str | None:
    try:
        network = LoopbackNetwork.create(bwrap_argv[0])
    except OSError as exc:
        return f"no private network namespace: {exc}"
    argv = [*bwrap_argv, shell, "-c", 'exec "$@"', "roder-probe", "/bin/true" if os.path.exists("/bin/true") else "true"]
    entry = entering(network, argv, shell)
    try:
        done = subprocess.run(
            argv if entry is None else entry[0],
            preexec_fn=network.enter if entry is None else None,
            pass_fds=() if entry is None else entry[1],
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start inside the thread's network: {exc}"
    finally:
        network.close()
    if done.returncode != 0:
        detail = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bubblewrap refused to run inside the thread's network ({detail})"
    return None


@dataclass
class ThreadNetwork:
    """A thread's handle on its loopback network, created on the first command that needs it."""

    owner: str
    #: Set once the audit log says commands of this thread cannot share a network here.
    notice_given: bool = False
    #: The thread's next command's process, made ahead by the process broker (``next_start``);
    #: ended with the thread.
    next_start: NextStart | None = None
    #: Set by ``close``: the thread ended, nothing more is made ahead for it.
    ended: bool = False
    _network: LoopbackNetwork | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def get(self, bwrap: str) -> LoopbackNetwork:
        """The network, created (by ``bwrap``, the sandbox's bubblewrap) on the first call."""
        async with self._lock:
            if self._network is None or self._network.closed:
                self._network = await asyncio.to_thread(LoopbackNetwork.create, bwrap)
            return self._network

    def close(self) -> None:
        self.ended = True
        if self.next_start is not None:
            self.next_start.close()
            self.next_start = None
        if self._network is not None:
            self._network.close()
            self._network = None


class ThreadNetworks:
    """The loopback networks of a runtime's threads, by owning thread id (a child thread uses
    its root thread's network, so a subagent reaches the dev server its parent started)."""

    def __init__(self) -> None:
        self._networks: dict[str, ThreadNetwork] = {}

    def handle(self, owner: str) -> ThreadNetwork:
        network = self._networks.get(owner)
        if network is None:
            network = self._networks[owner] = ThreadNetwork(owner)
        return network

    def release(self, owner: str) -> None:
        network = self._networks.pop(owner, None)
        if network is not None:
            network.close()

    def close(self) -> None:
        for owner in list(self._networks):
            self.release(owner)


def bind_thread(brokers: Brokers, thread_id: str, network: ThreadNetwork | None) -> Brokers:
    """``brokers`` whose process broker works for one thread: sandboxed commands in ``network``
    and shown that thread's own files of Roder's folders (``own_folders``). Only a broker whose
    class defines ``for_thread`` is bound (a wrapper that merely forwards attributes to another
    broker would hand back the inner one and lose itself); others are left as they are."""
    if getattr(type(brokers.process), "for_thread", None) is None:
        return brokers
    return replace(brokers, process=brokers.process.for_thread(thread_id, network))  # type: ignore[attr-defined]
