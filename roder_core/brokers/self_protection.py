"""Keeping Roder's own process out of its children's reach when no sandbox separates them.

Roder's environment holds provider keys and tokens, and ``/proc/<roder pid>/environ`` (and
``mem``) are readable by any process of the same user. Marked non-dumpable, those files need
``CAP_SYS_PTRACE`` (or ``CAP_SYS_ADMIN`` or ``CAP_PERFMON``, which the kernel also accepts);
commands run as root lose those from their bounding set before they start, so neither they nor
anything they start can get them back.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess

from roder_core.brokers.host_programs import SYSTEM_FOLDERS

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_PR_CAPBSET_DROP = 24
#: CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON: each alone opens a non-dumpable process's files.
_PROC_OPENING_CAPS = (19, 21, 38)
_PROC_OPENING_CAP_NAMES = ("sys_ptrace", "sys_admin", "perfmon")


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def mark_non_dumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on Roder itself; True when it holds."""
    libc = _libc()
    if libc is None:
        return False
    return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 and is_non_dumpable()


def is_non_dumpable() -> bool:
    libc = _libc()
    return libc is not None and libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def drop_ptrace_capability() -> None:
    """In a child about to exec as root: remove the capabilities that open non-dumpable
    processes' ``/proc`` files from the bounding set, so the program it becomes cannot read
    Roder's environment or memory."""
    if os.geteuid() != 0:
        return
    libc = _libc()
    if libc is not None:
        for cap in _PROC_OPENING_CAPS:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


#: ``capability_drop_argv``'s answer once the probe has run: filled once per process.
_drop_prefix: list[tuple[str, ...] | None] = []


async def capability_drop_argv() -> tuple[str, ...] | None:
    """A command line prefix (util-linux ``setpriv``) that drops the same capabilities from the
    bounding set and execs the rest, so a command started by ``vfork`` needs no hook in the
    child; None where ``setpriv`` is missing or cannot drop them (then ``drop_ptrace_capability``
    is the hook). Probed once per process, in a thread: the probe starts ``setpriv`` and waits
    for it, which the event loop (streaming a turn, drawing the app) must never do."""
    if not _drop_prefix:
        answer = await asyncio.to_thread(_probe_capability_drop)
        if not _drop_prefix:  # two first commands at once probe twice; the answer is the same
            _drop_prefix.append(answer)
    return _drop_prefix[0]


def _probe_capability_drop() -> tuple[str, ...] | None:
    """Whether ``setpriv`` here can drop the capabilities (it runs ``/bin/sh -c 'exit 0'``
    through it). Never through the PATH: it runs outside any sandbox."""
    setpriv = shutil.which("setpriv", path=os.pathsep.join(SYSTEM_FOLDERS))
    if setpriv is None:
        return None
    names = ",".join(f"-{name}" for name in _PROC_OPENING_CAP_NAMES)
    prefix = (setpriv, "--bounding-set", names, "--")
    try:
        done = subprocess.run([*prefix, "/bin/sh", "-c", "exit 0"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix if done.returncode == 0 else None
