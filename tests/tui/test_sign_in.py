"""``/login`` in the app: the device code shown on a screen of its own, the outcome as a toast,
and a sign-in that cannot start (no issuer set) said in one toast naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oauth_server import OAuthTestServer
from tests.tui.helpers import make_app, ready, until


def _screen_text(app: object) -> str:
    return str(app.screen.text)  # type: ignore[attr-defined]


async def test_login_shows_the_device_code_then_says_signed_in(
    roder_home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OAuthTestServer(pending_polls=1) as auth:
        (roder_home / "config.toml").write_text(
            f'[auth.codex]\nissuer = "{auth.issuer}"\nclient_id = "roder-test-client"\nprovider = "mock"\n', encoding="utf-8"
        )
        app = make_app(workspace, [{"text": "hi"}], monkeypatch)
        async with app.run_test(size=(50, 24)) as pilot:
            await ready(pilot)
            await app.run_slash("/login codex device")
            await until(pilot, lambda: type(app.screen).__name__ == "InfoScreen", what="the sign-in screen")
            text = _screen_text(app)
            assert "WDJB-MJHT" in text and f"{auth.issuer}/activate?user_code=WDJB-MJHT" in text
            await until(pilot, lambda: any(n.message == "signed in to codex" for n in app._notifications), what="the toast")
            assert auth.state.device_polls == 2


async def test_login_without_an_issuer_names_the_setting(
    roder_home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(workspace, [{"text": "hi"}], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await app.run_slash("/login supergrok")
        expected = (
            "no issuer is configured for the supergrok sign-in: set issuer and client_id under [auth.supergrok] in config.toml"
        )
        await until(pilot, lambda: any(n.message == expected for n in app._notifications), what="the error toast")
        await app.run_slash("/login")
        await until(pilot, lambda: any(n.message.startswith("usage: /login") for n in app._notifications), what="the usage")
