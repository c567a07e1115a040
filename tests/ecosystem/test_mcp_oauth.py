"""OAuth 2.1 sign-in to MCP servers over HTTP, for real: the fixture MCP server (a separate
process, streamable HTTP or SSE) protects itself with the loopback authorization server of
tests/oauth_server.py (it introspects every bearer token there). Roder finds the authorization
server from the 401's protected-resource metadata, registers itself, runs the authorization-code
flow with PKCE through its loopback redirect (the test plays the browser by fetching the
authorization address with an HTTP client), sends ``resource``, uses and refreshes the token,
says plainly when a sign-in is needed, and revokes the tokens at logout."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import roder_ext_mcp
from roder_ext_mcp.authorization import credential_name, start_login
from roder_ext_mcp.manager import ServerUnavailable

from roder_core.auth.logins import LoginService
from roder_core.ir import ToolResultItem
from roder_core.settings.credentials import CredentialStore
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with, start_http_fixture
from tests.oauth_server import OAuthTestServer


def roder(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RODER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def protected(request: pytest.FixtureRequest) -> Iterator[tuple[OAuthTestServer, str]]:
    """(authorization server, MCP server url) for ``mode`` (``http-oauth`` by default)."""
    mode = getattr(request, "param", "http-oauth")
    with OAuthTestServer(offer_device=False) as auth:
        proc, url = start_http_fixture(mode=mode, env={"FIXTURE_ISSUER": auth.issuer})
        try:
            yield auth, url
        finally:
            proc.kill()
            proc.wait()


def configure(home: Path, url: str) -> None:
    (home / "config.toml").write_text(
        f'[mcp]\nstartup_wait = 25\n\n[mcp.servers.remote]\nurl = "{url}"\nstartup_timeout = 60\n', encoding="utf-8"
    )


def browse(url: str) -> None:
    """The user's browser: the authorization server approves and redirects to Roder's loopback."""
    with httpx.Client(follow_redirects=True, timeout=30, trust_env=False) as browser:
        landed = browser.get(url)
    assert landed.status_code == 200, landed.text
    assert "Signed in." in landed.text


@pytest.mark.timeout(400)  # seven `roder` processes, each loading the MCP SDK
def test_cli_login_use_refresh_on_401_and_logout(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    auth, url = protected
    configure(roder_home, url)

    before = roder(roder_home, workspace, "mcp", "list", "--json")
    assert before.returncode == 0, before.stderr
    [server] = json.loads(before.stdout)["servers"]
    assert server["status"] == "needs-login"
    assert "needs a sign-in: run `roder mcp login remote`" in server["error"]
    assert "Server returned an error response" not in before.stdout + before.stderr

    login = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", "mcp", "login", "remote", "--no-browser"],
        cwd=workspace,
        env={**os.environ, "RODER_HOME": str(roder_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert login.stdout is not None
    assert login.stdout.readline().startswith("Sign in to MCP server remote at this address")
    address = login.stdout.readline().strip()
    browse(address)
    out, err = login.communicate(timeout=120)
    assert login.returncode == 0, err
    assert "signed in to MCP server remote" in out

    # RFC 7591 registration for the loopback redirect, PKCE S256, and the RFC 8707 resource.
    [registered] = auth.state.registered
    assert registered["redirect_uris"][0].startswith("http://127.0.0.1:")
    assert registered["token_endpoint_auth_method"] == "none"
    [authorize] = auth.sent("/authorize")
    assert authorize["resource"] == url
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["scope"] == "tools"  # from the 401's challenge
    [exchange] = [form for form in auth.sent("/token") if form.get("grant_type") == "authorization_code"]
    assert exchange["resource"] == url
    token = auth.state.issued[-1]
    assert token not in out + err

    store = CredentialStore.for_env({"RODER_HOME": str(roder_home)})
    stored = store.oauth(credential_name("remote"))
    assert stored is not None
    assert stored["access_token"] == token
    assert stored["server_url"] == url

    listed = roder(roder_home, workspace, "mcp", "list")
    assert "remote  connected  5 tools" in listed.stdout, listed.stdout + listed.stderr

    # The server stops accepting the access token: the 401 makes Roder refresh and retry.
    auth.state.invalidated.add(token)
    again = roder(roder_home, workspace, "mcp", "list")
    assert "remote  connected  5 tools" in again.stdout, again.stdout + again.stderr
    refresh = [form for form in auth.sent("/token") if form.get("grant_type") == "refresh_token"]
    assert refresh and refresh[0]["resource"] == url

    logout = roder(roder_home, workspace, "mcp", "logout", "remote")
    assert logout.returncode == 0, logout.stderr
    assert "signed out of MCP server remote; the server revoked the tokens" in logout.stdout
    assert auth.state.issued[-1] in auth.state.revoked
    assert store.oauth(credential_name("remote")) is None
    after = roder(roder_home, workspace, "mcp", "list")
    assert "needs a sign-in: run `roder mcp login remote`" in after.stdout


def test_headless_run_names_the_login_command_and_opens_no_browser(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    auth, url = protected
    configure(roder_home, url)
    done = roder(roder_home, workspace, "-p", "hello", "--provider", "mock")
    assert done.returncode == 0, done.stderr
    assert "MCP server 'remote' needs a sign-in: run `roder mcp login remote`" in done.stderr
    assert auth.sent("/authorize") == []  # nobody was sent to sign in
    assert auth.state.registered == []


async def test_a_tool_of_a_server_that_needed_a_sign_in_from_the_start_reads_that_it_needs_one(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    """A server signed out since start-up has never listed its tools: a call to one of them (a
    skill naming it, a resumed thread) says the server needs a sign-in and how to give it, not
    that the server "does not list a tool by that name (its tools: none)"."""
    _auth, url = protected
    configure(roder_home, url)
    host = host_for(workspace, trusted=False)
    runtime = runtime_with(
        host, [roder_ext_mcp.create(host)], [{"tool_calls": [call("mcp__remote__add", a=1, b=2)]}, {"text": "done"}]
    )
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "add")
        [result] = items(runtime, thread.id, ToolResultItem)
    finally:
        await runtime.close()
    assert result.is_error
    assert result.text.startswith(
        "tool 'mcp__remote__add' is unavailable: MCP server 'remote' needs a sign-in: run `roder mcp login remote`"
    ), result.text


@pytest.mark.parametrize("protected", ["sse-oauth", "http-oauth"], indirect=True)
async def test_token_is_used_refreshed_when_due_and_kept_out_of_transcripts(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    auth, url = protected
    auth.state.expires_in = 1  # every token is due for refresh at once (a minute's margin)
    (roder_home / "config.toml").write_text(
        f'[mcp]\nstartup_wait = 25\n\n[mcp.servers.remote]\nurl = "{url}"\nstartup_timeout = 60\n'
        f'type = "{"sse" if url.endswith("/sse") else "http"}"\noauth = {{ client_id = "{auth.state.client_id}" }}\n',
        encoding="utf-8",
    )
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    config = extension.settings.servers["remote"]
    outcome: list[str | None] = []
    service = LoginService({}, CredentialStore.for_env(host.env), lambda _name, error: outcome.append(error))
    opened: list[str] = []
    service.open_browser = lambda address: bool(opened.append(address)) or True
    start = await start_login(config, service)
    assert start.browser_opened and opened == [start.authorization_url]
    await asyncio.to_thread(browse, start.authorization_url or "")
    await service.wait(credential_name("remote"))
    assert outcome == [None]
    assert auth.state.registered == []  # a configured client id is used as it is

    runtime = runtime_with(host, [extension], [{"tool_calls": [call("mcp__remote__add", a=20, b=22)]}, {"text": "42"}])
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "add remotely")
        [result] = items(runtime, thread.id, ToolResultItem)
        connection = extension.manager.connections["remote"]
        assert result.text == "42", (result.text, connection.status, connection.error)
        assert "refresh_token" in auth.grant_types()
        kept = CredentialStore.for_env(host.env).path
        stored = "".join(p.read_text(errors="replace") for p in roder_home.rglob("*") if p.is_file() and p != kept)
        for token in auth.state.issued:
            assert token not in stored
    finally:
        await runtime.close()


#: Paths of ``credentials.json`` opened while a test watches (an audit hook sees every open).
_OPENED: list[str] = []
_WATCHING: list[bool] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _WATCHING and event == "open" and isinstance(args[0], str | Path) and str(args[0]).endswith("credentials.json"):
        _OPENED.append(str(args[0]))


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """The opens of ``credentials.json`` from now on, in this process."""
    if not _WATCHING:
        sys.addaudithook(_audit)  # once per process: audit hooks cannot be removed
    _WATCHING[:] = [True]
    _OPENED.clear()
    yield _OPENED
    _OPENED.clear()


def _oauth_config(home: Path, url: str, client_id: str) -> None:
    (home / "config.toml").write_text(
        f'[mcp]\nstartup_wait = 25\n\n[mcp.servers.remote]\nurl = "{url}"\nstartup_timeout = 60\n'
        f'oauth = {{ client_id = "{client_id}" }}\n',
        encoding="utf-8",
    )


async def _sign_in_elsewhere(extension: roder_ext_mcp.McpExtension, env: dict[str, str]) -> None:
    """``roder mcp login remote`` as another process does it: its own store, the browser's visit."""
    outcome: list[str | None] = []
    service = LoginService({}, CredentialStore.for_env(env), lambda _name, error: outcome.append(error))
    service.open_browser = lambda _address: True
    start = await start_login(extension.settings.servers["remote"], service)
    await asyncio.to_thread(browse, start.authorization_url or "")
    await service.wait(credential_name("remote"))
    await service.aclose()
    assert outcome == [None]


async def test_a_sign_in_elsewhere_clears_needs_login_and_the_file_is_read_when_it_changed(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path, opened: list[str]
) -> None:
    """A running session's server that needs a sign-in is listed as connected once one is
    stored (no restart, no tool call); the credentials file is read again only when it changed,
    not for every HTTP request, and a token stored by another process is used at once."""
    auth, url = protected
    _oauth_config(roder_home, url, auth.state.client_id)
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    connection = extension.manager.connections["remote"]
    try:
        await extension.contributor.wait_ready(60)
        assert connection.status == "needs-login", connection.error
        await _sign_in_elsewhere(extension, host.env)
        opened.clear()
        await extension.contributor.wait_ready(60)  # what `mcp/list` (`/mcp`, `roder mcp list`) asks
        assert (connection.status, connection.error) == ("connected", None)
        for _ in range(3):
            result = await connection.call_tool("add", {"a": 20, "b": 22})
            assert result.content[0].text == "42"
        assert len(opened) == 1  # dozens of requests (initialize, listings, calls): one read

        first = auth.state.issued[-1]
        await _sign_in_elsewhere(extension, host.env)
        second = auth.state.issued[-1]
        assert second != first
        opened.clear()
        result = await connection.call_tool("add", {"a": 1, "b": 2})
        assert result.content[0].text == "3"
        assert auth.sent("/introspect")[-1]["token"] == second
        assert len(opened) == 1
    finally:
        await extension.manager.aclose()


@pytest.fixture
def hostile() -> Iterator[tuple[OAuthTestServer, str]]:
    """An OAuth-protected server whose 401 challenge carries a hostile ``error_description``."""
    described = "token \u202eexe.gnp\u009b31m red\u0085line " + "x" * 400
    with OAuthTestServer(offer_device=False) as auth:
        env = {"FIXTURE_ISSUER": auth.issuer, "FIXTURE_ERROR_DESCRIPTION": described}
        proc, url = start_http_fixture(mode="http-oauth", env=env)
        try:
            yield auth, url
        finally:
            proc.kill()
            proc.wait()


def _one_clean_line(text: str) -> None:
    from roder_core.brokers.terminal_text import UNSAFE

    assert UNSAFE.search(text) is None and "\n" not in text and "\t" not in text, repr(text)
    assert len(text) < 500


async def test_what_a_server_says_reaches_the_status_on_one_clean_bounded_line(
    hostile: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    """A server's (or its authorization server's) ``error_description`` is quoted without
    escape sequences, control or bidi characters or newlines, and cut (saying so)."""
    auth, url = hostile
    _oauth_config(roder_home, url, auth.state.client_id)
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    connection = extension.manager.connections["remote"]
    try:
        await extension.contributor.wait_ready(60)
        assert connection.status == "needs-login"
        error = connection.error or ""
        _one_clean_line(error)
        assert "(the server said: token exe.gnp red line xxx" in error and error.endswith("…)")

        await _sign_in_elsewhere(extension, host.env)
        await extension.contributor.wait_ready(60)
        assert connection.status == "connected"
        # the server stops taking the token and the refresh fails, with a description written
        # to repaint the screen and retitle the terminal
        auth.state.invalidated.add(auth.state.issued[-1])
        auth.state.refresh_error = "\x1b[2J\x1b]0;pwned\x07evil\r\nsecond line " + "y" * 500
        with pytest.raises(ServerUnavailable) as refused:
            await connection.call_tool("add", {"a": 1, "b": 2})
        assert connection.status == "needs-login"
        error = connection.error or ""
        _one_clean_line(error)
        assert "invalid_grant (evil second line yyy" in error and "pwned" not in error
        assert error in str(refused.value)
    finally:
        await extension.manager.aclose()


async def test_a_request_the_server_takes_clears_an_earlier_need_for_a_sign_in(
    protected: tuple[OAuthTestServer, str], roder_home: Path, workspace: Path
) -> None:
    """A refresh that failed once marks the sign-in as needed; the next request the server
    takes (the refresh worked this time) clears that, so a later, unrelated error of the
    connection is not reported as a sign-in to run."""
    import httpx2
    from roder_ext_mcp.authorization import _PROBE, BearerAuth, ServerAuth

    auth, url = protected
    auth.state.expires_in = 1  # every token is due for refresh at once
    _oauth_config(roder_home, url, auth.state.client_id)
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    await _sign_in_elsewhere(extension, host.env)
    server_auth = ServerAuth(extension.settings.servers["remote"], CredentialStore.for_env(host.env))
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(auth=BearerAuth(server_auth), timeout=30, trust_env=False) as http:
        auth.state.refresh_error = "the token service is down"
        async with http.stream("POST", url, json=_PROBE, headers=headers) as refused:
            assert refused.status_code == 401
        assert "the token service is down" in (server_auth.needs_login or "")
        auth.state.refresh_error = None
        async with http.stream("POST", url, json=_PROBE, headers=headers) as taken:
            assert taken.status_code == 200
        assert server_auth.needs_login is None
