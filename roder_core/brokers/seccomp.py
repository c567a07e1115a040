"""The seccomp filter bubblewrap installs on sandboxed commands (``bwrap --seccomp FD``).

A classic BPF program, assembled here with ``struct`` (no native binding needed). It refuses,
with ``EPERM``, the system calls a command needs only to get out of its box:

- ``socket(AF_UNIX, ...)``: ``--unshare-net`` hides the network but not socket *files*
  (``/var/run/docker.sock``, D-Bus, gpg-agent, ...); without a unix socket none of them can be
  reached. ``socketpair`` stays allowed (pipes between a command's own processes). Set
  ``[sandboxing] allow_unix_sockets = true`` when the workspace really needs unix sockets.
- ``ptrace`` and ``process_vm_readv/writev``: no reading or steering other processes' memory.
- set-user-ID and set-group-ID modes (``chmod``, ``fchmod*``, ``mknod*``, and ``open``/``openat``/
  ``creat`` creating a file): a root command could otherwise leave a set-uid-root program in the
  workspace for anyone to run later (``openat2`` answers ``ENOSYS``: its mode is out of reach).
- mounting (``mount``, ``umount2``, ``pivot_root``, the new mount API), namespaces (``unshare``,
  ``setns``, ``clone`` with a namespace flag; ``clone3`` answers ``ENOSYS`` so libc falls back to
  ``clone``, whose flags can be checked), and kernel interfaces no build needs: ``bpf``,
  ``perf_event_open``, ``io_uring_*`` (it can open sockets past this filter), keyrings, kernel
  modules, ``kexec``, ``open_by_handle_at``, ``swapon``, ``reboot``, ``acct``, ``syslog``.

System calls of another ABI (32-bit ``int 0x80``, x32) are refused outright, since their numbers
differ. Only x86-64 and aarch64 are known; elsewhere there is no filter and ``roder doctor`` says so.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
from dataclasses import dataclass

_LD_W_ABS = 0x20
_JEQ = 0x15
_JSET = 0x45
_RET = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_AF_UNIX = 1
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = 0x7E020000
#: S_ISUID | S_ISGID: a set-id file made by a root command would run as root for anyone, later.
_SET_ID_BITS = 0o6000
#: O_CREAT | __O_TMPFILE: the open-like calls whose mode argument is used.
_CREATING = 0o100 | 0o20000000

_OFFSET_NR = 0
_OFFSET_ARCH = 4
_OFFSET_ARG0 = 16  # low 32 bits on little-endian machines


@dataclass(frozen=True)
class _Abi:
    audit_arch: int
    x32: bool
    socket: int
    clone: int
    clone3: int
    refused: dict[str, int]
    #: System calls that set a mode: number -> index of the mode argument (chmod, mknod, creat).
    set_mode: dict[int, int]
    #: open-like calls: number -> (index of the flags, index of the mode).
    open_mode: dict[int, tuple[int, int]]
    openat2: int = 437


_X86_64 = _Abi(
    audit_arch=0xC000003E,
    x32=True,
    socket=41,
    clone=56,
    clone3=435,
    refused={
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "unshare": 272,
        "setns": 308,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "bpf": 321,
        "perf_event_open": 298,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "open_by_handle_at": 304,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "acct": 163,
        "syslog": 103,
    },
    set_mode={90: 1, 91: 1, 268: 2, 452: 2, 85: 1, 133: 1, 259: 2},
    open_mode={2: (1, 2), 257: (2, 3)},
)
_AARCH64 = _Abi(
    audit_arch=0xC00000B7,
    x32=False,
    socket=198,
    clone=220,
    clone3=435,
    refused={
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "unshare": 97,
        "setns": 268,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "bpf": 280,
        "perf_event_open": 241,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "open_by_handle_at": 265,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "acct": 89,
        "syslog": 116,
    },
    set_mode={52: 1, 53: 2, 452: 2, 33: 2},
    open_mode={56: (2, 3)},
)
_ABIS = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def supported() -> bool:
    """Whether Roder knows this machine's system call numbers."""
    return platform.machine().lower() in _ABIS


def refused_calls(*, allow_unix_sockets: bool = False) -> list[str]:
    """What the filter refuses, for ``roder doctor``."""
    abi = _ABIS.get(platform.machine().lower())
    if abi is None:
        return []
    names = [] if allow_unix_sockets else ["socket(AF_UNIX)"]
    return [
        *names,
        "clone(namespaces)",
        "clone3",
        "openat2",
        "set-id modes (chmod, open, mknod with S_ISUID/S_ISGID)",
        *abi.refused,
    ]


class _Program:
    """A tiny assembler: forward jumps to labels, resolved when the program is packed."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def add(self, op: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((op, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def pack(self) -> bytes:
        out = bytearray()
        for index, (op, jt, jf, k) in enumerate(self.code):
            jumps = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self.labels[target] - index - 1
                if not 0 <= offset <= 255:
                    raise ValueError("seccomp program too long for a forward jump")
                jumps.append(offset)
            out += struct.pack("=HBBI", op, jumps[0], jumps[1], k & 0xFFFFFFFF)
        return bytes(out)


@functools.cache
def filter_program(*, allow_unix_sockets: bool = False, machine: str | None = None) -> bytes | None:
    """The BPF program (``struct sock_filter`` array), or None on an unknown architecture.
    Assembled once per process (it depends on nothing else), then handed to every command."""
    abi = _ABIS.get((machine or platform.machine()).lower())
    if abi is None:
        return None
    p = _Program()
    p.add(_LD_W_ABS, _OFFSET_ARCH)
    p.add(_JEQ, abi.audit_arch, 0, "eperm")
    p.add(_LD_W_ABS, _OFFSET_NR)
    if abi.x32:
        p.add(_JSET, _X32_BIT, "eperm", 0)
    for number in abi.refused.values():
        p.add(_JEQ, number, "eperm", 0)
    p.add(_JEQ, abi.clone3, "enosys", 0)
    p.add(_JEQ, abi.openat2, "enosys", 0)  # its flags and mode sit in a struct the filter cannot read
    for number, mode_arg in abi.set_mode.items():
        p.add(_JEQ, number, f"mode{mode_arg}", 0)
    for number, (flags_arg, mode_arg) in abi.open_mode.items():
        p.add(_JEQ, number, f"open{flags_arg}{mode_arg}", 0)
    p.add(_JEQ, abi.clone, "clone", 0)
    if not allow_unix_sockets:
        p.add(_JEQ, abi.socket, "socket", 0)
    p.add(_RET, _ALLOW)
    for flags_arg, mode_arg in sorted(set(abi.open_mode.values())):
        p.label(f"open{flags_arg}{mode_arg}")
        p.add(_LD_W_ABS, _OFFSET_ARG0 + 8 * flags_arg)
        p.add(_JSET, _CREATING, 0, "allow")
        p.add(_LD_W_ABS, _OFFSET_ARG0 + 8 * mode_arg)
        p.add(_JSET, _SET_ID_BITS, "eperm", "allow")
    for mode_arg in sorted(set(abi.set_mode.values())):
        p.label(f"mode{mode_arg}")
        p.add(_LD_W_ABS, _OFFSET_ARG0 + 8 * mode_arg)
        p.add(_JSET, _SET_ID_BITS, "eperm", "allow")
    p.label("clone")
    p.add(_LD_W_ABS, _OFFSET_ARG0)
    p.add(_JSET, _CLONE_NAMESPACES, "eperm", 0)
    p.add(_RET, _ALLOW)
    if not allow_unix_sockets:
        p.label("socket")
        p.add(_LD_W_ABS, _OFFSET_ARG0)
        p.add(_JEQ, _AF_UNIX, "eperm", 0)
        p.add(_RET, _ALLOW)
    p.label("allow")
    p.add(_RET, _ALLOW)
    p.label("eperm")
    p.add(_RET, _ERRNO | errno.EPERM)
    p.label("enosys")
    p.add(_RET, _ERRNO | errno.ENOSYS)
    return p.pack()


def filter_fd(*, allow_unix_sockets: bool = False) -> int | None:
    """A file descriptor holding the program, at offset 0, for ``bwrap --seccomp FD``.

    The caller passes it to the child (``pass_fds``) and closes it after the start.
    """
    program = filter_program(allow_unix_sockets=allow_unix_sockets)
    if program is None:
        return None
    fd = os.memfd_create("roder-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
