"""Command output as a person sees it in a terminal, for the model: colours and other escape
sequences removed, and lines rewritten with carriage returns (progress bars, spinners) reduced
to their final state. A 2-line display that was drawn with 1,480 characters of escapes and
rewrites reaches the model as those 2 lines.

``TerminalText`` works on a byte stream in chunks (a sequence or a rewrite may span two); the
live output a client shows is not passed through it.

Also here: which characters a terminal could interpret or that hide text (``UNSAFE``, which the
app's and the CLI's output guard shows as visible stand-ins), and ``quoted_line``, for a
sentence another program wrote (a server's error description) that Roder quotes in one line
of its own message, wherever that line goes (a status, a log, a tool result, JSON).
"""

from __future__ import annotations

import re

#: CSI (colours, cursor moves, erase), OSC (titles, hyperlinks; ended by BEL or ST), and the
#: two-byte escapes (charset selection, keypad modes).
_ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\^_=>78])")
#: Every character a terminal could interpret or that hides text (newline and tab excepted).
UNSAFE = re.compile(
    "["
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (0x9b is a one-byte CSI)
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u3164\uffa0"  # soft hyphen, fillers, ALM
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"  # Arabic and Syriac format characters
    "\u200b-\u200f"  # zero-width space, non-joiner, joiner, LRM, RLM
    "\u2028-\u202e"  # line and paragraph separators, bidi embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidi isolates, deprecated formats
    "\ud800-\udfff"  # lone surrogates (not even encodable)
    "\ufeff\ufff9-\ufffb"  # byte order mark (zero-width no-break space), interlinear annotations
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"  # language tag and tag characters (invisible ASCII)
    "]"
)
#: The escape sequences of ``_ESCAPES`` in text, and the one-byte CSI (``\x9b``) with its parameters.
_TEXT_ESCAPES = re.compile(_ESCAPES.pattern.decode() + r"|\x9b[0-?]*[ -/]*[@-~]")
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
        """Cleaned lines of ``data``. Output without carriage returns (nearly all of it) takes
        the fast path whole, also when it continues a line cut by the previous chunk's end: a
        command printing gigabytes is cut at every chunk, and going line by line through the
        rewrite path cost seconds of the event loop per 10 MB."""
        if b"\r" not in data:
            if self._column < len(self._line):  # a rewritten line is being overwritten: finish it first
                first = data.find(b"\n") + 1
                if not first:
                    return self._rewrites(data)
                return self._rewrites(data[:first]) + self._lines(data[first:])
            if b"\n" not in data:  # no line to finish yet: keep it as the current line
                self._line += data
                self._column = len(self._line)
                return b""
            end = data.rfind(b"\n") + 1
            done = bytes(self._line) + data[:end]
            self._line = bytearray(data[end:])
            self._column = len(self._line)
            return done
        return self._rewrites(data)

    def _rewrites(self, data: bytes) -> bytes:
        """Lines of ``data`` with each ``\r`` moving back to the line's start, so that later
        text overwrites earlier text as on a screen."""
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


#: Characters no text line holds: C0 controls but tab, newline, carriage return and ESC (whose
#: sequences ``TerminalText`` already removed), DEL, and U+FFFD (a byte that was not UTF-8).
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
#: The control characters of ``_NOT_TEXT``, written as escapes in a line that is text.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")
#: Lines with their ``\n`` (only ``\n`` ends a line here).
_LINES = re.compile("[^\n]*\n|[^\n]+$")
BINARY_NOTE = "[binary output not shown; to see its bytes, pipe the command through: xxd | head]"


def shown_text(text: str) -> str:
    """Command output as the model reads it (``bash`` and ``task_output`` results): each run
    of lines that is mostly not text (``cat`` of an image, ``head -c`` of a program) becomes
    one line saying so and how to look at it, and a few control characters in a line of text
    are written as escapes (``a.py\\x00b.py`` from ``find -print0``). Raw, such bytes are
    noise that costs tokens, and a NUL breaks some providers' requests. Roder's own commands
    (ripgrep's ``--null`` lists) read their output before this, exactly as printed."""
    if _CONTROLS.search(text) is None:
        return text
    out: list[str] = []
    for line in _LINES.findall(text):
        body = line.removesuffix("\n")
        if len(_NOT_TEXT.findall(body)) * 3 > len(body):
            if out and out[-1].startswith(BINARY_NOTE):
                out.pop()  # one note for the whole run; its last line says how the run ends
            out.append(BINARY_NOTE + line[len(body) :])
            continue
        out.append(_CONTROLS.sub(lambda char: f"\\x{ord(char[0]):02x}", line))
    return "".join(out)


def terminal_text(text: str) -> str:
    """A whole text cleaned at once (output read back from a log)."""
    cleaner = TerminalText()
    return (cleaner.feed(text.encode("utf-8", "surrogateescape")) + cleaner.flush()).decode("utf-8", "replace")


def quoted_line(text: str, limit: int = 200) -> str:
    """``text`` from another program, fit to quote inside one line of Roder's own: escape
    sequences removed, every other ``UNSAFE`` character, newline and tab a space, runs of
    spaces one, and at most ``limit`` characters ("…" ends one that was cut)."""
    words = UNSAFE.sub(" ", _TEXT_ESCAPES.sub("", text)).split()
    line = " ".join(words)
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
