"""One private, loopback-only network per thread, which that thread's sandboxed commands share.

Each sandboxed command used to get a network namespace of its own, so a dev server started in
the background could never be reached by the next command. Now the first sandboxed command of
a thread creates a ``LoopbackNetwork``: a short-lived helper process unshares a network
namespace (inside a user namespace of its own when Roder is not root, mapping only the user's
own ids), brings ``lo`` up and waits; Roder opens the helper's ``/proc/<pid>/ns/*`` files and
lets the helper exit. The open descriptors keep the namespace alive, with no process holding
it: nothing is left to orphan.

Every later command of the thread (and of its child threads: subagents, agent tasks) enters
that namespace between fork and exec (``setns``) and is then wrapped by bubblewrap exactly as
before, minus ``--unshare-net``: its own user, PID, IPC, UTS and mount namespaces, no
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
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from roder_core.brokers import Brokers

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000

#: Run by the helper (``python -I -S -c``): enter new namespaces, bring loopback up, say "ok",
#: then wait until Roder closes stdin. Any failure is printed for Roder to report.
_HELPER = r"""
import ctypes, fcntl, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))
try:
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        check(libc.unshare(0x10000000), "unshare(CLONE_NEWUSER)")
        for name, text in (("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1"), ("uid_map", f"{uid} {uid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    check(libc.unshare(0x40000000), "unshare(CLONE_NEWNET)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, 0x8913, request))[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
except Exception as exc:
    sys.stdout.write("error " + str(exc) + "\n")
    sys.stdout.flush()
    sys.exit(1)
sys.stdout.write("ok\n")
sys.stdout.flush()
sys.stdin.read()
"""


class NetworkNamespaceError(OSError):
    """A loopback network namespace could not be created or entered here."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int, kind: int) -> None:
    if _libc().setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class LoopbackNetwork:
    """A network namespace with only ``lo`` (up), held by open namespace descriptors."""

    def __init__(self, net_fd: int, user_fd: int | None) -> None:
        self._net_fd = net_fd
        self._user_fd = user_fd

    @classmethod
    def create(cls) -> LoopbackNetwork:
        """Blocking (it starts a helper process): call it from a worker thread."""
        try:
            helper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _HELPER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise NetworkNamespaceError(exc.errno, f"could not start the namespace helper: {exc}") from exc
        assert helper.stdin is not None and helper.stdout is not None
        try:
            answer = helper.stdout.readline().decode(errors="replace").strip()
            if answer != "ok":
                raise NetworkNamespaceError(answer.removeprefix("error ") or "the namespace helper exited")
            net_fd = os.open(f"/proc/{helper.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            user_fd = None
            if os.geteuid() != 0:
                try:
                    user_fd = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    os.close(net_fd)
                    raise
            return cls(net_fd, user_fd)
        finally:
            helper.stdin.close()
            helper.stdout.close()
            helper.wait()

    @property
    def closed(self) -> bool:
        return self._net_fd < 0

    def enter(self) -> None:
        """In a forked child before exec: join the namespace (its user namespace first)."""
        if self._user_fd is not None:
            _setns(self._user_fd, _CLONE_NEWUSER)
        _setns(self._net_fd, _CLONE_NEWNET)

    def close(self) -> None:
        for fd in (self._net_fd, self._user_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._net_fd, self._user_fd = -1, None


@functools.cache
def shared_network_problem(bwrap_argv: tuple[str, ...]) -> str | None:
    """None when a command wrapped by ``bwrap_argv`` (the sandbox's own isolation, without
    ``--unshare-net``) runs inside a ``LoopbackNetwork``; else why not. Probed once per process."""
    try:
        network = LoopbackNetwork.create()
    except OSError as exc:
        return f"no private network namespace: {exc}"
    true = "/bin/true" if os.path.exists("/bin/true") else "true"
    try:
        done = subprocess.run(
            [*bwrap_argv, true],
            preexec_fn=network.enter,
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
    _network: LoopbackNetwork | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def get(self, create: Callable[[], LoopbackNetwork] = LoopbackNetwork.create) -> LoopbackNetwork:
        async with self._lock:
            if self._network is None or self._network.closed:
                self._network = await asyncio.to_thread(create)
            return self._network

    def close(self) -> None:
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
