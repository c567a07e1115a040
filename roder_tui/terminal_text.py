"""What reaches a terminal: every character that could be interpreted is shown, never sent raw.

Text from outside Roder (model replies, tool output, file contents, MCP results, thread titles,
error messages that quote data) may carry terminal control sequences: an OSC 52 clipboard write,
a title change, cursor moves, or bidi overrides and zero-width characters that make a command
look like another. ``visible`` is the one sanitizer for all of it, in the manner of OpenSSH's
and tmux's treatment of untrusted text: C0 controls (but newline and tab), DEL, C1 controls,
Unicode format characters (bidi embeddings, overrides and isolates, zero-width spaces and
joiners, the byte order mark, tag characters), line and paragraph separators, lone surrogates and
invisible fillers become visible stand-ins: ``␛`` for ESC (the Control Pictures block for C0 and
DEL), ``<U+202E>`` for the rest. Nothing is dropped, so what is shown says what is there. A
joiner inside an emoji sequence and a flag's tags are what they look like, and pass (``UNSAFE``
says where).

It is applied at the two places where text becomes terminal output:

- the full-screen app (and ``roder attach``, ``roder web``, which run the same app):
  ``guard_textual`` makes ``Strip.render``, where Textual turns every segment of every widget into
  the characters it writes, pass segment text through ``visible``, and drops a hyperlink whose
  target holds such characters (segments a library marks as control sequences, such as an
  image's graphics, and Roder's own writes to the driver, its OSC 52 copy, pass as they are;
  styling is in segment styles, not text). Rich's and Textual's own
  control-code filters, which drop a few C0 characters when text is laid out, are replaced by
  ``visible`` too, so the stand-ins are part of the layout instead of widening a line after it;
- everything else Roder prints (``roder -p``, ``roder sessions show``, the other subcommands,
  their error messages): ``guard_stdio`` wraps ``sys.stdout`` and ``sys.stderr`` when they are
  terminals. Output to a pipe or a file is left byte for byte as it was (a script reading
  ``roder -p`` gets the model's text exactly). Roder's own styled output there (``roder
  batch``'s tables) comes from ``rich_console``, past the wrapper, with its text laid out
  through ``visible``; JSON lines come from ``json_line``, with ``\\uXXXX`` escapes. A question
  asked on the terminal goes through ``ask``: ``input()`` and ``getpass`` write their prompt
  past that wrapper (readline to the C library's stdout, getpass to ``/dev/tty``), and a
  prompt can quote data (a plugin manifest's option title).
"""

from __future__ import annotations

import io
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from roder_core.brokers.terminal_text import UNSAFE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment
    from rich.style import Style

#: ``\r`` right before ``\n`` is a line ending, shown as the line break it ends.
_CRLF = re.compile("\r(?=\n)")


def _stand_in(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ .. ␟, ␛ for ESC
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def visible(text: str, *, line_endings: bool = True) -> str:
    """``text`` with every unsafe character replaced by a visible stand-in.

    ``line_endings=False`` also shows the ``\\r`` of a ``\\r\\n`` (an approval preview shows the
    exact command, and bash would see that ``\\r``). Applying it twice changes nothing more.
    """
    if UNSAFE.search(text) is None:
        return text
    if line_endings:
        text = _CRLF.sub("", text)
    return UNSAFE.sub(_stand_in, text)


def has_unsafe(text: str) -> bool:
    """Whether ``visible`` would change ``text`` (apart from line endings)."""
    return UNSAFE.search(_CRLF.sub("", text)) is not None


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells a character beyond the BMP as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_line(data: object) -> str:
    """One JSON document on one line, with unsafe characters written as ``\\uXXXX`` escapes: the
    same value for any JSON reader, and nothing a terminal would act on when it is shown."""
    import json

    return UNSAFE.sub(_json_escape, json.dumps(data, ensure_ascii=False))


class TerminalStream(io.TextIOBase):
    """A text stream writing to a terminal through ``visible``; everything else is the wrapped
    stream's (its encoding, ``fileno``, ``isatty``, ``buffer``)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return True

    @property
    def encoding(self) -> Any:  # type: ignore[override]
        return self.stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.stream.errors

    @property
    def closed(self) -> bool:
        return bool(self.stream.closed)

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def ask(question: str, *, hidden: bool = False) -> str:
    """One line read from the person at the terminal after ``question`` (``hidden``: not echoed,
    for a key or a token). The one way Roder's commands prompt: the prompt is made ``visible``
    here, since neither ``input`` nor ``getpass`` writes it through ``guard_stdio``'s wrapper."""
    shown = visible(question, line_endings=False)
    if hidden:
        import getpass

        return getpass.getpass(shown)
    return input(shown)


def guard_stdio(names: tuple[str, ...] = ("stdout", "stderr")) -> None:
    """Route these of ``sys.stdout`` and ``sys.stderr`` through ``visible`` where they are
    terminals."""
    for name in names:
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, TerminalStream):
            continue
        try:
            tty = stream.isatty()
        except (OSError, ValueError):
            continue
        if tty:
            setattr(sys, name, TerminalStream(stream))


def _guard_rich_text() -> None:
    """Rich's ``Text`` drops a few control codes as text is laid out; show all of them instead."""
    import rich.text

    rich.text.strip_control_codes = visible  # type: ignore[attr-defined,assignment]


def rich_console(stream: TextIO, **options: Any) -> Console:
    """A Rich console for Roder's own styled output outside the app (tables, progress bars): its
    styling reaches the terminal (past ``guard_stdio``'s wrapper), the text it lays out passes
    ``visible`` first."""
    import rich.console

    _guard_rich_text()
    return rich.console.Console(file=stream.stream if isinstance(stream, TerminalStream) else stream, **options)


def _unsafe_segment(segment: Segment) -> bool:
    text, style, control = segment
    if control is not None:  # a library's own sequence (an image's graphics): passed as it is
        return False
    return UNSAFE.search(text) is not None or (style is not None and _unsafe_link(style))


def _unsafe_link(style: Style) -> bool:
    """A hyperlink (OSC 8) whose target could end the sequence and start another."""
    return bool(style.link) and UNSAFE.search(style.link or "") is not None


def _shown(segment: Segment) -> Segment:
    from rich.segment import Segment

    text, style, control = segment
    if control is not None:
        return segment
    if style is not None and _unsafe_link(style):
        style = style.update_link(None)
    return Segment(visible(text), style, control)


def _guarded_render(original: Any) -> Any:
    from textual.strip import Strip

    def render(self: Strip, console: Console) -> str:
        if self._render_cache is None and any(_unsafe_segment(segment) for segment in self._segments):
            shown = Strip([_shown(segment) for segment in self._segments])
            # a stand-in is wider than the character it stands for (which Rich measures as 0
            # cells): the row keeps the width it was laid out with
            self._render_cache = original(shown.crop(0, self.cell_length), console)
        return str(original(self, console))

    render.roder_guarded = True  # type: ignore[attr-defined]
    return render


def guard_textual() -> None:
    """Make every character Textual draws pass through ``visible`` (idempotent).

    Called before the app is built. ``Strip.render`` is where Textual turns each segment of a
    frame into what it writes to the terminal: no widget, screen, toast or modal draws any other
    way. Rich's ``Text`` and Textual's ``Content`` strip a few control codes as text is laid out;
    they show all of them instead, so the stand-ins take their place in the layout.
    """
    import textual.content
    from textual.strip import Strip

    if getattr(Strip.render, "roder_guarded", False):
        return
    Strip.render = _guarded_render(Strip.render)  # type: ignore[method-assign]
    _guard_rich_text()
    textual.content._strip_control_codes = visible  # type: ignore[assignment]


def textual_guarded() -> bool:
    """Whether ``guard_textual`` is in force (the app checks it before drawing anything)."""
    from textual.strip import Strip

    return bool(getattr(Strip.render, "roder_guarded", False))
