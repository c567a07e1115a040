"""The gate in front of ``roder web``: Host and Origin checks, then the token swapped for a
cookie, on every route (page, static files, the app's WebSocket), over real HTTP."""

from __future__ import annotations

import io

import aiohttp
import pytest

from roder_core.server.websocket import RemoteOptions
from roder_tui.commands.web import announce
from roder_tui.web import COOKIE, RoderWebServer, WebSite, session_cookie

pytest.importorskip("textual_serve")
TOKEN = "web-token-0123456789abcdef"


@pytest.fixture
async def site():
    web = WebSite(RoderWebServer(RemoteOptions("127.0.0.1", 0, TOKEN, "generated", False), command="true"))
    port = await web.start()
    yield f"http://127.0.0.1:{port}"
    await web.stop()


async def test_no_token_or_a_wrong_one_gets_no_app(site: str) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/?token=wrong", f"/?token={TOKEN}x", "/static/js/textual.js", "/ws", f"/ws?token={TOKEN}"):
            async with http.get(site + path, allow_redirects=False) as response:
                body = await response.text()
                assert response.status == 401, path
                assert "needs its token" in body and "textual-terminal" not in body
        assert not http.cookie_jar.filter_cookies(site)


async def test_the_token_becomes_a_cookie_and_leaves_the_address(site: str) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # unsafe: an IP host
        async with http.get(f"{site}/?token={TOKEN}&fontsize=14", allow_redirects=False) as response:
            assert response.status == 303 and response.headers["Location"] == "/?fontsize=14"
            set_cookie = response.headers["Set-Cookie"]
            assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/" in set_cookie
            assert TOKEN not in set_cookie and session_cookie(TOKEN) in set_cookie
        async with http.get(f"{site}/?fontsize=14") as page:
            html = await page.text()
            assert page.status == 200 and 'data-session-websocket-url="ws://127.0.0.1:' in html
            assert "googleapis" not in html and 'name="viewport"' in html
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
            assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Referrer-Policy"] == "no-referrer"
        async with http.get(f"{site}/static/js/textual.js") as script:
            assert script.status == 200


async def test_host_and_origin_are_checked_before_the_cookie(site: str) -> None:
    cookies = {COOKIE: session_cookie(TOKEN)}
    async with aiohttp.ClientSession(cookies=cookies) as http:
        async with http.get(site + "/") as ok:
            assert ok.status == 200
        async with http.get(site + "/", headers={"Host": "attacker.example"}) as rebound:
            assert rebound.status == 403 and "DNS-rebinding" in await rebound.text()
        async with http.get(site + "/ws", headers={"Origin": "http://attacker.example"}) as cross:
            assert cross.status == 403 and "cross-origin" in await cross.text()
        async with http.get(site + "/", headers={"Origin": site}) as same:
            assert same.status == 200
    async with aiohttp.ClientSession(cookies={COOKIE: "0" * 64}) as http, http.get(site + "/") as forged:
        assert forged.status == 401


def test_a_public_bind_warns_about_tls_and_tunnels_and_prints_a_qr_code() -> None:
    out = io.StringIO()
    announce(RemoteOptions("0.0.0.0", 8765, TOKEN, "generated", True), 8765, True, out)
    text = out.getvalue()
    assert f"http://127.0.0.1:8765/?token={TOKEN}" in text
    assert "WARNING" in text and "TLS" in text and "ssh -L 8765:127.0.0.1:8765" in text and "Tailscale" in text
    assert "▀" in text or "█" in text  # the QR code (segno, half blocks)
    quiet = io.StringIO()
    announce(RemoteOptions("127.0.0.1", 8765, TOKEN, "env:WEB_TOKEN", False), 8765, False, quiet)
    assert TOKEN not in quiet.getvalue() and "WARNING" not in quiet.getvalue()
