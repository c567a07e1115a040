"""``/mcp login NAME`` in the app against a real OAuth-protected MCP server process: the sign-in
address shown on its own screen, the browser's redirect finishing it, the server restarted with
its tools, and ``/mcp logout NAME`` revoking the tokens."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from roder_core.auth import logins
from tests.ecosystem.harness import start_http_fixture
from tests.oauth_server import OAuthTestServer
from tests.tui.helpers import make_app, ready, until


def _toasted(app: object, text: str) -> bool:
    return any(text in n.message for n in app._notifications)  # type: ignore[attr-defined]


async def test_mcp_login_and_logout_in_the_app(roder_home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    browsed: list[int] = []

    def browser(url: str) -> bool:  # the user's browser, on another thread as a real one would be
        def visit() -> None:
            with httpx.Client(follow_redirects=True, timeout=30, trust_env=False) as client:
                browsed.append(client.get(url).status_code)

        threading.Thread(target=visit, daemon=True).start()
        return True

    monkeypatch.setattr(logins, "open_in_browser", browser)
    with OAuthTestServer(offer_device=False) as auth:
        proc, url = start_http_fixture(mode="http-oauth", env={"FIXTURE_ISSUER": auth.issuer})
        try:
            (roder_home / "config.toml").write_text(f'[mcp.servers.remote]\nurl = "{url}"\nstartup_timeout = 60\n')
            app = make_app(workspace, [{"text": "hi"}], monkeypatch)
            async with app.run_test(size=(100, 30)) as pilot:
                await ready(pilot)
                await app.run_slash("/mcp login")
                await until(pilot, lambda: _toasted(app, "usage: /mcp [login NAME | logout NAME]"), what="the usage")
                await app.run_slash("/mcp login remote")
                await until(pilot, lambda: type(app.screen).__name__ == "InfoScreen", what="the sign-in screen")
                assert f"{auth.issuer}/authorize?" in str(app.screen.text)  # type: ignore[attr-defined]
                await until(pilot, lambda: _toasted(app, "signed in to MCP server remote (connected, 5 tools)"), what="the toast")
                assert browsed == [200]
                await app.run_slash("/mcp logout remote")
                await until(
                    pilot, lambda: _toasted(app, "signed out of MCP server remote; the tokens were revoked"), what="logout"
                )
                assert auth.state.revoked
        finally:
            proc.kill()
            proc.wait()
