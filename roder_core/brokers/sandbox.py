"""The command sandbox: bubblewrap backends, probed once, and what is left without them.

Levels:
- ``workspace-write``: the whole filesystem read-only, the workspace (and granted extra roots)
  and a private ``/tmp`` writable, protected paths at any depth, every git dir and what they refer
  to re-bound read-only (``tree_guard``), secrets masked (``secret_paths``), Roder's own folders
  hidden but for the command's own thread's files (``own_folders``), no network, a private
  PID namespace with a fresh ``/proc`` (its ``/proc/sys`` read-only), a new session, no
  capabilities, a user namespace where the kernel allows one, the seccomp filter (``seccomp``),
  and the sandbox dies with Roder.
- ``read-only``: the same, but the workspace is read-only too.
- ``off``: no bubblewrap. The process broker still scrubs secrets from the environment, applies
  resource limits, keeps the working folder inside the workspace and kills the process group.

Without a ``sandbox`` setting Roder uses ``workspace-write`` when bubblewrap works and falls back
to ``off`` with one plain notice. When the user asked for a bubblewrap level explicitly and it
cannot be had, commands are refused rather than run unprotected.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from roder_core.brokers import seccomp
from roder_core.brokers.host_programs import system_program
from roder_core.brokers.own_folders import visible

SANDBOX_LEVELS: tuple[str, ...] = ("workspace-write", "read-only", "off")

_ISOLATION = (
    "--new-session",
    "--die-with-parent",
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-drop",
    "ALL",
)
#: A user namespace for the command, and none further inside it (bubblewrap 0.8+).
_USERNS = ("--unshare-user",)
_NO_NESTED_USERNS = ("--disable-userns",)


@dataclass(frozen=True)
class BubblewrapProbe:
    path: str | None
    works: bool
    reason: str = ""
    #: The command runs in its own user namespace (``--unshare-user``).
    userns: bool = False
    #: ... and cannot create further ones (``--disable-userns``).
    no_nested_userns: bool = False
    #: bubblewrap accepted Roder's seccomp filter.
    seccomp: bool = False


#: Kernel settings that decide whether unprivileged namespaces work; part of the cache key.
_USERNS_SETTINGS = (
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)


def _probe_key(path: str) -> str:
    """What the probe's answer depends on: the bwrap binary, the kernel and its settings."""
    st = os.stat(path)
    parts = [path, str(st.st_mtime_ns), str(st.st_size), str(os.getuid()), os.uname().release]
    for setting in _USERNS_SETTINGS:
        try:
            parts.append(Path(setting).read_text().strip())
        except OSError:
            parts.append("-")
    return "|".join(parts)


@functools.cache
def probe_bubblewrap(bwrap: str | None = None, cache_file: Path | None = None) -> BubblewrapProbe:
    """Try the exact isolation Roder uses, once per process (and per bwrap path).

    With ``cache_file`` the answer is kept on disk until the binary, the kernel, its namespace
    settings or the boot change, so startup does not pay for creating namespaces every time.
    """
    path = bwrap or system_program("bwrap")
    if not path or not os.access(path, os.X_OK):
        return BubblewrapProbe(None, False, "bubblewrap (bwrap) is not installed")
    key = _probe_key(path)
    if cache_file is not None:
        try:
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
            if cached.get("key") == key and "seccomp" in cached:
                return BubblewrapProbe(
                    path,
                    bool(cached["works"]),
                    str(cached.get("reason", "")),
                    bool(cached["userns"]),
                    bool(cached["no_nested_userns"]),
                    bool(cached["seccomp"]),
                )
        except (OSError, ValueError, KeyError, AttributeError):
            pass
    probe = _run_probe(path)
    if cache_file is not None:
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            cache_file.write_text(
                json.dumps(
                    {
                        "key": key,
                        "works": probe.works,
                        "reason": probe.reason,
                        "userns": probe.userns,
                        "no_nested_userns": probe.no_nested_userns,
                        "seccomp": probe.seccomp,
                    }
                )
            )
        except OSError:
            pass
    return probe


def _try(argv: list[str], pass_fds: tuple[int, ...] = ()) -> str | None:
    """None when bubblewrap ran ``true`` with these flags, else why not."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL, pass_fds=pass_fds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bubblewrap is refused here ({detail})"
    return None


def _run_probe(path: str) -> BubblewrapProbe:
    """The exact isolation Roder uses, then each hardening on top of it (older bubblewrap or
    kernels may lack some; ``roder doctor`` reports which are in force)."""
    true = shutil.which("true") or "/bin/true"
    base = [path, *_ISOLATION, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    failure = _try([*base, "--", true])
    if failure:
        return BubblewrapProbe(path, False, failure)
    userns = _try([*base, *_USERNS, "--", true]) is None
    nested = userns and _try([*base, *_USERNS, *_NO_NESTED_USERNS, "--", true]) is None
    fd = seccomp.filter_fd()
    with_filter = False
    if fd is not None:
        try:
            with_filter = _try([*base, "--seccomp", str(fd), "--", true], (fd,)) is None
        finally:
            os.close(fd)
    return BubblewrapProbe(path, True, "", userns, nested, with_filter)


@dataclass(frozen=True)
class SandboxStatus:
    """The sandbox Roder can actually give commands, and what to tell the user about it."""

    requested: str | None
    effective: str
    bwrap: str | None
    reason: str = ""
    #: True when an explicitly requested bubblewrap level is unavailable: commands are refused.
    blocked: bool = False
    probe: BubblewrapProbe | None = None

    @property
    def notice(self) -> str | None:
        """The one plain sentence to show at startup when protection is weaker than the default."""
        if self.blocked:
            return (
                f"sandbox {self.requested!r} was requested but {self.reason}; shell commands are "
                "refused until you install bubblewrap or choose --sandbox off"
            )
        if self.requested is None and self.effective == "off":
            return (
                f"command sandbox is off: {self.reason}. Commands still get a scrubbed environment, "
                "resource limits and workspace-only file tools, but can write anywhere you can and "
                "reach the network"
            )
        return None

    @property
    def label(self) -> str:
        """Short text for a status bar."""
        if self.blocked:
            return f"sandbox: {self.requested} unavailable"
        if self.effective == "off" and self.requested is None:
            return "sandbox: off (no bubblewrap)"
        return f"sandbox: {self.effective}"


def sandbox_status(requested: str | None, bwrap: str | None = None, cache_file: Path | None = None) -> SandboxStatus:
    if requested is not None and requested not in SANDBOX_LEVELS:
        raise ValueError(f"unknown sandbox level {requested!r}; choose one of {', '.join(SANDBOX_LEVELS)}")
    if requested == "off":
        return SandboxStatus(requested, "off", None, "turned off by the user")
    probe = probe_bubblewrap(bwrap, cache_file)
    if probe.works:
        return SandboxStatus(requested, requested or "workspace-write", probe.path, probe=probe)
    if requested is None:
        return SandboxStatus(None, "off", None, probe.reason)
    return SandboxStatus(requested, "off", None, probe.reason, blocked=True)


# ---------------------------------------------------------------------------- the command line


def _hidden_in_sight(hidden: tuple[Path, ...], roots: tuple[Path, ...]) -> list[Path]:
    """The hidden folders a command could otherwise see: the private /tmp already hides those
    under it, unless a root (bound from the host) holds them."""
    tmp = Path("/tmp")
    return [path for path in hidden if not path.is_relative_to(tmp) or any(path.is_relative_to(root) for root in roots)]


def path_folders_under_private_tmp(path_value: str, hidden: tuple[Path, ...]) -> list[Path]:
    """The folders of a command's ``PATH`` that live under /tmp, to show read-only in the sandbox.

    The sandbox mounts a private /tmp, which would hide a virtualenv made in a clone under /tmp:
    `python` or `pytest` on the command's PATH would not be found. A virtualenv's ``bin`` brings
    the environment around it (``pyvenv.cfg``, its packages). /tmp itself, relative entries and
    any folder holding one of Roder's hidden folders are never shown."""
    tmp = Path("/tmp")
    shown: list[Path] = []
    for entry in path_value.split(os.pathsep):
        folder = Path(entry)
        if not folder.is_absolute() or folder == tmp or not folder.is_relative_to(tmp) or not folder.is_dir():
            continue
        if (folder.parent / "pyvenv.cfg").is_file() and folder.parent != tmp:
            folder = folder.parent
        if folder not in shown and not any(secret.is_relative_to(folder) for secret in hidden):
            shown.append(folder)
    return shown


@dataclass(frozen=True)
class Confinement:
    """Everything one bwrap command line is made of, besides the command."""

    level: str
    roots: tuple[Path, ...]
    cwd: Path
    #: Paths inside the roots re-bound read-only (``TreeGuard.readonly_paths``).
    readonly: tuple[Path, ...] = ()
    #: Paths hidden behind an empty read-only folder or file (``secret_paths``).
    masked: tuple[Path, ...] = ()
    #: Folders outside the roots bound read-only (under the private /tmp too); masks still win.
    shown: tuple[Path, ...] = ()
    #: Roder's own folders (``own_folders``): covered by an empty tmpfs even when they hold a
    #: root (the root is bound back on top); ``shown`` folders inside them are bound back.
    hidden: tuple[Path, ...] = ()
    network: bool = False
    #: File descriptor of the seccomp program, passed to the child.
    seccomp_fd: int | None = None
    #: The command already entered its thread's loopback network (``netns``) before exec:
    #: bubblewrap keeps it instead of making an empty one.
    join_network: bool = False


def bubblewrap_argv(bwrap: str, probe: BubblewrapProbe | None, plan: Confinement) -> list[str]:
    """The bwrap command line that wraps a command (``plan.network``: keep the host's network;
    ``plan.join_network``: keep the thread's loopback network it entered)."""
    keep_network = plan.network or plan.join_network
    isolation = [flag for flag in _ISOLATION if not (keep_network and flag == "--unshare-net")]
    if probe is not None and probe.userns:
        isolation += _USERNS
        if probe.no_nested_userns:
            isolation += _NO_NESTED_USERNS
    argv = [
        bwrap,
        *isolation,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        # a root command without capabilities still owns /proc/sys: core_pattern, ...
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--tmpfs",
        "/tmp",
    ]
    if os.path.exists("/proc/sysrq-trigger"):
        argv += ["--ro-bind", "/dev/null", "/proc/sysrq-trigger"]
    bind = "--bind" if plan.level == "workspace-write" else "--ro-bind"
    # Roder's folders in sight, and those inside a shown folder (which would bring them back)
    hidden = list(
        dict.fromkeys(
            [
                *_hidden_in_sight(plan.hidden, plan.roots),
                *(h for h in plan.hidden if any(h.is_relative_to(s) for s in plan.shown)),
            ]
        )
    )
    # Roder's folders, the roots and the shown folders, outer first: a folder hides everything in
    # it, and a root or shown folder inside one (or the same path) is bound back on top; a folder
    # inside a root or a shown folder hides in it, and a root inside a shown folder keeps its grant
    layers = [(len(p.parts), 0, ["--perms", "0755", "--tmpfs", str(p)]) for p in hidden]
    layers += [(len(r.parts), 1, [bind, str(r), str(r)]) for r in plan.roots]
    layers += [(len(s.parts), 2, ["--ro-bind", str(s), str(s)]) for s in plan.shown]
    for _depth, _order, op in sorted(layers, key=lambda layer: (layer[0], layer[1])):
        argv += op
    if plan.level == "workspace-write":
        for path in plan.readonly:
            if visible(path, hidden, plan.roots):
                argv += ["--ro-bind", str(path), str(path)]
    for path in plan.masked:
        if not visible(path, hidden, [*plan.roots, *plan.shown]):
            continue  # inside a hidden folder already: a mask there would only leave a stub behind
        if os.path.isdir(path):
            argv += ["--perms", "0500", "--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    # read-only once everything inside is bound (a root bound on the same path stays writable)
    for path in hidden:
        if path not in plan.roots:
            argv += ["--remount-ro", str(path)]
    if plan.seccomp_fd is not None:
        argv += ["--seccomp", str(plan.seccomp_fd)]
    argv += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(plan.cwd), "--"]
    return argv
