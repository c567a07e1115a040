"""A task's setup and score commands: their output is read until they end, not until every
process that inherited the pipe does."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from roder_core.batch.shell import ShellOutcome, run_shell

#: A bound on waiting for a run that should return at once (a hang fails the test, not CI).
HANG = 120.0


def _run_in_thread(command: str, cwd: Path, timeout: float) -> ShellOutcome:
    results: list[ShellOutcome] = []
    done = threading.Event()

    def run() -> None:
        results.append(run_shell(command, cwd, {"PATH": os.environ["PATH"]}, timeout))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(HANG), f"run_shell({command!r}) did not return"
    return results[0]


def _beside_a_daemon(tmp_path: Path, then: str, timeout: float) -> ShellOutcome:
    """``then`` run after starting a ``setsid`` daemon that inherits the output pipe; the daemon
    is killed afterwards, whatever happened."""
    pid_file = tmp_path / "daemon.pid"
    try:
        return _run_in_thread(f"setsid sleep 100000 & echo $! > {pid_file}; {then}", tmp_path, timeout)
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_daemon_holding_the_output_open_does_not_hold_the_command(tmp_path: Path) -> None:
    """``setsid`` puts the daemon outside the command's process group, so killing the group does
    not close the pipe; the command's own end and status are still reported, with its output."""
    outcome = _beside_a_daemon(tmp_path, "echo tests passed; exit 3", timeout=100000)
    assert outcome.exit_code == 3 and not outcome.timed_out
    assert "tests passed" in outcome.output


def test_a_command_out_of_time_ends_though_a_daemon_holds_its_output(tmp_path: Path) -> None:
    outcome = _beside_a_daemon(tmp_path, "echo started; exec sleep 100000", timeout=3)
    assert outcome.timed_out and outcome.exit_code is None
    assert "started" in outcome.output


def test_output_of_a_command_that_ends_is_read_whole(tmp_path: Path) -> None:
    outcome = _run_in_thread("seq 1 200000; echo END", tmp_path, timeout=100000)
    assert outcome.exit_code == 0
    assert outcome.full_output.splitlines()[-1] == "END" and "\n100000\n" in outcome.full_output
