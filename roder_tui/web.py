"""The app in a browser: ``textual-serve`` runs ``roder attach`` for every browser session.

Each page that connects gets its own app process, attached to this user's host like any
terminal, so a phone browser and a laptop terminal share the same live threads. textual-serve
itself has no access control; this module puts it behind the same gate as the remote app
server (``roder_core.server.websocket``), checked on every request, the WebSocket included:

- the ``Host`` header must name this server (DNS-rebinding protection) and a browser's
  ``Origin`` must be this server's own (cross-site protection): HTTP 403;
- then the token: in the URL once (``/?token=...``), which is exchanged for an HttpOnly,
  SameSite=Strict cookie and a redirect to a URL without it; compared in constant time;
  anything else gets HTTP 401 and no app.

The page loads nothing from other sites, may not be framed, and sends no referrer.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import shlex
from pathlib import Path
from typing import Any

from aiohttp import web
from textual_serve.server import Server

from roder_core.server.websocket import RemoteOptions, host_refusal, origin_refusal, token_matches
from roder_tui.host import roder_argv

log = logging.getLogger(__name__)

COOKIE = "roder_web"
#: Browsers keep the session this long (a phone's browser may be closed and reopened meanwhile).
COOKIE_MAX_AGE = 7 * 24 * 3600
PAGE_DIR = Path(__file__).resolve().parent / "web_page"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
UNAUTHORIZED = (
    "roder web: this page needs its token. Open the address `roder web` printed (it ends with ?token=...), or scan its QR code.\n"
)


def attach_command() -> str:
    """What every browser session runs: the app, attached to this user's host."""
    return shlex.join(roder_argv("attach"))


def session_cookie(token: str) -> str:
    """The cookie's value: derived from the token (never the token itself), so a cookie seen
    somewhere cannot be turned back into a pairing URL."""
    return hmac.new(token.encode("utf-8"), b"roder-web-session", hashlib.sha256).hexdigest()


class RoderWebServer(Server):
    """textual-serve's server with Roder's gate in front of every route."""

    def __init__(self, options: RemoteOptions, command: str | None = None) -> None:
        super().__init__(
            command or attach_command(), host=options.host, port=options.port, title="Roder", templates_path=PAGE_DIR
        )
        self.options = options
        self.cookie = session_cookie(options.token)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """textual-serve prints a banner here; ``roder web`` prints its own."""

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host")
        refusal = host_refusal(host, self.options) or origin_refusal(request.headers.get("Origin"), host, self.options)
        if refusal is not None:
            log.warning("refused a browser request: %s", refusal)
            return _secured(web.Response(status=403, text=f"{refusal}\n"))
        if token_matches(request.cookies.get(COOKIE), self.cookie):
            return _secured(await handler(request))
        presented = request.query.get("token")
        if request.path == "/" and presented is not None and token_matches(presented, self.options.token):
            kept = {k: v for k, v in request.query.items() if k in ("fontsize",)}
            target = "/" + ("?" + "&".join(f"{k}={v}" for k, v in kept.items()) if kept else "")
            response = web.Response(status=303, headers={"Location": target})  # the token leaves the address bar
            response.set_cookie(COOKIE, self.cookie, max_age=COOKIE_MAX_AGE, httponly=True, samesite="Strict", path="/")
            return _secured(response)
        if presented is not None:
            log.warning("refused a browser request: wrong token")
        return _secured(web.Response(status=401, text=UNAUTHORIZED))

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page, with addresses relative to the host the browser used (a phone reaches this
        server by the machine's LAN or tunnel address, not the bound one)."""
        import aiohttp_jinja2

        font_size = request.query.get("fontsize", "16")
        context = {
            "font_size": int(font_size) if font_size.isdigit() and 6 <= int(font_size) <= 40 else 16,
            "app_websocket_url": f"{'wss' if request.secure else 'ws'}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template("index.html", request, context)
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
            f"img-src 'self' data:; connect-src 'self' ws://{request.host} wss://{request.host}; frame-ancestors 'none'"
        )
        return response


def _secured(response: web.StreamResponse) -> web.StreamResponse:
    if not response.prepared:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


class WebSite:
    """A running ``RoderWebServer`` (aiohttp runner and site), started and stopped in a loop."""

    def __init__(self, server: RoderWebServer) -> None:
        self.server = server
        self._runner: web.AppRunner | None = None
        self.port = server.port

    async def start(self) -> int:
        app = await self.server._make_app()
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.server.host, self.server.port)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self.server.port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
