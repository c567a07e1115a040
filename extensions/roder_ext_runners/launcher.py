"""How a runner starts one command so that Roder can kill all of it later.

Commands in a remote runner (an ssh host, a container) are started through a tiny ``sh``
launcher: it prints its process group id on stderr (one marker line, removed before the output
is kept), changes to the working folder and ``exec``s the command with exactly the scrubbed
environment (``env -i``). On timeout, on interrupt and when the command ends, Roder kills that
process group in the runner (``kill -KILL -- -PGID``), so background children do not outlive
it, just as with local commands. ``setsid -w`` puts the command in a session of its own where
the runner has it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

MARKER = b"roder-pgid:"
#: Seconds a command stopped right after it started may take to report its process group.
GROUP_WAIT = 10.0
_SCRIPT = 'printf "roder-pgid:%s\\n" "$$" >&2; cd "$0" || exit 127; exec "$@"'


def launcher_argv(argv: list[str], cwd: str, env: Mapping[str, str], *, setsid: bool) -> list[str]:
    pairs = [f"{name}={value}" for name, value in env.items() if "=" not in name and name]
    return ["env", "-i", *pairs, *(["setsid", "-w"] if setsid else []), "sh", "-c", _SCRIPT, cwd, *argv]


def kill_argv(pgid: int) -> list[str]:
    return ["kill", "-KILL", "--", f"-{pgid}"]


class GroupSniffer:
    """Wraps a stderr callback: takes the launcher's marker line out and keeps the group id
    (``on_group`` hears it). Made and fed on one event loop."""

    def __init__(self, on_stderr: Callable[[bytes], None], on_group: Callable[[int], None] | None = None) -> None:
        self._on_stderr = on_stderr
        self._on_group = on_group
        self._head = b""
        self.pgid: int | None = None
        self._done = False
        self._stopping = False
        self._settled = asyncio.Event()

    async def group(self, timeout: float) -> int | None:
        """The group id, waiting up to ``timeout`` for the marker line when it has not come yet
        (a command stopped right after it started must still be killed as a whole)."""
        if not self._done:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._settled.wait()
        return self.pgid

    def stopping(self) -> None:
        """Roder is killing the group: ``setsid -w``'s complaint that its child was killed
        (which it prints after the kill) is not the command's output."""
        self._stopping = True

    def feed(self, data: bytes) -> None:
        if self._stopping and data.startswith(b"setsid: child "):
            return
        if self._done:
            self._on_stderr(data)
            return
        self._head += data
        if b"\n" not in self._head and len(self._head) < 64:
            return
        line, _, rest = self._head.partition(b"\n")
        self._done = True
        self._settled.set()
        self._head = b""
        if line.startswith(MARKER) and line[len(MARKER) :].strip().isdigit():
            self.pgid = int(line[len(MARKER) :].strip())
            if self._on_group is not None:
                self._on_group(self.pgid)
        else:
            rest = line + b"\n" + rest if _ else line
        if rest:
            self._on_stderr(rest)

    def flush(self) -> None:
        """Output that never reached a newline (a launcher that failed early)."""
        if not self._done and self._head:
            self._done = True
            self._on_stderr(self._head)
            self._head = b""
        self._done = True
        self._settled.set()
