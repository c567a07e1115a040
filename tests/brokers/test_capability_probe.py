"""Root commands run without a sandbox lose the capabilities that open Roder's ``/proc`` files
through a ``setpriv`` prefix, which is probed once per process by running ``setpriv``. That probe
waits on a child, so it runs in a thread: the event loop (a streaming turn, the app's drawing)
never waits on it, whichever command is the first."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from roder_core.brokers import self_protection
from tests.tools.harness import make_brokers


def record_probes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A fresh process's state (no answer yet), with each probe recording whether it ran on a
    thread that has an event loop running."""
    monkeypatch.setattr(self_protection, "_drop_prefix", [])
    real = self_protection._probe_capability_drop
    on_loop: list[bool] = []

    def probe() -> tuple[str, ...] | None:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(threading.current_thread() is threading.main_thread())
        return real()

    monkeypatch.setattr(self_protection, "_probe_capability_drop", probe)
    return on_loop


async def test_the_setpriv_probe_runs_off_the_event_loop_once(monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop = record_probes(monkeypatch)
    first = await self_protection.capability_drop_argv()
    second = await self_protection.capability_drop_argv()
    assert on_loop == [False]  # probed once, and not on the loop's thread
    assert first == second
    assert first is None or first[1:] == ("--bounding-set", "-sys_ptrace,-sys_admin,-perfmon", "--")


async def test_an_unconfined_command_never_probes_on_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the real broker, sandbox off: as root the first command probes (in a thread),
    unprivileged it needs no probe at all; the command runs either way."""
    on_loop = record_probes(monkeypatch)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    process = make_brokers(workspace, tmp_path / "cache", sandbox="off").process
    for _ in range(2):
        result = await process.run("echo started")
        assert result.exit_code == 0 and "started" in result.output
    assert on_loop == ([False] if os.geteuid() == 0 else [])
