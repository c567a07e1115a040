"""What a process broker keeps of a command's output: bounded, redacted, spilled.

Both process brokers (``process.HostProcessBroker`` on this machine, ``runner_process`` in a
runner) collect output the same way, so a command's result reads the same wherever it ran:
known secret values removed before anything keeps the bytes, colours and carriage-return
rewrites reduced to what a terminal would show (``terminal_text``), everything up to 2000 lines or
50 KB, beyond that the head and the tail with the whole stream spilled to a private file, and
live output to the client capped at 256 KB.
"""

from __future__ import annotations

import codecs
import secrets
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from roder_core.brokers import OutputSink, ProcessResult
from roder_core.brokers.private_files import open_private
from roder_core.brokers.redaction import StreamRedactor
from roder_core.brokers.secrets import SecretRedactor
from roder_core.brokers.terminal_text import TerminalText

MAX_LINES = 2000
MAX_BYTES = 50_000
#: The whole output is kept on disk up to this size; beyond it only the tail is kept in memory.
SPILL_CAP_BYTES = 64 * 1024 * 1024
LIVE_OUTPUT_BUDGET = 256 * 1024
LIVE_OUTPUT_INTERVAL = 0.1


class OutputCollector:
    """Keeps a command's output bounded: everything up to the limits, then head + tail in memory
    and the whole stream in a spill file."""

    def __init__(
        self,
        spill_dir: Path,
        on_output: Callable[[str], None] | None = None,
        redactor: StreamRedactor[bytes] | None = None,
    ) -> None:
        self._spill_dir = spill_dir
        self._redactor = redactor
        self._buffer = bytearray()
        self._head = b""
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._spill: BinaryIO | None = None
        self.spill_path: Path | None = None
        self.spill_complete = True
        self.total_bytes = 0
        self.total_lines = 0
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._live_sent = 0
        self._live_stopped = False
        self._last_emit = 0.0
        self._terminal = TerminalText()

    @property
    def spilled(self) -> bool:
        return self.spill_path is not None

    def feed(self, data: bytes) -> None:
        """Take a chunk of output (secret values are removed before anything keeps it)."""
        if self._redactor is not None:
            data = self._redactor.feed(data)
        self._take(data)

    def _take(self, data: bytes) -> None:
        self._live(data)
        self._keep(self._terminal.feed(data))

    def _keep(self, data: bytes) -> None:
        """Keep output as the model will read it (``terminal_text``)."""
        self.total_bytes += len(data)
        self.total_lines += data.count(b"\n")
        if not self.spilled:
            self._buffer += data
            if len(self._buffer) > MAX_BYTES or self._buffer.count(b"\n") > MAX_LINES:
                self._start_spill()
        else:
            self._write_spill(data)
            self._push_tail(data)

    def _start_spill(self) -> None:
        name = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4) + ".log"
        self.spill_path = self._spill_dir / name
        self._spill = open_private(self.spill_path)
        data = bytes(self._buffer)
        self._buffer = bytearray()
        self._head = data[: MAX_BYTES // 2]
        self._write_spill(data)
        self._push_tail(data)

    def _write_spill(self, data: bytes) -> None:
        if self._spill is None:
            return
        room = SPILL_CAP_BYTES - self._spill.tell()
        if room <= 0:
            self.spill_complete = False
            return
        self._spill.write(data[:room])
        if len(data) > room:
            self.spill_complete = False

    def _push_tail(self, data: bytes) -> None:
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail and self._tail_size - len(self._tail[0]) >= MAX_BYTES // 2:
            self._tail_size -= len(self._tail.popleft())

    def _live(self, data: bytes) -> None:
        room = LIVE_OUTPUT_BUDGET - self._live_sent - len(self._pending)
        if self._on_output is None or self._live_stopped:
            return
        if room <= 0:
            self._live_stopped = True
            self._pending += "\n[live output stopped after 256 KB; the result holds the head and tail]\n"
            self.flush_live()
            return
        self._pending += self._decoder.decode(data[:room])
        if time.monotonic() - self._last_emit >= LIVE_OUTPUT_INTERVAL:
            self.flush_live()

    def flush_live(self) -> None:
        if self._on_output is None or not self._pending:
            return
        text, self._pending = self._pending, ""
        self._live_sent += len(text)
        self._last_emit = time.monotonic()
        self._on_output(text)

    def close(self) -> None:
        if self._redactor is not None:
            self._take(self._redactor.flush())
            self._redactor = None
        self._keep(self._terminal.flush())
        self.flush_live()
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def text(self) -> tuple[str, bool]:
        """The output for the model and whether it was truncated."""
        if not self.spilled:
            return bytes(self._buffer).decode("utf-8", errors="replace"), False
        head_lines = self._head.decode("utf-8", errors="replace").split("\n")[: MAX_LINES // 2]
        tail_bytes = b"".join(self._tail)[-(MAX_BYTES // 2) :]
        tail_lines = tail_bytes.decode("utf-8", errors="replace").split("\n")
        if len(tail_lines) > 1:
            tail_lines = tail_lines[1:]  # drop the partial first line
        tail_lines = tail_lines[-(MAX_LINES // 2) :]
        head, tail = "\n".join(head_lines), "\n".join(tail_lines)
        shown = len(head.encode()) + len(tail.encode())
        where = f"full output: {self.spill_path}"
        if not self.spill_complete:
            where += f" (first {SPILL_CAP_BYTES // (1024 * 1024)} MB only)"
        where += f"; read parts of it with bash: sed -n '1000,1100p' {self.spill_path} or grep -n PATTERN {self.spill_path}"
        marker = (
            f"\n\n[... output truncated: {self.total_lines} lines, {self.total_bytes} bytes in total; "
            f"{self.total_bytes - shown} bytes omitted here; {where} ...]\n\n"
        )
        return head + marker + tail, True


class RedactedSink:
    """Known secret values removed from a stream before ``sink`` sees it."""

    def __init__(self, sink: OutputSink, redactor: StreamRedactor[bytes]) -> None:
        self._sink = sink
        self._redactor = redactor

    def feed(self, data: bytes) -> None:
        self._sink.feed(self._redactor.feed(data))

    def flush(self) -> None:
        self._sink.feed(self._redactor.flush())


class CommandOutput:
    """The collectors of one ``run``: stdout merged with stderr, or (``separate``) stderr apart,
    each redacted with its own stream state and with its own live-output callback."""

    def __init__(
        self,
        spill_dir: Path,
        redactor: SecretRedactor,
        on_output: Callable[[str], None] | None,
        on_stderr: Callable[[str], None] | None,
        *,
        separate: bool,
    ) -> None:
        self.separate = separate
        self.stdout = OutputCollector(spill_dir, on_output, redactor.byte_stream())
        self.stderr = OutputCollector(spill_dir, on_stderr, redactor.byte_stream()) if separate else self.stdout

    def close(self) -> None:
        """Flush what the redactors held back and close the spill files (safe to repeat)."""
        self.stdout.close()
        self.stderr.close()

    def result(
        self, *, exit_code: int | None, timed_out: bool, duration_ms: int, sandbox: str, quarantined: list[str]
    ) -> ProcessResult:
        """The ``ProcessResult`` of the finished command (no exit code when it timed out)."""
        output, truncated = self.stdout.text()
        stderr, stderr_truncated = self.stderr.text() if self.separate else ("", False)
        return ProcessResult(
            exit_code=None if timed_out else exit_code,
            output=output,
            stderr=stderr,
            duration_ms=duration_ms,
            timed_out=timed_out,
            truncated=truncated or stderr_truncated,
            full_output_path=str(self.stdout.spill_path) if self.stdout.spill_path else None,
            sandbox=sandbox,
            quarantined=quarantined,
            total_bytes=self.stdout.total_bytes,
            total_lines=self.stdout.total_lines,
        )
