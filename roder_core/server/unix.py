"""The background host's transport: JSON-RPC lines on a private unix socket (``roder serve``).

Only this user can reach it, three ways over: the socket lives in a directory of its own with
mode 0700 (refused if another user owns it or it is open to others, so a planted directory in
``/tmp`` is never used), the socket itself has mode 0600, and every connecting process's
credentials (``SO_PEERCRED``) must name this user. Each client is one ``Connection`` with its own
bounded notification queue, exactly like a stdio or WebSocket client. A client that goes away
changes nothing in the runtime: its turns keep running and its pending approvals wait for the
next client (``initialize`` and ``thread/live`` deliver them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roder_core.server.connection import Connection
from roder_core.server.host_paths import HostDirError, HostPaths, environment_digest
from roder_core.server.line_stream import read_lines
from roder_core.server.wire import MAX_LINE

if TYPE_CHECKING:
    from roder_core.server.dispatcher import Dispatcher

log = logging.getLogger(__name__)


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux ``SO_PEERCRED``), or None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        data = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", data)
    return int(uid)


class UnixHost:
    """Serves a dispatcher on the private socket until ``request_stop``.

    Registered as the dispatcher's ``host`` service, so ``host/status`` can describe it and
    ``host/stop`` (accepted only on this socket) can end it.
    """

    def __init__(self, dispatcher: Dispatcher, paths: HostPaths, flags: Mapping[str, object] | None = None) -> None:
        self.dispatcher = dispatcher
        self.paths = paths
        #: The runtime flags the host was started with (None where the config decides).
        self.flags = dict(flags or {})
        self.environment_digest = environment_digest(os.environ)
        self.started_at = time.time()
        self.stopped = asyncio.Event()
        self.connections: dict[Connection, asyncio.StreamWriter] = {}
        self._server: asyncio.AbstractServer | None = None

    @property
    def socket_path(self) -> Path:
        return self.paths.socket

    def request_stop(self) -> None:
        self.stopped.set()

    async def start(self) -> None:
        self.paths.ensure_private()
        path = self.paths.socket
        if path.exists() or path.is_symlink():
            if await _answers(path):
                raise HostDirError(f"a Roder host is already listening on {path}")
            path.unlink()  # left by a host that died
        previous = os.umask(0o177)  # the socket is born 0600, never briefly wider
        try:
            self._server = await asyncio.start_unix_server(self._handle, path=str(path), limit=MAX_LINE)
        finally:
            os.umask(previous)
        os.chmod(path, 0o600)
        record = {"pid": os.getpid(), "cwd": str(self.dispatcher.runtime.options.cwd), "startedAt": self.started_at}
        self.paths.record.write_text(json.dumps(record), encoding="utf-8")
        os.chmod(self.paths.record, 0o600)
        self.dispatcher.services["host"] = self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else None
        if uid is not None and uid not in (os.getuid(), 0):
            log.warning("refused a unix-socket client of uid %s", uid)
            writer.close()
            return

        async def send(text: str) -> None:
            writer.write(text.encode("utf-8") + b"\n")
            await writer.drain()

        conn = Connection(self.dispatcher, send, queue_size=self.dispatcher.queue_size, lines=True)
        conn.context.data["transport"] = "unix"
        self.connections[conn] = writer

        def too_long() -> None:
            from roder_core.server.dispatcher import parse_error

            conn.queue.put_reply(parse_error(f"line longer than {MAX_LINE} bytes was discarded"))

        try:
            await conn.serve(read_lines(reader, too_long))
        except (ConnectionError, OSError) as exc:
            log.info("unix client went away: %s", exc)
        finally:
            self.connections.pop(conn, None)
            await conn.close(flush_timeout=1.0)
            with contextlib.suppress(Exception):
                writer.close()

    async def close(self) -> None:
        """Stop accepting, let each client's queued replies go out, remove the socket."""
        if self._server is not None:
            self._server.close()
        for conn, writer in list(self.connections.items()):
            await conn.close(flush_timeout=1.0)
            writer.close()  # ends that client's reader too
        if self._server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._server.wait_closed()
        for path in (self.paths.socket, self.paths.record):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


async def _answers(path: Path) -> bool:
    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
    except OSError:
        return False
    writer.close()
    return True
