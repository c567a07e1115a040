"""An MCP server's log file in Roder's cache (``mcp-logs/<server>.log``), written only here.

Everything a server says that Roder keeps goes through ``ServerLog``: a stdio server's stderr
(read from a pipe by ``pump``, never handed the file itself) and the log messages it sends
(``notifications/message``). Both are redacted with the run's known secrets (``HostContext.secrets``)
plus the secret-named variables of the server's own ``env``: a server that prints its API key,
or an error quoting a token it was given, leaves ``[redacted:NAME]`` in the log, not the value.

The pipe is read continuously whatever the server writes, so a server flooding its stderr never
blocks on a full pipe; what is held in memory is bounded (a chunk, plus the end of the text that
could still be the start of a secret, at most ``MAX_HELD`` characters). What is kept on disk
is bounded too: the file is a ``bounded_log.RotatingLogFile`` (rotated to ``<server>.log.1`` at
its limit, with a line saying what went where), so a server printing without end never fills
the disk.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from roder_core.bounded_log import RotatingLogFile
from roder_core.brokers.secrets import SecretRedactor, is_secret_name

logger = logging.getLogger(__name__)

#: Bytes read from the stderr pipe at a time.
CHUNK = 65536
#: Characters of not-yet-written text a stream may hold back (a token format that has begun and
#: not ended); beyond this the held text is written out, redacted as it stands.
MAX_HELD = 65536


def server_redactor(run: SecretRedactor, server_env: Iterable[tuple[str, str]]) -> SecretRedactor:
    """The run's secrets plus the secret-named values of the server's ``env`` (a key configured
    for this server only is known to nothing else)."""
    redactor = SecretRedactor()
    for name, value in zip(run.names, run.values(), strict=True):
        redactor.add(name, value)
    for name, value in server_env:
        if is_secret_name(name):
            redactor.add(name, value)
    return redactor


class ServerLog:
    """One server's log file; ``offset`` is where the current connection's part begins (the
    file's start after a rotation). The redactor is made again at every connection, so a secret
    the run learnt since (a key stored meanwhile) is redacted from the next start of the server on."""

    def __init__(self, path: Path, run_secrets: SecretRedactor, server_env: Iterable[tuple[str, str]]) -> None:
        self.path = path
        self._file = RotatingLogFile(path)
        self._run_secrets = run_secrets
        self._server_env = tuple(server_env)
        self.redactor = server_redactor(run_secrets, self._server_env)
        self._drained = asyncio.Event()
        self._unwritable = False

    @property
    def offset(self) -> int:
        return self._file.offset

    def begin(self) -> None:
        """A connection starts: its stderr is what is written from here on."""
        self.redactor = server_redactor(self._run_secrets, self._server_env)
        self._file.begin_part()
        self._drained = asyncio.Event()

    async def drained(self, within: float) -> None:
        """Wait at most ``within`` seconds for the current stderr pipe to be read to its end (a
        server that exited has written its last lines; a process it left may hold the pipe)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._drained.wait()

    def write(self, text: str) -> None:
        """Append whole lines (a log message), redacted. OSError is the caller's to report."""
        self._file.write(self.redactor(text))

    async def pump(self, stream: Any) -> None:
        """Copy a stderr pipe (an anyio byte stream) into the log, redacted as a stream, until
        the pipe ends or the task is cancelled; what is held back is written, redacted, either way."""
        import anyio

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        redacting = self.redactor.stream()
        try:
            while True:
                try:
                    chunk = await stream.receive(CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                text = redacting.feed(decoder.decode(chunk))
                if redacting.held > MAX_HELD:
                    text += redacting.flush()
                self._keep(text)
        finally:
            self._keep(redacting.feed(decoder.decode(b"", final=True)) + redacting.flush())
            self._drained.set()

    def _keep(self, text: str) -> None:
        """Write stderr text; a log that cannot be written (a full disk) is said once in Roder's
        log while the pipe goes on being read, so the server never blocks on it."""
        try:
            self._file.write(text)
        except OSError as exc:
            if not self._unwritable:
                self._unwritable = True
                logger.warning("MCP server log %s cannot be written, its stderr is dropped: %s", self.path, exc)
