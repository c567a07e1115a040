"""Remote app server: the same JSON-RPC methods over an authenticated WebSocket (``--remote``).

Authentication happens in the HTTP handshake, before any method can run: the bearer token comes
from ``Authorization: Bearer <token>`` or a ``bearer.<token>`` subprotocol and is compared in
constant time; a missing or wrong token gets HTTP 401. Before the token is even looked at, the
``Host`` header must name this server (a loopback name or address, the bound address, any IP
literal, or a name given with ``--allow-host``), so a DNS-rebinding page cannot reach it under
its own name; and a browser's ``Origin`` must be on the same host (or an allowed name), so a
page on another site cannot drive it from the user's browser. Both get HTTP 403 and name the
check. Clients that send no ``Origin`` (every non-browser client) pass that check; the token is
always required. ``roder.remote.v1`` is echoed when the
client offers it. Roder does not terminate TLS, so binding a non-loopback address prints a
warning. Each client has its own bounded notification queue; one that falls behind is told
(``CLIENT_BEHIND``) and disconnected, and its pending approvals stay answerable by any other client.
Requires the ``remote`` extra (``pip install -e '.[remote]'`` in the checkout).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from roder_core.brokers.addresses import is_loopback_host
from roder_core.server.connection import Connection, encode, notification_message
from roder_core.server.errors import CLIENT_BEHIND
from roder_core.server.protocol import ErrorNotification, RemoteInfo

if TYPE_CHECKING:
    from roder_core.server.dispatcher import Dispatcher

log = logging.getLogger(__name__)

SUBPROTOCOL = "roder.remote.v1"
BEARER_PREFIX = "bearer."
MAX_MESSAGE = 64 * 1024 * 1024
#: Seconds a client that fell behind gets to receive its error before the socket is closed.
BEHIND_GRACE = 2.0


@dataclass
class RemoteOptions:
    host: str
    port: int
    token: str
    token_source: str  # "generated" or "env:VAR"
    print_qr: bool = True
    #: Extra host names clients may use (``--allow-host``), e.g. a Tailscale machine name.
    allowed_hosts: tuple[str, ...] = ()

    @classmethod
    def from_args(
        cls,
        listen: str,
        auth_token: str | None,
        *,
        print_qr: bool = True,
        env: dict[str, str] | None = None,
        allow_hosts: list[str] | None = None,
    ) -> RemoteOptions:
        options = cls._from_args(listen, auth_token, print_qr=print_qr, env=env)
        names = tuple(dict.fromkeys(_host_name(h) for h in allow_hosts or () if _host_name(h)))
        return replace(options, allowed_hosts=names)

    @classmethod
    def _from_args(cls, listen: str, auth_token: str | None, *, print_qr: bool, env: dict[str, str] | None) -> RemoteOptions:
        parts = urlsplit(listen)
        if parts.scheme != "ws" or not parts.hostname:
            raise ValueError(f"--listen must look like ws://HOST:PORT (got {listen!r}); Roder does not terminate TLS")
        try:
            port = parts.port if parts.port is not None else 9786
        except ValueError as exc:
            raise ValueError(f"--listen {listen!r}: {exc}") from None
        if auth_token is None:
            return cls(parts.hostname, port, secrets.token_urlsafe(32), "generated", print_qr)
        if not auth_token.startswith("env:") or len(auth_token) == 4:
            raise ValueError("--auth-token takes env:VAR (the token is read from that environment variable)")
        name = auth_token[4:]
        value = (os.environ if env is None else env).get(name, "")
        if not value.strip():
            raise ValueError(f"--auth-token {auth_token}: the environment variable {name} is empty or unset")
        return cls(parts.hostname, port, value.strip(), auth_token, print_qr)


def token_from_headers(headers: Any) -> tuple[str | None, list[str]]:
    """The presented bearer token (header first, then subprotocol) and the offered subprotocols."""
    offered = [p.strip() for value in headers.get_all("Sec-WebSocket-Protocol") for p in value.split(",") if p.strip()]
    authorization = headers.get("Authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip(), offered
    for protocol in offered:
        if protocol.startswith(BEARER_PREFIX):
            return protocol[len(BEARER_PREFIX) :], offered
    return None, offered


def _host_name(value: str) -> str:
    """The host part of a ``Host`` header or ``--allow-host`` value, lowercased, without port,
    brackets or a trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else ""
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_refusal(host_header: str | None, options: RemoteOptions) -> str | None:
    """Why a ``Host`` header is refused (DNS rebinding), or None. IP literals cannot be rebound,
    so any is accepted; a name must be localhost, the bound name or an ``--allow-host`` name."""
    name = _host_name(host_header or "")
    if not name:
        return "the request has no Host header"
    bound = _host_name(options.host)
    if _is_ip(name) or is_loopback_host(name) or name == bound or name in options.allowed_hosts:
        return None
    return (
        f"Host {name!r} is not this server's name (DNS-rebinding protection); connect by address or "
        "localhost, or start the server with --allow-host NAME"
    )


def origin_refusal(origin: str | None, host_header: str | None, options: RemoteOptions) -> str | None:
    """Why a browser ``Origin`` is refused, or None. No Origin (a non-browser client) passes; a
    browser page must be served from the host it connects to (loopback names count as one), or
    from an ``--allow-host`` name."""
    if origin is None:
        return None
    parts = urlsplit(origin.strip())
    name = (parts.hostname or "").rstrip(".").lower()
    if parts.scheme not in ("http", "https", "ws", "wss") or not name:
        return f"Origin {origin!r} is not a web page this server trusts (cross-origin protection)"
    host = _host_name(host_header or "")
    if name == host or name in options.allowed_hosts or (is_loopback_host(name) and is_loopback_host(host)):
        return None
    return (
        f"Origin {origin!r} is a page on another site (cross-origin protection); browsers may only connect "
        "from this server's own host or an --allow-host name"
    )


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


def connect_urls(host: str, port: int) -> list[str]:
    """URLs a client can use: the bound address, or this machine's addresses for a wildcard bind."""
    if host not in {"0.0.0.0", "::", ""}:
        shown = f"[{host}]" if ":" in host else host
        return [f"ws://{shown}:{port}"]
    addresses = ["127.0.0.1"]
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            address = str(info[4][0])
            if address not in addresses:
                addresses.append(address)
    return [f"ws://{a}:{port}" for a in addresses]


def pairing_link(urls: list[str], token: str | None) -> str:
    """``roder://connect?payload=...``; without ``token`` the payload has the addresses only."""
    data: dict[str, Any] = {"v": 1, "urls": urls, "subprotocol": SUBPROTOCOL}
    if token is not None:
        data["token"] = token
    payload = json.dumps(data, separators=(",", ":"))
    encoded = base64.urlsafe_b64encode(payload.encode("utf-8")).decode("ascii").rstrip("=")
    return f"roder://connect?payload={encoded}"


def qr_text(data: str) -> str:
    """The link as a terminal QR code (half-block characters), via the ``segno`` package."""
    import io

    import segno

    buffer = io.StringIO()
    segno.make(data, error="l").terminal(out=buffer, compact=True)
    return buffer.getvalue()


def announce(options: RemoteOptions, port: int, out: TextIO) -> None:
    urls = connect_urls(options.host, port)
    out.write(f"roder app-server listening on {urls[0]}\n")
    for url in urls[1:]:
        out.write(f"  also reachable at {url}\n")
    if options.token_source == "generated":
        out.write(f"  token: {options.token}\n")
    else:
        preview = options.token[:4] + "…" + options.token[-4:] if len(options.token) > 12 else "…"
        out.write(f"  token: {preview} (from {options.token_source})\n")
    out.write(f"  send it as 'Authorization: Bearer <token>' or subprotocol '{BEARER_PREFIX}<token>'; offer '{SUBPROTOCOL}'\n")
    # a token from the environment is never printed, in the link and QR code either: they carry
    # the addresses only and the client asks for the token
    link = pairing_link(urls, options.token if options.token_source == "generated" else None)
    shown = link if options.token_source == "generated" else f"{link} (token not included: {options.token_source})"
    out.write(f"  pair: {shown}\n")
    if not is_loopback_host(options.host):
        out.write(
            "roder: WARNING: listening on a non-loopback address without TLS. Anyone who can reach this "
            "port and learns the token can read files and run commands here; prefer 127.0.0.1, an SSH "
            "tunnel or a trusted encrypted network (Tailscale, WireGuard).\n"
        )
    if options.print_qr:
        try:
            out.write(qr_text(link))
        except ImportError:
            from roder_core.kernel.install_hints import extra_install_hint

            out.write(f"  (for a QR code: {extra_install_hint('remote')})\n")
    out.flush()


class RemoteServer:
    """Accepts authenticated WebSocket clients and serves each as one Connection."""

    def __init__(self, dispatcher: Dispatcher, options: RemoteOptions) -> None:
        self.dispatcher = dispatcher
        self.options = options
        self.connections: set[Connection] = set()
        self._server: Any = None

    def _process_request(self, connection: Any, request: Any) -> Any:
        headers = request.headers
        refusal = host_refusal(headers.get("Host"), self.options) or origin_refusal(
            headers.get("Origin"), headers.get("Host"), self.options
        )
        if refusal is not None:
            log.warning("refused a WebSocket client: %s", refusal)
            return connection.respond(HTTPStatus.FORBIDDEN, f"{refusal}\n")
        presented, _offered = token_from_headers(request.headers)
        if not token_matches(presented, self.options.token):
            reason = "missing bearer token" if presented is None else "wrong bearer token"
            log.warning("refused a WebSocket client: %s", reason)
            return connection.respond(HTTPStatus.UNAUTHORIZED, f"{reason}\n")
        return None

    @staticmethod
    def _select_subprotocol(connection: Any, subprotocols: Any) -> Any:
        return SUBPROTOCOL if SUBPROTOCOL in subprotocols else None

    async def _handle(self, websocket: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        info = RemoteInfo(subprotocol=websocket.subprotocol, workspace=str(self.dispatcher.runtime.options.cwd))
        conn = Connection(
            self.dispatcher, websocket.send, remote=info, close_when_behind=True, queue_size=self.dispatcher.queue_size
        )
        self.connections.add(conn)
        watcher = asyncio.create_task(self._cut_when_behind(conn, websocket))

        async def messages() -> Any:
            with contextlib.suppress(ConnectionClosed):
                async for message in websocket:
                    yield message

        try:
            await conn.serve(messages())
        finally:
            watcher.cancel()
            self.connections.discard(conn)
            await conn.close(flush_timeout=1.0)

    async def _cut_when_behind(self, conn: Connection, websocket: Any) -> None:
        """The writer may be stuck behind a full socket, so the error goes out directly (it still
        arrives after what the client has not read yet), then the connection is closed."""
        await conn.queue.overflowed.wait()
        if not conn.fell_behind.is_set():
            error = ErrorNotification(
                code=CLIENT_BEHIND,
                message="client fell behind: notifications were dropped; reconnect and re-read open threads with thread/read",
            )
            with contextlib.suppress(Exception):
                async with asyncio.timeout(BEHIND_GRACE):
                    await websocket.send(encode(notification_message(error)))
        await websocket.close(1013, "client fell behind; reconnect and re-read threads")

    async def start(self) -> int:
        from websockets.asyncio.server import serve

        self._server = await serve(
            self._handle,
            self.options.host,
            self.options.port,
            process_request=self._process_request,
            select_subprotocol=self._select_subprotocol,
            max_size=MAX_MESSAGE,
            server_header="roder-app-server",
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def serve_remote(dispatcher: Dispatcher, options: RemoteOptions, stop: asyncio.Event, out: TextIO | None = None) -> None:
    try:
        import websockets  # noqa: F401
    except ImportError:
        from roder_core.kernel.install_hints import extra_install_hint

        raise SystemExit(f"roder: --remote needs the 'remote' extra: {extra_install_hint('remote')}") from None
    server = RemoteServer(dispatcher, options)
    port = await server.start()
    announce(options, port, out or sys.stderr)
    try:
        await stop.wait()
    finally:
        await server.stop()
