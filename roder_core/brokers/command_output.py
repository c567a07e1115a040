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
        kept = b"".join(self._tail)
        start = max(0, len(kept) - MAX_BYTES // 2)
        # the tail holds more than it shows once anything was dropped, so the byte before it is known
        at_line_start = start == 0 or kept[start - 1 : start] == b"\n"
        assert self.spill_path is not None
        note = "" if self.spill_complete else f" (it holds the first {SPILL_CAP_BYTES // (1024 * 1024)} MB only)"
        text, _omitted = head_and_tail(
            self._head,
            kept[start:],
            size=self.total_bytes,
            newlines=self.total_lines,
            tail_at_line_start=at_line_start,
            path=self.spill_path,
            note=note,
        )
        return text, True


def head_and_tail(
    head: bytes,
    tail: bytes,
    *,
    size: int,
    newlines: int,
    tail_at_line_start: bool,
    path: Path,
    first_line: int = 1,
    offset: int = 0,
    note: str = "",
) -> tuple[str, int]:
    """A span of output too long to show whole, as the model reads it, and how many of its
    bytes were left out. ``head`` and ``tail`` are its first and last bytes (at most half the
    limit each, not overlapping); the span is ``size`` bytes holding ``newlines`` line ends,
    starting at byte ``offset`` of ``path``, on its line ``first_line``.

    Only whole lines are shown, at most ``MAX_LINES // 2`` from each end; a line longer than
    half the limit is shown cut, and says so. Between them one marker names, by their line
    numbers in ``path``, exactly which lines were shown and which left out, and a command that
    prints omitted ones (or the bytes of a cut line): every number in it is true of the file."""
    half = MAX_LINES // 2
    ends = tail.endswith(b"\n")
    last_line = first_line + newlines - (1 if ends else 0)
    # the head: its whole lines, else (one line longer than the head) that line's start
    pieces = head.split(b"\n")[:-1][:half]
    head_cut = not pieces
    head_shown = head if head_cut else b"".join(piece + b"\n" for piece in pieces)
    head_last = first_line if head_cut else first_line + len(pieces) - 1
    # the tail: its whole lines, else (one line longer than the tail) that line's end
    lines = (tail[:-1] if ends else tail).split(b"\n")
    tail_cut = not tail_at_line_start
    if tail_cut and len(lines) > 1:
        lines, tail_cut = lines[1:], False
    if len(lines) > half:
        lines, tail_cut = lines[-half:], False
    tail_shown = b"\n".join(lines) + (b"\n" if ends else b"")
    tail_first = last_line - len(lines) + 1
    omitted_bytes = size - len(head_shown) - len(tail_shown)

    def span(first: int, last: int) -> str:
        return f"line {first}" if first == last else f"lines {first}-{last}"

    shown = [f"the start of line {first_line}" if head_cut else span(first_line, head_last)]
    if tail_cut:
        shown.append(
            f"the end of line {tail_first}" + (f" and {span(tail_first + 1, last_line)}" if last_line > tail_first else "")
        )
    else:
        shown.append(span(tail_first, last_line))
    gap = (head_last + 1, tail_first - 1)
    omitted = []
    if head_cut and tail_cut and tail_first == first_line:
        omitted.append(f"the middle of line {first_line}")
    else:
        if head_cut:
            omitted.append(f"the rest of line {first_line}")
        if gap[0] <= gap[1]:
            omitted.append(span(*gap))
        if tail_cut:
            omitted.append(f"the start of line {tail_first}")
    if gap[0] <= gap[1]:
        hint = f"sed -n '{gap[0]},{min(gap[1], gap[0] + 99)}p' {path}"
    else:  # only part of a long line is missing: its bytes
        hint = f"tail -c +{offset + len(head_shown) + 1} {path} | head -c 2000"
    head_text = head_shown.decode("utf-8", errors="replace") + (" …[line cut]" if head_cut else "")
    tail_text = ("[line cut]… " if tail_cut else "") + tail_shown.decode("utf-8", errors="replace")
    lines_in_all = newlines + (0 if ends else 1)
    counted = f"{lines_in_all} line{'' if lines_in_all == 1 else 's'}, {size} bytes in all"
    marker = (
        f"\n[... output truncated: {counted}; shown here: {' and '.join(shown)}; "
        f"omitted: {', '.join(omitted)} ({omitted_bytes} bytes); full output: {path}{note}; "
        f"read the omitted part with bash: {hint} (or grep -n PATTERN {path}) ...]\n"
    )
    if head_cut:
        marker = "\n" + marker
    return head_text + marker + tail_text, omitted_bytes


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
