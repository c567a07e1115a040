"""A command's process started before its command line, and the thread's next one made ahead.

Moving a process into a fresh cgroup waits for the kernel (an RCU grace period, 5-20 ms of
wall time and almost no CPU) on the first move after a pause, which is every command of a turn:
the model thinks between them. So a command's process is started as a held ``/bin/sh``
(``cgroups.CgroupGate``) with everything but the command line: its environment, folder, pipes
and inherited descriptors. Once the shell is in its groups the command line is handed to it.

After each command the process broker makes the next one of its thread the same way while the
command runs and the model thinks (``NextStart``): its groups made, the shell started and moved
in. The next command takes it only when everything still holds (``HeldCommand.usable``): the
same event loop, the same start (environment, folder, pipes, limits, network), the shell alive,
and its groups still there holding that shell and nothing else. Otherwise it is ended, its
groups removed (killing whatever got in), and the command starts afresh exactly as without it.
A held shell ends unrun when Roder closes the thread or goes away (its gate's pipe closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Hashable
from dataclasses import dataclass

from roder_core.brokers.cgroups import CgroupGate, CommandCgroup


@dataclass
class HeldCommand:
    """A started, held shell: the process a command becomes once ``gate.release`` gives it the
    command line. ``admitted`` is the move into ``cgroup`` (done in a worker thread)."""

    key: Hashable
    proc: asyncio.subprocess.Process
    gate: CgroupGate
    cgroup: CommandCgroup
    read_fd: int
    err_read_fd: int
    #: The seccomp program's descriptor number in the shell (``bwrap --seccomp``), or None.
    seccomp_fd: int | None
    admitted: asyncio.Future[None]
    loop: asyncio.AbstractEventLoop

    def usable(self, key: Hashable) -> bool:
        """Whether a command started as ``key`` may become this shell (see the module)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if loop is not self.loop or key != self.key or self.proc.returncode is not None:
            return False
        if not self.admitted.done() or self.admitted.cancelled() or self.admitted.exception() is not None:
            return False
        return self.cgroup.holds_only(self.proc.pid)

    def discard(self) -> None:
        """End the shell unrun and remove its groups with whatever is in them (blocking)."""
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            # until it is gone (not reaped: asyncio's watcher does that), so its groups can go
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        self.gate.close()
        for fd in (self.read_fd, self.err_read_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.read_fd = self.err_read_fd = -1
        self.cgroup.remove()


class NextStart:
    """The next command's held shell of one thread, made as its last command ended (the process
    broker's ``_make_next``)."""

    def __init__(self, held: HeldCommand) -> None:
        self._held: HeldCommand | None = held

    async def take(self, key: Hashable) -> HeldCommand | None:
        """The held shell when a command started as ``key`` may use it (waiting for its move),
        else None: then it was ended and its groups removed."""
        held = await self.ready()
        self._held = None
        if held is None:
            return None
        if held.usable(key):
            return held
        await asyncio.to_thread(held.discard)
        return None

    async def ready(self) -> HeldCommand | None:
        """The held shell once moved into its groups (whether the move worked or not)."""
        held = self._held
        if held is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(held.admitted)
        return held

    def close(self) -> None:
        """End it unused (blocking while its shell ends and its groups go)."""
        held, self._held = self._held, None
        if held is not None:
            held.discard()
