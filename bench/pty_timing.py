"""Timing a program the way a user starts it: in a pseudo-terminal, until given text appears.

Shared by the TUI benchmarks (first frame, resume, SSH bytes) so that they measure alike: the
same 120x40 terminal, the clock from spawn to the first byte sequence that contains a marker,
ctrl+q to quit, and the process's own CPU time next to the wall clock (under load the wall clock
mostly measures waiting for a core; the process's CPU does not).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
#: A terminal control sequence (CSI: colours, cursor moves).
CONTROL_SEQUENCE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process so far (clock-tick resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def timed_run(
    argv: list[str], markers: list[bytes], env: dict[str, str], cwd: str, *, limit: float = 60.0
) -> list[tuple[float, float]]:
    """(wall, CPU) seconds from spawn until each marker, in order, appears on the terminal;
    then ctrl+q and reap. Raises when a marker has not appeared within ``limit`` seconds."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    seen, found = b"", []
    try:
        while len(found) < len(markers) and time.perf_counter() < started + limit:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                while len(found) < len(markers) and markers[len(found)] in seen:
                    found.append((time.perf_counter() - started, cpu_seconds(process.pid)))
        os.write(master, b"\x11")  # ctrl+q
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    finally:
        os.close(master)
    if len(found) < len(markers):
        raise RuntimeError(f"{argv} never showed {markers[len(found)]!r}")
    return found


class PtySession:
    """A program running in a 120x40 pseudo-terminal that the benchmark types into: ``wait``
    for text to appear, ``press`` bytes and time until given text appears (an echo, a screen)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, *, columns: int = 120, lines: int = 40) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
        os.close(slave)
        self.seen = b""

    def wait(self, marker: bytes, limit: float = 60.0) -> float:
        """Seconds until ``marker`` appears in what the program writes from now on, as text: a
        style or cursor sequence inside it (Textual splits a row's text where the widgets below
        an overlay begin) does not hide it."""
        started = time.perf_counter()
        self.seen = b""
        while time.perf_counter() < started + limit:
            ready, _, _ = select.select([self.master], [], [], 0.01)
            if ready:
                self.seen += os.read(self.master, 65536)
                if marker in self.seen or marker in CONTROL_SEQUENCE.sub(b"", self.seen):
                    return time.perf_counter() - started
        raise RuntimeError(f"never showed {marker!r}")

    def press(self, keys: bytes, marker: bytes, limit: float = 60.0) -> float:
        """Send ``keys`` and return the seconds until ``marker`` appears on the terminal."""
        self.drain()
        os.write(self.master, keys)
        return self.wait(marker, limit)

    def send(self, keys: bytes) -> None:
        """Send ``keys`` and let the screen settle (nothing more written for a moment)."""
        os.write(self.master, keys)
        self.drain(0.3)

    def drain(self, quiet: float = 0.05) -> None:
        """Read what is pending, so the next ``wait`` sees only what comes after."""
        while select.select([self.master], [], [], quiet)[0]:
            try:
                os.read(self.master, 65536)
            except OSError:
                return

    def close(self) -> None:
        os.write(self.master, b"\x11")  # ctrl+q
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.master)
