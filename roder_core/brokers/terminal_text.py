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
#: Extended_Pictographic (Unicode's emoji-data.txt): the characters an emoji ZWJ sequence joins.
EXTENDED_PICTOGRAPHIC = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9-\u21aa\u231a-\u231b\u2328\u23cf\u23e9-\u23f3"
    "\u23f8-\u23fa\u24c2\u25aa-\u25ab\u25b6\u25c0\u25fb-\u25fe\u2600-\u2604\u260e\u2611\u2614-\u2615\u2618"
    "\u261d\u2620\u2622-\u2623\u2626\u262a\u262e-\u262f\u2638-\u263a\u2640\u2642\u2648-\u2653\u265f-\u2660"
    "\u2663\u2665-\u2666\u2668\u267b\u267e-\u267f\u2692-\u2697\u2699\u269b-\u269c\u26a0-\u26a1\u26a7"
    "\u26aa-\u26ab\u26b0-\u26b1\u26bd-\u26be\u26c4-\u26c5\u26c8\u26ce-\u26cf\u26d1\u26d3-\u26d4\u26e9-\u26ea"
    "\u26f0-\u26f5\u26f7-\u26fa\u26fd\u2702\u2705\u2708-\u270d\u270f\u2712\u2714\u2716\u271d\u2721\u2728"
    "\u2733-\u2734\u2744\u2747\u274c\u274e\u2753-\u2755\u2757\u2763-\u2764\u2795-\u2797\u27a1\u27b0\u27bf"
    "\u2934-\u2935\u2b05-\u2b07\u2b1b-\u2b1c\u2b50\u2b55\u3030\u303d\u3297\u3299\U0001f004\U0001f02c-\U0001f02f"
    "\U0001f094-\U0001f09f\U0001f0af-\U0001f0b0\U0001f0c0\U0001f0cf-\U0001f0d0\U0001f0f6-\U0001f0ff"
    "\U0001f170-\U0001f171\U0001f17e-\U0001f17f\U0001f18e\U0001f191-\U0001f19a\U0001f1af-\U0001f1e5"
    "\U0001f201-\U0001f20f\U0001f21a\U0001f22f\U0001f232-\U0001f23a\U0001f23c-\U0001f23f\U0001f249-\U0001f25f"
    "\U0001f266-\U0001f321\U0001f324-\U0001f393\U0001f396-\U0001f397\U0001f399-\U0001f39b\U0001f39e-\U0001f3f0"
    "\U0001f3f3-\U0001f3f5\U0001f3f7-\U0001f3fa\U0001f400-\U0001f4fd\U0001f4ff-\U0001f53d\U0001f549-\U0001f54e"
    "\U0001f550-\U0001f567\U0001f56f-\U0001f570\U0001f573-\U0001f57a\U0001f587\U0001f58a-\U0001f58d\U0001f590"
    "\U0001f595-\U0001f596\U0001f5a4-\U0001f5a5\U0001f5a8\U0001f5b1-\U0001f5b2\U0001f5bc\U0001f5c2-\U0001f5c4"
    "\U0001f5d1-\U0001f5d3\U0001f5dc-\U0001f5de\U0001f5e1\U0001f5e3\U0001f5e8\U0001f5ef\U0001f5f3"
    "\U0001f5fa-\U0001f64f\U0001f680-\U0001f6c5\U0001f6cb-\U0001f6d2\U0001f6d5-\U0001f6e5\U0001f6e9"
    "\U0001f6eb-\U0001f6f0\U0001f6f3-\U0001f6ff\U0001f7dc-\U0001f7f0\U0001f80c-\U0001f80f\U0001f848-\U0001f84f"
    "\U0001f85a-\U0001f85f\U0001f888-\U0001f88f\U0001f8ae-\U0001f8af\U0001f8bc-\U0001f8bf\U0001f8c2-\U0001f8cf"
    "\U0001f8d9-\U0001f8ff\U0001f90c-\U0001f93a\U0001f93c-\U0001f945\U0001f947-\U0001f9ff\U0001fa58-\U0001fa5f"
    "\U0001fa6e-\U0001faff\U0001fc00-\U0001fffd"
)
#: Skin-tone modifiers and the emoji variation selector, which may come between a pictograph and
#: the joiner after it.
_EMOJI_EXTEND = "\ufe0f\U0001f3fb-\U0001f3ff"
#: The subdivision flags emoji fonts draw (Unicode's recommended set): the black flag, the
#: subdivision spelled in tag characters, the cancel tag; England is U+1F3F4, "gbeng" in tags,
#: U+E007F. Any other spelling draws as a bare black flag, its tags unseen: up to seven hidden
#: characters per flag, so only these pass.
_FLAG_SPELLINGS = ("gbeng", "gbsct", "gbwls")


def _tags(text: str) -> str:
    return "".join(chr(0xE0000 + ord(c)) for c in text)


def _joined_or_flagged() -> str:
    """Where a zero-width joiner or a tag character is what it looks like, as a lookahead after
    it. A joiner joins two pictographs (a family, a profession, a rainbow flag): after a pictograph
    (and a skin tone or the emoji selector) and before one. A tag is within one of the drawn
    subdivision flags' tag sequences (``_FLAG_SPELLINGS``). Anywhere else (between letters, at either end
    of a text, in a run, beside a bidi control) a joiner could make a command look like another,
    and tags spell text that is invisible, to a model too."""
    joined = [
        f"(?<=[{EXTENDED_PICTOGRAPHIC}]\u200d)[{EXTENDED_PICTOGRAPHIC}]",
        f"(?<=[{EXTENDED_PICTOGRAPHIC}][{_EMOJI_EXTEND}]\u200d)[{EXTENDED_PICTOGRAPHIC}]",
    ]
    flagged = [
        f"(?<=\U0001f3f4{_tags(spelling[:before])}){_tags(spelling[before:])}\U000e007f"
        for spelling in _FLAG_SPELLINGS
        for before in range(1, len(spelling) + 1)
    ]
    ended = [f"(?<=\U0001f3f4{_tags(spelling)}\U000e007f)" for spelling in _FLAG_SPELLINGS]
    return "(?!" + "|".join(joined + flagged + ended) + ")"


#: Every character a terminal could interpret or that hides text (newline and tab excepted), one
#: character per match, but a zero-width joiner within an emoji sequence and the tags of a flag,
#: which are what they look like. One leading class, so a search skips safe text as fast as a
#: class alone does.
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
    "]" + _joined_or_flagged()
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
#: What a tool from outside Roder (an MCP server, a process extension) is told instead.
FOREIGN_BINARY_NOTE = "[binary data not shown]"


def shown_text(text: str, note: str = BINARY_NOTE) -> str:
    """Command output as the model reads it (``bash`` and ``task_output`` results): each run
    of lines that is mostly not text (``cat`` of an image, ``head -c`` of a program) becomes
    one line saying so and how to look at it, and a few control characters in a line of text
    are written as escapes (``a.py\\x00b.py`` from ``find -print0``). Raw, such bytes are
    noise that costs tokens, and a NUL breaks some providers' requests. Roder's own commands
    (ripgrep's ``--null`` lists) read their output before this, exactly as printed. ``note``
    is the line a run of binary becomes (a foreign tool's result has no command to pipe)."""
    if _CONTROLS.search(text) is None:
        return text
    out: list[str] = []
    for line in _LINES.findall(text):
        body = line.removesuffix("\n")
        if len(_NOT_TEXT.findall(body)) * 3 > len(body):
            if out and out[-1].startswith(note):
                out.pop()  # one note for the whole run; its last line says how the run ends
            out.append(note + line[len(body) :])
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
