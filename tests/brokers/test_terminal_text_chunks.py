"""Command output cleaned chunk by chunk reads exactly as the whole output cleaned at once, however
the chunks fall: lines cut by a chunk's end, rewrites (``\\r``) spanning chunks, and long runs of
plain lines (the fast path, which a command printing gigabytes takes nearly always)."""

from __future__ import annotations

import random

import pytest

from roder_core.brokers.terminal_text import TerminalText


def screen(data: bytes) -> bytes:
    """What a terminal shows for ``data``: each ``\\r`` goes back to the line's start and later
    text overwrites earlier text; each ``\\n`` ends the line."""
    out, line, column = bytearray(), bytearray(), 0
    for byte in data:
        if byte == ord("\n"):
            out += line + b"\n"
            line, column = bytearray(), 0
        elif byte == ord("\r"):
            column = 0
        else:
            line[column : column + 1] = bytes([byte])
            column += 1
    return bytes(out + line)


def chunked(data: bytes, rng: random.Random, largest: int) -> bytes:
    cleaner, out, at = TerminalText(), bytearray(), 0
    while at < len(data):
        size = rng.randint(1, largest)
        out += cleaner.feed(data[at : at + size])
        at += size
    return bytes(out + cleaner.flush())


@pytest.mark.parametrize(
    "alphabet", [b"ab\n", b"ab\r\n", b"abc\r\r\n", b"a\r"], ids=["plain", "rewrites", "many-rewrites", "no-newline"]
)
def test_any_chunking_gives_the_screens_lines(alphabet: bytes) -> None:
    rng = random.Random(alphabet)
    for _ in range(2000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert chunked(data, rng, 9) == screen(data), data


def test_a_long_plain_output_cut_mid_line_keeps_every_line() -> None:
    data = b"".join(b"line %d of the output\n" % n for n in range(200_000))
    assert chunked(data, random.Random(7), 70_000) == data


def test_a_rewrite_then_plain_text_overwrites_in_place() -> None:
    cleaner = TerminalText()
    out = cleaner.feed(b"progress 10%\rdone") + cleaner.feed(b"!\nnext line\n") + cleaner.flush()
    assert out == b"done!ess 10%\nnext line\n"
