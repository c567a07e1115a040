"""Newline-delimited messages read from an asyncio stream, with a large but bounded line.

Shared by every JSON-lines transport (stdio, the host's unix socket, ACP) and by the clients of
a host, which must not import the server's dispatcher to read its replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable


async def read_lines(reader: asyncio.StreamReader, on_too_long: Callable[[], None]) -> AsyncIterator[bytes]:
    """Lines from a stream with a large limit (``roder_core.server.wire.MAX_LINE`` for the
    protocol's); an over-long line is skipped, not fatal."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                yield exc.partial
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
            await _skip_to_newline(reader)
            on_too_long()
            continue
        yield line


async def _skip_to_newline(reader: asyncio.StreamReader) -> None:
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return
