"""``auth/codex/*`` and ``auth/supergrok/*``: real OAuth 2.1 sign-ins against a loopback
authorization server (``tests/oauth_server.py``), whose token the provider then sends to the
loopback model server, refreshed when it expires and revoked on sign-out."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from roder_core.auth.oauth import DeviceCode, Endpoints, OAuthClient, OAuthError
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RUNTIME_ERROR, RpcError
from roder_core.server.fanout import NotificationQueue
from roder_core.server.protocol import PROVIDERS_LIST, THREAD_START, TURN_START, ThreadStartParams, TurnStartParams
from roder_core.server.protocol_auth import AuthLoginCompleted
from roder_core.testing.fake_server import FakeModelServer
from tests.oauth_server import OAuthTestServer


def configure(home: Path, issuer: str, base_url: str, name: str = "codex", extra: str = "") -> None:
    (home / "config.toml").write_text(
        f'provider = "fk"\nmodel = "m1"\n[providers.fk]\ndialect = "chat-completions"\nbase_url = "{base_url}"\nmodels = ["m1"]\n'
        f'[auth.{name}]\nissuer = "{issuer}"\nclient_id = "roder-test-client"\nscopes = ["model.request"]\n'
        f'provider = "fk"\n{extra}',
        encoding="utf-8",
    )


async def client_for(workspace: Path) -> LocalAppClient:
    return LocalAppClient.start(StartSettings(cwd=workspace, interactive=False), persist_config=True)


async def completed(queue: NotificationQueue) -> AuthLoginCompleted:
    """The sign-in's outcome (the queue was subscribed before the login call)."""
    async with asyncio.timeout(30):
        async for note in queue:
            if isinstance(note, AuthLoginCompleted):
                return note
    raise AssertionError("no auth/login/completed")


async def one_turn(client: LocalAppClient) -> None:
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    events = client.subscribe(thread.id)
    await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hi"))
    async with asyncio.timeout(30):
        async for note in events:
            if note.method == "turn/completed":
                return


@pytest.fixture
async def model_server() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer([{"text": "one"}, {"text": "two"}, {"text": "three"}]) as server:
        yield server


async def test_device_sign_in_then_the_provider_sends_the_token_and_sign_out_revokes_it(
    roder_home: Path, workspace: Path, model_server: FakeModelServer
) -> None:
    with OAuthTestServer(pending_polls=2) as auth:
        configure(roder_home, auth.issuer, model_server.base_url)
        async with await client_for(workspace) as client:
            before = await client.request("auth/codex/status", {})
            assert before.wire() == {
                "name": "codex",
                "configured": True,
                "signedIn": False,
                "provider": "fk",
                "refreshable": False,
                "inProgress": False,
            }
            notes = client.subscribe()
            start = (await client.request("auth/codex/login", {"flow": "device"})).wire()
            assert start["flow"] == "device" and start["userCode"] == "WDJB-MJHT"
            assert start["verificationUri"] == f"{auth.issuer}/activate"
            done = await completed(notes)
            assert (done.success, done.error) == (True, None)
            assert auth.state.device_polls == 3  # two pending answers, then the token

            status = (await client.request("auth/codex/status", {})).wire()
            assert status["signedIn"] and status["refreshable"] and status["issuer"] == auth.issuer
            listed = {p.id: p for p in (await client.call(PROVIDERS_LIST)).providers}
            assert (listed["fk"].auth_source, listed["fk"].auth_type) == ("oauth", "oauth")

            await one_turn(client)
            token = auth.state.issued[-1]
            assert model_server.calls[-1].headers["authorization"] == f"Bearer {token}"

            out = (await client.request("auth/codex/logout", {})).wire()
            assert out == {"name": "codex", "signedOut": True, "revoked": True}
            assert token in auth.state.revoked and len(auth.state.revoked) == 2  # refresh and access
            listed = {p.id: p for p in (await client.call(PROVIDERS_LIST)).providers}
            assert listed["fk"].auth_source is None
    credentials = roder_home / "data" / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert "oauth" not in json.loads(credentials.read_text())
    for path in roder_home.rglob("*"):
        if path.is_file() and path != credentials:
            assert token.encode() not in path.read_bytes(), path


async def test_browser_sign_in_with_pkce_and_a_loopback_redirect(
    roder_home: Path, workspace: Path, model_server: FakeModelServer
) -> None:
    with OAuthTestServer(offer_device=False) as auth:
        configure(roder_home, auth.issuer, model_server.base_url)
        async with await client_for(workspace) as client:
            notes = client.subscribe()
            start = (await client.request("auth/codex/login", {"openBrowser": False})).wire()
            assert start["flow"] == "browser" and not start["browserOpened"]
            url = httpx.URL(start["authorizationUrl"])
            assert url.params["code_challenge_method"] == "S256" and url.params["scope"] == "model.request"
            redirect = url.params["redirect_uri"]
            assert redirect.startswith("http://127.0.0.1:") and redirect.endswith("/callback")
            async with httpx.AsyncClient(trust_env=False) as browser:
                # Another page that does not know the sign-in's state cannot finish it.
                stale = await browser.get(redirect, params={"code": "forged", "state": "not-it"})
                assert stale.status_code == 400
                landed = await browser.get(start["authorizationUrl"], follow_redirects=True)
            assert landed.status_code == 200 and "Signed in." in landed.text
            done = await completed(notes)
            assert done.success, done.error
            await one_turn(client)
            assert model_server.calls[-1].headers["authorization"] == f"Bearer {auth.state.issued[-1]}"
            # The loopback listener is gone once the sign-in ended.
            async with httpx.AsyncClient(trust_env=False) as browser:
                with pytest.raises(httpx.ConnectError):
                    await browser.get(redirect)


async def test_an_expired_token_is_refreshed_before_the_request(
    roder_home: Path, workspace: Path, model_server: FakeModelServer
) -> None:
    with OAuthTestServer(expires_in=1, pending_polls=0) as auth:
        configure(roder_home, auth.issuer, model_server.base_url)
        async with await client_for(workspace) as client:
            notes = client.subscribe()
            await client.request("auth/codex/login", {})
            assert (await completed(notes)).success
            first = auth.state.issued[-1]
            await one_turn(client)  # expires_in 1 s is inside the refresh margin: refreshed first
            assert auth.grant_types()[-1] == "refresh_token"
            second = auth.state.issued[-1]
            assert second != first
            assert model_server.calls[-1].headers["authorization"] == f"Bearer {second}"
    record = json.loads((roder_home / "data" / "credentials.json").read_text())["oauth"]["codex"]
    assert record["access_token"] == second and record["token_endpoint"] == f"{auth.issuer}/token"


async def test_a_denied_device_sign_in_reports_why_and_stores_nothing(
    roder_home: Path, workspace: Path, model_server: FakeModelServer
) -> None:
    with OAuthTestServer(deny_device=True) as auth:
        configure(roder_home, auth.issuer, model_server.base_url)
        async with await client_for(workspace) as client:
            notes = client.subscribe()
            await client.request("auth/codex/login", {})
            done = await completed(notes)
            assert (done.success, done.error) == (False, "the sign-in was denied at the authorization server")
            assert not (await client.request("auth/codex/status", {})).wire()["signedIn"]


async def test_a_login_with_no_issuer_names_the_setting(roder_home: Path, workspace: Path) -> None:
    async with await client_for(workspace) as client:
        for name in ("codex", "supergrok"):
            with pytest.raises(RpcError) as err:
                await client.request(f"auth/{name}/login", {})
            assert err.value.code == INVALID_PARAMS
            assert err.value.message == (
                f"no issuer is configured for the {name} sign-in: set issuer and client_id under [auth.{name}] in config.toml"
            )
            status = (await client.request(f"auth/{name}/status", {})).wire()
            assert not status["configured"] and "[auth." in status["reason"]
            assert (await client.request(f"auth/{name}/logout", {})).wire()["signedOut"] is False


async def test_an_unreachable_issuer_is_one_line(roder_home: Path, workspace: Path, model_server: FakeModelServer) -> None:
    with OAuthTestServer() as auth:
        issuer = auth.issuer
    configure(roder_home, issuer, model_server.base_url)  # the server is gone
    async with await client_for(workspace) as client:
        with pytest.raises(RpcError) as err:
            await client.request("auth/codex/login", {})
    assert err.value.code == RUNTIME_ERROR
    assert err.value.message.startswith(f"cannot reach the issuer {issuer}") and "\n" not in err.value.message


async def test_slow_down_widens_the_poll_interval() -> None:
    """RFC 8628 3.5: each slow_down adds 5 seconds to the interval for all later polls."""
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    with OAuthTestServer(slow_down_polls=2, pending_polls=1) as auth:
        endpoints = Endpoints(issuer=auth.issuer, token=f"{auth.issuer}/token", device_authorization=f"{auth.issuer}/device")
        client = OAuthClient(endpoints, "roder-test-client")
        code = await client.start_device()
        tokens = await client.poll_device(code, sleep=record)
    assert tokens.access_token == auth.state.issued[-1]
    assert waits == pytest.approx([0.01, 5.01, 10.01, 10.01])


async def test_an_expired_device_code_stops_polling() -> None:
    with OAuthTestServer(pending_polls=100) as auth:
        client = OAuthClient(Endpoints(issuer=auth.issuer, token=f"{auth.issuer}/token"), "roder-test-client")
        now = [1000.0]
        client.clock = lambda: now[0]
        code = DeviceCode(auth.state.device_code, "UC", "https://x", None, expires_at=1000.5, interval=0.2)

        async def tick(seconds: float) -> None:
            now[0] += seconds

        with pytest.raises(OAuthError, match="device code expired"):
            await client.poll_device(code, sleep=tick)


@pytest.mark.parametrize("issuer", ["ftp://example.test", "http://example.test", "not a url"])
async def test_issuers_must_be_https_except_on_loopback(issuer: str) -> None:
    with pytest.raises(OAuthError, match="issuer"):
        await OAuthClient.discover(issuer)


def test_the_stored_sign_in_keeps_what_refresh_and_revocation_need() -> None:
    """The stored record keeps what refresh and revocation need, never in config.toml."""
    from roder_core.auth.logins import record_for
    from roder_core.auth.oauth import TokenSet

    client = OAuthClient(Endpoints(issuer="https://a.test", token="https://a.test/t", revocation="https://a.test/r"), "cid")
    record: dict[str, Any] = record_for("fk", client, TokenSet("at", refresh_token="rt", expires_at=5.0))
    assert record == {
        "provider": "fk",
        "issuer": "https://a.test",
        "client_id": "cid",
        "token_endpoint": "https://a.test/t",
        "revocation_endpoint": "https://a.test/r",
        "access_token": "at",
        "token_type": "Bearer",
        "refresh_token": "rt",
        "expires_at": 5.0,
    }
