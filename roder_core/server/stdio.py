"""Newline-delimited JSON-RPC 2.0 on stdin/stdout (``roder app-server``).

One request per line in, one response or notification per line out; warnings go to stderr.
Lines may be far larger than 64 KB (up to ``MAX_LINE`` bytes); a longer line is discarded up to
its newline and answered with ``PARSE_ERROR``, and the connection stays usable. When stdin closes, the
requests in flight finish, running turns run to their end (approvals nobody can answer any more
are denied) and the server exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from typing import BinaryIO

from roder_core.ir import ApprovalDecision
from roder_core.server.connection import Connection
from roder_core.server.dispatcher import Dispatcher, parse_error
from roder_core.server.line_stream import read_lines
from roder_core.server.wire import MAX_LINE
from roder_core.threads.events import ApprovalRequested

log = logging.getLogger(__name__)


async def open_reader(stream: BinaryIO, limit: int = MAX_LINE) -> asyncio.StreamReader:
    """An asyncio reader over a pipe, or over any file through a feeder thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError):  # regular files and some terminals are not pipes

        def feed() -> None:
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=feed, name="roder-stdin", daemon=True).start()
    return reader


class LineWriter:
    """Writes whole lines to a file descriptor without blocking the event loop: through an
    asyncio pipe transport when the fd is a pipe, through a thread otherwise (regular files)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._stream: asyncio.StreamWriter | None = None
        self._checked = False

    async def _open(self) -> None:
        self._checked = True
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(self._fd, "wb", buffering=0, closefd=False)
        try:
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        except (ValueError, OSError):
            return
        self._stream = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write_line(self, text: str) -> None:
        if not self._checked:
            await self._open()
        data = (text + "\n").encode("utf-8")
        if self._stream is not None:
            self._stream.write(data)
            await self._stream.drain()
        else:
            await asyncio.to_thread(_write_all, self._fd, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


async def deny_unanswerable_approvals(dispatcher: Dispatcher) -> None:
    """After the only client left: let running turns end, denying approvals nobody can answer
    and interrupting turns that wait for a person's answer."""
    runtime = dispatcher.runtime
    queue = dispatcher.connect()
    deny = ApprovalDecision(decision="deny", reason="the client disconnected; nobody can approve")
    try:
        for request in runtime.pending_approvals():
            runtime.resolve_approval(request.approval_id, deny)
        while any(runtime.active_turn_id(t.id) for t in runtime.open_threads()):
            for question in runtime.pending_user_inputs():  # nobody can answer: end that turn
                await runtime.interrupt(question.thread_id)
            try:
                async with asyncio.timeout(0.2):
                    event = await queue.get()
            except TimeoutError:
                continue
            if isinstance(event, ApprovalRequested):
                runtime.resolve_approval(event.request.approval_id, deny)
    finally:
        queue.close()


async def serve_stdio(dispatcher: Dispatcher, stdin: BinaryIO | None = None, stdout_fd: int | None = None) -> None:
    """Serve one client on stdin/stdout until stdin closes."""
    reader = await open_reader(stdin or sys.stdin.buffer)
    writer = LineWriter(sys.stdout.fileno() if stdout_fd is None else stdout_fd)
    connection = Connection(dispatcher, writer.write_line, lines=True)

    def too_long() -> None:
        connection.queue.put_reply(parse_error(f"line longer than {MAX_LINE} bytes was discarded"))

    try:
        await connection.serve(read_lines(reader, too_long))
        await deny_unanswerable_approvals(dispatcher)
    finally:
        await connection.close()


def reserve_stdout() -> int:
    """Keep the real stdout for protocol lines and point fd 1 at stderr, so a stray print()
    from an extension can never corrupt the JSON stream."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    with contextlib.suppress(Exception):
        sys.stdout = sys.stderr
    return protocol_fd
