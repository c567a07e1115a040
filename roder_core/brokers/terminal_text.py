"""Command output as a person sees it in a terminal, for the model: colours and other escape
sequences removed, and lines rewritten with carriage returns (progress bars, spinners) reduced
to their final state. A 2-line display that was drawn with 1,480 characters of escapes and
rewrites reaches the model as those 2 lines.

``TerminalText`` works on a byte stream in chunks (a sequence or a rewrite may span two); the
live output a client shows is not passed through it.
"""

from __future__ import annotations

import re

#: CSI (colours, cursor moves, erase), OSC (titles, hyperlinks; ended by BEL or ST), and the
#: two-byte escapes (charset selection, keypad modes).
_ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\^_=>78])")
#: An escape sequence may be cut by a chunk's end: hold back at most this much after an ESC.
_LONGEST_HELD = 512


class TerminalText:
    """Feeds bytes in, gives cleaned bytes out; ``flush`` at the end of the stream."""

    def __init__(self) -> None:
        self._held = b""  # the start of an escape sequence cut by the chunk's end
        self._line = bytearray()  # the visible state of the current line
        self._column = 0

    def feed(self, data: bytes) -> bytes:
        data = self._held + data
        self._held = b""
        escape = data.rfind(b"\x1b")
        if escape >= 0 and len(data) - escape < _LONGEST_HELD and not _ESCAPES.match(data, escape):
            data, self._held = data[:escape], data[escape:]
        return self._lines(_ESCAPES.sub(b"", data))

    def flush(self) -> bytes:
        out = self._lines(self._held) + bytes(self._line)
        self._held, self._line, self._column = b"", bytearray(), 0
        return out

    def _lines(self, data: bytes) -> bytes:
        if b"\r" not in data and not self._line:
            if b"\n" not in data:  # no line to finish yet: keep it as the current line
                self._line += data
                self._column = len(self._line)
                return b""
            end = data.rfind(b"\n") + 1
            self._line += data[end:]
            self._column = len(self._line)
            return data[:end]
        out = bytearray()
        parts = data.split(b"\n")
        for index, part in enumerate(parts):
            for number, segment in enumerate(part.split(b"\r")):
                if number:
                    self._column = 0
                self._line[self._column : self._column + len(segment)] = segment
                self._column += len(segment)
            if index < len(parts) - 1:
                out += self._line + b"\n"
                self._line, self._column = bytearray(), 0
        return bytes(out)


def terminal_text(text: str) -> str:
    """A whole text cleaned at once (output read back from a log)."""
    cleaner = TerminalText()
    return (cleaner.feed(text.encode("utf-8", "surrogateescape")) + cleaner.flush()).decode("utf-8", "replace")
