"""Runs a task's own setup and score commands in its workspace.

These commands come from the task file the operator wrote, not from the model, so they run as
child processes of the worker (not through the agent's brokers), with an allowlisted environment
(``environment.child_environment``), in their own process group, with a timeout that kills the
whole group so a hung test suite cannot stall the batch, and with the kernel told to kill them
when the worker dies. The score is also wrapped in the sandbox (``scoring``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Keep the first and last part of very long output (a test suite's log can be megabytes).
OUTPUT_CAP = 256_000
#: How long output is still read after the command ended or was killed (``_output_until_done``).
DRAIN_SECONDS = 5.0
#: How often a command still running is checked for having ended while its output is read.
POLL_SECONDS = 0.5


@dataclass
class ShellOutcome:
    command: str
    exit_code: int | None
    #: What the log keeps: the start and the end of a very long output (``OUTPUT_CAP``).
    output: str
    duration_s: float
    timed_out: bool = False
    #: The whole output when ``output`` was cut: a verdict read from the output reads all of it,
    #: or lines printed to push the runner's own out of the log would decide it.
    whole: str | None = field(default=None, repr=False)

    @property
    def full_output(self) -> str:
        return self.output if self.whole is None else self.whole

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def log(self) -> str:
        status = "timed out" if self.timed_out else f"exit {self.exit_code}"
        body = self.output if not self.output or self.output.endswith("\n") else self.output + "\n"
        return f"$ {self.command}\n{body}[{status}]\n"


def _die_with_parent() -> None:
    """In the child between fork and exec: SIGKILL when the worker that started it dies."""
    if _prctl is not None:
        _prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork
except (OSError, AttributeError):
    _prctl = None  # not Linux


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    half = OUTPUT_CAP // 2
    return f"{text[:half]}\n[... {len(text) - OUTPUT_CAP} characters cut ...]\n{text[-half:]}"


def run_shell(
    command: str, cwd: Path, env: Mapping[str, str], timeout: float, wrap: list[str] | None = None, pass_fds: tuple[int, ...] = ()
) -> ShellOutcome:
    """Run ``command`` with ``/bin/sh`` (inside ``wrap``, a sandbox's argv prefix, when given)."""
    # A sandbox started with ``--die-with-parent`` (bubblewrap's) is killed with the worker
    # already; without a Python hook between fork and exec the child is started by vfork, about
    # 10 ms of the worker's CPU less per score.
    hook = None if _prctl is None or (wrap is not None and "--die-with-parent" in wrap) else _die_with_parent
    started = time.monotonic()
    proc = subprocess.Popen(
        [*(wrap or []), "/bin/sh", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=hook,
        pass_fds=pass_fds,
    )
    try:
        raw, timed_out = _output_until_done(proc, timeout)
    finally:
        _kill_group(proc.pid)  # background children left behind by the command
    text = raw.decode("utf-8", errors="replace")
    shown = _cap(text)
    return ShellOutcome(
        command=command,
        exit_code=None if timed_out else proc.returncode,
        output=shown,
        duration_s=time.monotonic() - started,
        timed_out=timed_out,
        whole=None if shown is text else text,
    )


def _output_until_done(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bool]:
    """The command's output, and whether it ran out of time (its group is then killed).

    Reading stops ``DRAIN_SECONDS`` after the command itself ended or was killed, even when the
    pipe is still open: a daemon it started in a session of its own (``setsid``, outside the
    group that is killed) can hold the pipe open forever, which kept the score, and the batch,
    waiting past its timeout without end."""
    deadline = time.monotonic() + timeout
    timed_out = False
    ended_at: float | None = None
    while True:
        now = time.monotonic()
        if ended_at is None and proc.poll() is not None:
            ended_at = now
        if ended_at is None and now >= deadline:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
            ended_at = now
        limit = deadline if ended_at is None else ended_at + DRAIN_SECONDS
        try:
            raw, _ = proc.communicate(timeout=max(0.0, min(limit - now, POLL_SECONDS)))
            return raw, timed_out
        except subprocess.TimeoutExpired as exc:
            if ended_at is not None and time.monotonic() >= limit:
                if proc.stdout is not None:
                    proc.stdout.close()
                return bytes(exc.output or b""), timed_out


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
