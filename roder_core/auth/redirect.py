"""The loopback redirect of a browser sign-in (RFC 8252 7.3): a one-shot HTTP listener.

It binds ``127.0.0.1`` on a port the kernel picks, so no other host can deliver a code and no
fixed port can be squatted; it answers exactly one ``GET /callback`` whose ``state`` matches
(anything else gets 404 or 400 and is ignored), shows the user a short page, and hands the code
to the waiting sign-in. Written on asyncio streams so the core needs no web framework.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qs, urlsplit

from roder_core.auth.oauth import OAuthError

CALLBACK_PATH = "/callback"
MAX_REQUEST_LINE = 8192
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Roder sign-in</title>"
    "<p>{message}</p><p>You can close this tab and return to Roder.</p>"
)


class LoopbackRedirect:
    """Waits for the authorization server to send the browser back with a code."""

    def __init__(self, state: str) -> None:
        self.state = state
        self._result: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def code(self) -> str:
        """The authorization code, once the browser arrives (raises when the server refused)."""
        try:
            return await self._result
        finally:
            await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if not self._result.done():
            self._result.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                if len(header) > MAX_REQUEST_LINE:
                    break
            status, message = self._handle(line[:MAX_REQUEST_LINE].decode("latin-1"))
            body = _PAGE.format(message=message).encode("utf-8")
            writer.write(
                f"HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {len(body)}\r\n"
                "connection: close\r\ncache-control: no-store\r\n\r\n".encode("ascii")
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def _handle(self, request_line: str) -> tuple[str, str]:
        parts = request_line.split()
        if len(parts) < 2 or parts[0] != "GET":
            return "405 Method Not Allowed", "Not a sign-in redirect."
        url = urlsplit(parts[1])
        if url.path != CALLBACK_PATH:
            return "404 Not Found", "Not a sign-in redirect."
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if query.get("state") != self.state:
            # Another page cannot finish (or fail) this sign-in without knowing its state.
            return "400 Bad Request", "This sign-in link is stale or not Roder's."
        if self._result.done():
            return "409 Conflict", "This sign-in has already finished."
        if "error" in query:
            detail = query.get("error_description") or query["error"]
            self._result.set_exception(OAuthError(f"the authorization server refused the sign-in: {detail[:200]}"))
            return "200 OK", "The sign-in was refused."
        code = query.get("code")
        if not code:
            return "400 Bad Request", "The redirect carries no authorization code."
        self._result.set_result(code)
        return "200 OK", "Signed in."
