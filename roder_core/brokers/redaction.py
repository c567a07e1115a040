"""Redaction of streams: text or bytes that arrive in chunks cut anywhere.

Redacting each chunk on its own lets a secret through in two halves (``sk-ab`` then ``cd...``).
``StreamRedactor`` releases only what is provably safe: it keeps back the end of what it has seen
while that end could still become a secret (the start of a known value, an unfinished token of a
known format, an unterminated private key block), and releases it, redacted, once the next chunk
settles the question or the stream ends (``flush``). When nothing could be a secret it holds
nothing, so a stream with no secret in sight gets no extra latency.

The token formats (recognised even when Roder does not know the value) live here too, so whole
texts (``SecretRedactor.redact``) and streams apply the same rules. It works on ``str``
(model deltas, live tool output) and on ``bytes`` (a command's raw output before it is decoded).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import AnyStr, Generic

#: The replacement of a token found by its format (a known value says whose it is instead).
FORMAT_MARKER = "[redacted]"
#: Characters a token of a known format is made of: a token ends where they end.
WORD_CHARS = string.ascii_letters + string.digits + "_-"
#: Token formats, each after a non-alphanumeric character (or the start): ``task-sk-...`` is a
#: token, the ``sk-`` inside ``task-1234`` is not.
_TOKEN_FORMATS = (
    r"sk-ant-[A-Za-z0-9_\-]{20,}",
    r"sk-(?:proj-|or-v1-)?[A-Za-z0-9_\-]{32,}",
    r"gh[pousr]_[A-Za-z0-9]{36,}",
    r"github_pat_[A-Za-z0-9_]{40,}",
    r"AKIA[0-9A-Z]{16}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AIza[0-9A-Za-z_\-]{35}",
)
#: How each format begins: a word holding one of these may be a token still arriving.
TOKEN_STARTS = ("sk-", *(f"gh{c}_" for c in "pousr"), "github_pat_", "AKIA", *(f"xox{c}-" for c in "abprs"), "AIza")


def _after_boundary(pattern: str) -> str:
    """``pattern`` (which starts with a letter) only where no letter or digit comes before it.

    Written as the first letter, then a look back past it, rather than a look back first: a
    pattern that opens with a literal lets the regex engine skip ahead to that letter, about four
    times faster over ordinary text."""
    return f"{pattern[0]}(?<![A-Za-z0-9]{pattern[0]}){pattern[1:]}"


PEM_BEGIN = "-----BEGIN "
_PEM_BLOCK = r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
#: A private key block begun and not yet ended (or a header still arriving).
_PEM_OPEN = r"-----BEGIN [A-Z ]*(?:-{0,4}\Z|PRIVATE KEY-----)"
TOKEN_PATTERN_TEXT = "|".join([*(_after_boundary(f) for f in _TOKEN_FORMATS), _PEM_BLOCK])
#: Longest text held back for a token format or a key block still arriving; beyond it the text
#: is released (a base64 blob is not worth stalling a stream for). Known values are always held.
MAX_FORMAT_HOLD = 16_384


#: Released text kept as context: enough to see a token start (``github_pat_``, ``-----BEGIN ``)
#: whose first characters were shown before the rest arrived, and the character before it. Those
#: characters say which format follows, not what the secret is, so they are not held back: text
#: that merely ends in ``s`` or ``-`` is shown at once, and a token split inside its start shows
#: as ``sk[redacted]``.
CONTEXT = max(len(start) for start in (*TOKEN_STARTS, PEM_BEGIN))


@dataclass(frozen=True)
class Formats(Generic[AnyStr]):
    """The token-format rules compiled for one string type (``str`` or ``bytes``)."""

    empty: AnyStr
    marker: AnyStr
    word_chars: AnyStr
    pem_begin: AnyStr
    patterns: re.Pattern[AnyStr]
    #: A token start inside a word (the word may be a token still arriving).
    token_start: re.Pattern[AnyStr]
    pem_open: re.Pattern[AnyStr]
    pem_block: re.Pattern[AnyStr]
    #: How every match begins: text without one needs no scan by ``patterns`` (a search for a few
    #: literals is several times faster than one for whole tokens).
    any_start: re.Pattern[AnyStr]
    #: A line-break character: an encoded value wrapped into lines is matched across them.
    line_break: re.Pattern[AnyStr]

    def may_match(self, text: AnyStr) -> bool:
        return self.any_start.search(text) is not None

    def sub(self, text: AnyStr) -> AnyStr:
        """``text`` with every token replaced by the marker."""
        return self.patterns.sub(self.marker, text) if self.may_match(text) else text


def _compile(enc: Callable[[str], AnyStr]) -> Formats[AnyStr]:
    """The formats in one string kind: ``enc`` turns each pattern's text into it."""
    starts = "|".join(_after_boundary(re.escape(start)) for start in TOKEN_STARTS)
    return Formats(
        empty=enc(""),
        marker=enc(FORMAT_MARKER),
        word_chars=enc(WORD_CHARS),
        pem_begin=enc(PEM_BEGIN),
        patterns=re.compile(enc(TOKEN_PATTERN_TEXT)),
        token_start=re.compile(enc(starts)),
        pem_open=re.compile(enc(_PEM_OPEN)),
        pem_block=re.compile(enc(_PEM_BLOCK)),
        any_start=re.compile(enc(f"{starts}|{re.escape(PEM_BEGIN)}")),
        line_break=re.compile(enc("[\r\n]")),
    )


def _as_text(text: str) -> str:
    return text


def _as_bytes(text: str) -> bytes:
    return text.encode()


@functools.cache
def text_formats() -> Formats[str]:
    return _compile(_as_text)


@functools.cache
def byte_formats() -> Formats[bytes]:
    return _compile(_as_bytes)


#: Known values as (value, replacement) pairs, longest first.
ValuePairs = Sequence[tuple[AnyStr, AnyStr]]
#: Encoded forms of known values that output wraps into lines (``base64``, ``xxd -p``): the
#: pattern matching the form with line breaks between its characters, its replacement, the form.
WrappedForms = Sequence[tuple[re.Pattern[AnyStr], AnyStr, AnyStr]]


class StreamRedactor(Generic[AnyStr]):
    """Redacts one stream. ``feed`` returns what may be shown now; ``flush`` (at the end of the
    stream, however it ends) returns the rest, redacted.

    ``values`` is called on every chunk, so a value learned mid-stream (a key stored while a turn
    runs) is caught from the next chunk on. The end of what was released is kept as context
    (``CONTEXT``): it shows whether a token format starts after a non-alphanumeric character, as in
    the whole text, and catches a token whose start was released before the rest arrived.
    """

    def __init__(
        self,
        values: Callable[[], ValuePairs[AnyStr]],
        formats: Formats[AnyStr],
        wrapped: Callable[[], WrappedForms[AnyStr]] | None = None,
    ) -> None:
        self._values: Callable[[], ValuePairs[AnyStr]] = values
        #: Like ``values``, for encoded forms cut by line breaks (``SecretRedactor.redact`` has them too).
        self._wrapped: Callable[[], WrappedForms[AnyStr]] | None = wrapped
        self._formats: Formats[AnyStr] = formats
        self._carry: AnyStr = formats.empty
        self._before: AnyStr = formats.empty
        #: Whether text was released before ``_before``: its first character is then context for
        #: the character after it only (a match cannot start there).
        self._trimmed = False

    @property
    def held(self) -> int:
        """How much is kept back (characters, or bytes), waiting for the next chunk or the end."""
        return len(self._carry)

    def feed(self, chunk: AnyStr) -> AnyStr:
        pending = self._carry + chunk if self._carry else chunk
        for value, replacement in self._values():
            if value in pending:
                pending = pending.replace(value, replacement)
        if self._wrapped is not None and self._formats.line_break.search(pending):
            for pattern, replacement, _form in self._wrapped():
                pending = pattern.sub(replacement, pending)
        start = len(self._before)
        buffer = self._before + pending if start else pending
        end = self._safe_end(buffer, start)
        self._carry = buffer[end:]
        return self._release(buffer, start, end)

    def flush(self) -> AnyStr:
        buffer = self._before + self._carry
        self._carry = self._formats.empty
        return self._release(buffer, len(self._before), len(buffer))

    def _release(self, buffer: AnyStr, start: int, end: int) -> AnyStr:
        """``buffer[start:end]`` with token formats replaced (``buffer[:start]`` is context: a
        match that began there has its remaining part replaced)."""
        if end <= start:
            return self._formats.empty
        first = int(self._trimmed)
        self._before = buffer[max(0, end - CONTEXT) : end]
        self._trimmed = self._trimmed or end > CONTEXT
        if not self._formats.may_match(buffer):
            return buffer[start:end]
        parts: list[AnyStr] = []
        last = start
        for match in self._formats.patterns.finditer(buffer, first, end):
            if match.end() <= start:
                continue
            parts += (buffer[last : max(match.start(), start)], self._formats.marker)
            last = match.end()
        if not parts:
            return buffer[start:end]
        parts.append(buffer[last:end])
        return self._formats.empty.join(parts)

    def _safe_end(self, buffer: AnyStr, start: int) -> int:
        """Where the part of ``buffer`` that can be shown now ends (``buffer[:start]`` is context)."""
        size = len(buffer)
        end = size
        for value, _ in self._values():
            end = min(end, _unfinished_value(buffer, value, start))
        formats = self._formats
        for _pattern, _replacement, form in self._wrapped() if self._wrapped is not None else ():
            end = min(end, _unfinished_wrapped(buffer, form, start, formats))
        first = int(self._trimmed)
        held = size
        word = max(first, len(buffer.rstrip(formats.word_chars)))  # where the trailing word starts
        if word < size and (found := formats.token_start.search(buffer, word)) is not None:
            held = max(found.start(), start)  # a token still arriving
        begin = buffer.rfind(formats.pem_begin, first)
        if begin >= 0 and formats.pem_open.match(buffer, begin) and not formats.pem_block.match(buffer, begin):
            held = min(held, max(begin, start))  # a private key block not ended yet
        if size - held <= MAX_FORMAT_HOLD:
            end = min(end, held)
        if end < size and formats.may_match(buffer):  # never cut a match in two: each part could escape
            for match in formats.patterns.finditer(buffer, first):
                if match.start() >= end:
                    break
                if match.end() > end:
                    return max(match.start(), start)
        return end


def _unfinished_wrapped(buffer: AnyStr, form: AnyStr, start: int, formats: Formats[AnyStr]) -> int:
    """Where the end of ``buffer[start:]`` that begins ``form`` with line breaks inside starts
    (len if none): at most a line break after each character, so the last ``3 * len(form)``."""
    window = max(start, len(buffer) - 3 * len(form))
    if formats.line_break.search(buffer, window) is None:
        return len(buffer)  # without a line break it is a plain value: ``_unfinished_value``
    first = form[:1]
    index = buffer.find(first, window)
    while index >= 0:
        tail = formats.line_break.sub(formats.empty, buffer[index:])
        if len(tail) < len(form) and form.startswith(tail):
            return index
        index = buffer.find(first, index + 1)
    return len(buffer)


def _unfinished_value(buffer: AnyStr, value: AnyStr, start: int) -> int:
    """Where the longest end of ``buffer[start:]`` that begins ``value`` starts (len if none)."""
    first = value[:1]
    index = buffer.find(first, max(start, len(buffer) - len(value) + 1))
    while index >= 0:
        if value.startswith(buffer[index:]):
            return index
        index = buffer.find(first, index + 1)
    return len(buffer)
