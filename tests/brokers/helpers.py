"""Process helpers for broker tests: unique markers and orphan checks through /proc."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from roder_core.brokers.sandbox import probe_bubblewrap

BWRAP = probe_bubblewrap()
needs_bwrap = pytest.mark.skipif(not BWRAP.works, reason=f"bubblewrap unusable here: {BWRAP.reason}")


def marker() -> str:
    return f"roder_marker_{uuid.uuid4().hex[:12]}"


def running(mark: str) -> list[int]:
    """PIDs whose command line mentions ``mark`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def assert_gone(mark: str, within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not running(mark):
            return
        time.sleep(0.05)
    pids = running(mark)
    for pid in pids:  # do not leak them into other tests
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    raise AssertionError(f"orphan processes survived: {pids}")
