"""``roder doctor`` run as a real process: its sandbox section states what is enforced here, and
the live check inside the sandbox agrees with the probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.brokers.cgroups import detect as detect_cgroups
from roder_core.brokers.sandbox import probe_bubblewrap

PROBE = probe_bubblewrap()


def doctor(*args: str, config: str = "") -> dict[str, str]:
    home = Path(os.environ["RODER_HOME"])
    (home / "config.toml").write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "doctor", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["sandbox"]


@pytest.mark.skipif(not PROBE.works, reason=f"needs bubblewrap: {PROBE.reason}")
def test_doctor_reports_the_enforced_sandbox() -> None:
    report = doctor()
    assert report["level"] == "workspace-write"
    assert "all dropped" in report["capabilities"]
    assert "CapEff:\t0000000000000000" in report["live check"]
    assert "unix sockets: refused" in report["live check"]
    assert report["seccomp"].startswith("on")
    assert "ptrace" in report["seccomp"]
    assert report["user namespace"].startswith("yes" if PROBE.userns else "no")
    cgroups = detect_cgroups()
    if cgroups.pids_parent is not None:
        assert "pids cgroup" in report["processes"]
    elif os.geteuid() == 0:
        assert report["processes"].startswith("NOT ENFORCED")
    else:
        assert "RLIMIT_NPROC" in report["processes"]
    assert report["memory"].startswith("NOT ENFORCED") == (cgroups.memory_parent is None)


@pytest.mark.skipif(not PROBE.works, reason=f"needs bubblewrap: {PROBE.reason}")
def test_doctor_follows_the_config() -> None:
    target = Path("/var/tmp") / f"roder-doctor-{os.getpid()}"  # /tmp is private in the sandbox anyway
    target.mkdir(exist_ok=True)
    try:
        report = doctor(
            config=f'[sandboxing]\nallow_unix_sockets = true\ndeny_read = ["{target}"]\n[limits]\nprocesses = 0\nmemory_mb = 0\n'
        )
        assert "unix sockets: allowed" in report["live check"]
        assert "socket(AF_UNIX)" not in report["seccomp"]
        assert "allow_unix_sockets" in report["seccomp"]
        assert str(target) in report["masked"]
        assert report["processes"].startswith("off")
        assert report["memory"].startswith("off")
    finally:
        target.rmdir()


def test_doctor_without_the_sandbox() -> None:
    report = doctor("--sandbox", "off", "--no-live")
    assert report["level"].startswith("off")
    assert "non-dumpable" in report["own process"]
