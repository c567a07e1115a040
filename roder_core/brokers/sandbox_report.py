"""What the command sandbox enforces on this machine, for this user: ``roder doctor``.

Each line is checked, not assumed: the bubblewrap probe says which hardening bubblewrap accepted,
a live command inside the sandbox reports its capabilities, user namespace and whether a unix
socket can be created, and the cgroup probe says which limits hold for this user.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roder_core.brokers import seccomp
from roder_core.brokers.cgroups import describe as describe_cgroups
from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.cgroups import swap_active
from roder_core.brokers.sandbox import SandboxStatus
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths

_LIVE_CHECK = (
    "grep CapEff /proc/self/status; echo \"uid_map: $(tr -s ' ' < /proc/self/uid_map | head -1)\"; "
    'if command -v python3 >/dev/null; then python3 -c "import socket\ntry:\n    socket.socket(socket.AF_UNIX)'
    "; print('unix sockets: allowed')\nexcept OSError as e:\n    print('unix sockets: refused,', e.strerror)\"; fi"
)


@dataclass(frozen=True)
class ReportLine:
    topic: str
    text: str


def _limit_lines(config: RoderConfig) -> list[ReportLine]:
    limits = config.limits
    cgroups = detect_cgroups()
    root = os.geteuid() == 0
    lines = [ReportLine("cgroups", describe_cgroups(cgroups))]
    if limits.processes <= 0:
        processes = "off ([limits] processes = 0)"
    elif cgroups.pids_parent is not None:
        processes = f"{limits.processes} per command (pids cgroup; holds for root too)"
    elif root:
        processes = (
            f"NOT ENFORCED: running as root without a writable pids cgroup (RLIMIT_NPROC is "
            f"ignored for uid 0); {limits.processes} is asked for"
        )
    else:
        processes = f"{limits.processes} more than you already run (RLIMIT_NPROC; holds for this non-root user)"
    if limits.memory_mb <= 0:
        memory = "off ([limits] memory_mb = 0)"
    elif cgroups.memory_parent is not None:
        memory = f"{limits.memory_mb} MB per command, all its processes together (memory cgroup)"
        if not cgroups.swap_capped and swap_active():
            memory += "; NOT counting swap (this kernel keeps no swap accounts for cgroups)"
    else:
        memory = "NOT ENFORCED across processes (no writable memory cgroup); per process only, see address space"
    per_process = (
        f"CPU {limits.cpu_seconds or 'unlimited'} s, address space "
        f"{limits.address_space_mb or 'unlimited'} MB, file size {limits.file_size_mb or 'unlimited'} MB "
        "(rlimits, per process)"
    )
    return [*lines, ReportLine("processes", processes), ReportLine("memory", memory), ReportLine("per process", per_process)]


def _live(status: SandboxStatus, config: RoderConfig, paths: RoderPaths, env: dict[str, str]) -> str:
    """Run the live check through the real process broker in a scratch workspace."""
    from roder_core.brokers.fs import WorkspaceFileSystem
    from roder_core.brokers.process import HostProcessBroker

    with tempfile.TemporaryDirectory(prefix="roder-doctor-", dir=os.environ.get("TMPDIR")) as scratch:
        fs = WorkspaceFileSystem(Path(scratch))
        broker = HostProcessBroker(
            fs,
            sandbox=status,
            spill_dir=Path(scratch) / "spill",
            quarantine_dir=Path(scratch) / "q",
            env=env,
            allow_unix_sockets=config.sandboxing.allow_unix_sockets,
            network=config.network.commands,
        )
        result = asyncio.run(broker.run(_LIVE_CHECK, timeout=30))
        return result.output.strip()


def sandbox_report(
    status: SandboxStatus, config: RoderConfig, paths: RoderPaths, env: dict[str, str] | None = None, *, live: bool = True
) -> list[ReportLine]:
    """The lines of ``roder doctor``'s sandbox section."""
    from roder_core.brokers.own_folders import OwnFolders
    from roder_core.brokers.secret_paths import SecretAliased, default_deny_read, expand, masks

    env = dict(os.environ if env is None else env)
    lines = [ReportLine("level", f"{status.effective}" + (f" (requested {status.requested})" if status.requested else ""))]
    if status.notice:
        lines.append(ReportLine("notice", status.notice))
    probe = status.probe
    if status.effective == "off" or probe is None:
        lines.append(ReportLine("bubblewrap", status.reason or "not used"))
        lines.append(
            ReportLine(
                "own process",
                "non-dumpable: commands cannot read /proc/<roder pid>/environ; "
                "as root they also lose CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON",
            )
        )
        return [*lines, *_limit_lines(config)]
    lines.append(ReportLine("bubblewrap", str(probe.path)))
    lines.append(ReportLine("capabilities", "all dropped (--cap-drop ALL); no new privileges"))
    userns = "yes" if probe.userns else "no (bubblewrap or the kernel refused --unshare-user)"
    if probe.userns:
        userns += "; further namespaces refused" if probe.no_nested_userns else "; nested ones blocked by seccomp only"
    lines.append(ReportLine("user namespace", userns))
    if probe.seccomp:
        refused = seccomp.refused_calls(allow_unix_sockets=config.sandboxing.allow_unix_sockets)
        allow = " (unix sockets allowed by [sandboxing] allow_unix_sockets)" if config.sandboxing.allow_unix_sockets else ""
        lines.append(ReportLine("seccomp", f"on{allow}: refuses {', '.join(refused)}"))
    else:
        lines.append(ReportLine("seccomp", "OFF: bubblewrap did not accept the filter here"))
    lines.append(
        ReportLine(
            "network", "host network kept ([network] commands)" if config.network.commands else "none (own network namespace)"
        )
    )
    lines.append(
        ReportLine(
            "read-only",
            "everything but the workspace, extra roots and a private /tmp; "
            "/proc/sys; every git dir and what it refers to; protected names at any depth",
        )
    )
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    candidates = [*default_deny_read(home, paths.data_dir, paths.config_file), *expand(config.sandboxing.deny_read, home)]
    try:
        masked = masks(candidates, [])
    except SecretAliased as exc:
        lines.append(ReportLine("masked", f"REFUSED: {exc}"))
    else:
        lines.append(ReportLine("masked", ", ".join(str(p) for p in masked) or "nothing on this machine"))
    own = OwnFolders.of(paths, env)
    lines.append(
        ReportLine(
            "roder folders",
            "hidden: "
            + (", ".join(str(p) for p in own.existing()) or "none exist yet")
            + "; a thread's commands see only its own task logs and spilled output",
        )
    )
    if live:
        lines.append(ReportLine("live check", _live(status, config, paths, env).replace("\n", "; ")))
    return [*lines, *_limit_lines(config)]
