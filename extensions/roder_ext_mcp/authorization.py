"""Sign-in to MCP servers over HTTP (the MCP authorization spec: OAuth 2.1 for a public client).

A server that wants a sign-in answers 401 with ``WWW-Authenticate: Bearer resource_metadata=...``.
``roder mcp login NAME`` (or ``/mcp login NAME`` in the app) then follows the spec with the one
OAuth client of ``roder_core.auth``: the server's protected-resource metadata (RFC 9728) names
its authorization server, whose metadata (RFC 8414 / OpenID) gives the endpoints; without a
configured ``oauth.client_id`` Roder registers itself (RFC 7591) for this sign-in's loopback
redirect; the authorization-code flow with PKCE runs in the browser, and every authorization,
token and refresh request carries the server's canonical URI as ``resource`` (RFC 8707).

The tokens are kept in the credentials file (``credentials.json``, mode 0600) under
``mcp:NAME`` with the server's url, never in config, logs or transcripts. ``BearerAuth`` is the
one place a connection gets its token: it sends it, refreshes it when it is about to expire or
when the server answers 401 to it, and when there is no usable token it records that the server
needs a sign-in, which the connection reports in one line naming the command to run. Nothing here
opens a browser by itself: a headless run only says which command to run. Every request (to the
server, its metadata and its authorization server) goes through the outbound rule of
``brokers/outbound.py`` that names the configured server's host.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import httpx2

from roder_core.auth.logins import LoginService, LoginStart, fresh_token
from roder_core.auth.oauth import OAuthClient, OAuthError, bearer_challenge, http_client, unreachable
from roder_core.brokers.outbound import OutboundRule, normal_host
from roder_core.brokers.terminal_text import quoted_line
from roder_core.settings.credentials import CredentialsError, CredentialStore
from roder_ext_mcp.config import ServerConfig

#: The client name Roder registers under (RFC 7591 ``client_name``).
CLIENT_NAME = "Roder"
#: How much of why a sign-in is needed (an OAuth error, what the server said) a status quotes.
_DETAIL_LIMIT = 300
#: The body of the probe that asks a streamable HTTP server whether it wants a sign-in.
_PROBE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "roder", "version": "0"}},
}


def credential_name(server: str) -> str:
    """The name of a server's sign-in in the credentials file."""
    return f"mcp:{server}"


def login_hint(server: str) -> str:
    return f"needs a sign-in: run `roder mcp login {server}` (or `/mcp login {server}` in the app)"


def server_rule(url: str) -> OutboundRule:
    """The outbound rule of one HTTP server: its own configured host is named (a local server
    works); every other non-public address is refused, redirects included."""
    return OutboundRule(frozenset({normal_host(urlsplit(url).hostname or "")}), "the MCP server's url")


def stored_token(config: ServerConfig, store: CredentialStore) -> str | None:
    """The access token stored for the server, as stored (maybe due for refresh); None without a
    sign-in for its url (a token for another url is never sent to this one). Raises
    ``CredentialsError`` when the credentials file cannot be read."""
    record = store.oauth(credential_name(config.name))
    if record is None or record.get("server_url") != config.url:
        return None
    return str(record.get("access_token") or "") or None


class ServerAuth:
    """The sign-in state of one HTTP server: its stored token, and why it needs a sign-in."""

    def __init__(self, config: ServerConfig, store: CredentialStore) -> None:
        self.config = config
        self.store = store
        #: Set when the server refused the connection for want of a (valid) sign-in.
        self.needs_login: str | None = None
        #: Set when the server answered 401 without asking for a sign-in.
        self.unauthorized: str | None = None

    async def token(self, rejected: str | None = None) -> str | None:
        """The access token to send (refreshed when due or ``rejected``); None without one."""
        try:
            if stored_token(self.config, self.store) is None:
                return None
            name = credential_name(self.config.name)
            return await fresh_token(self.store, name, rejected=rejected, rule=server_rule(self.config.url))
        except (OAuthError, CredentialsError) as exc:
            self._needs_login(str(exc))
            return None

    def _needs_login(self, why: str) -> None:
        """Record that a sign-in is needed, saying ``why`` (text a server may have written, so
        quoted on one line without anything a terminal would interpret, and bounded)."""
        self.needs_login = login_hint(self.config.name) + (f" ({quoted_line(why, _DETAIL_LIMIT)})" if why else "")

    def accepted(self) -> None:
        """The server answered a request: whatever it refused before, it takes this sign-in now."""
        self.needs_login = self.unauthorized = None

    def refused(self, challenge: Mapping[str, str], sent_token: bool) -> None:
        """The server answered 401. With a Bearer challenge (or to Roder's own token) that means
        a sign-in is needed; a bare 401 to a request Roder sent no token with is about the
        headers the user configured, and is said so."""
        if self.needs_login is not None:
            return
        if challenge or sent_token:
            detail = challenge.get("error_description") or challenge.get("error")
            self._needs_login(f"the server said: {quoted_line(detail)}" if detail else "")
        else:
            self.unauthorized = (
                "the server answered HTTP 401 Unauthorized without an OAuth challenge: check the headers "
                f"configured for it (or, if it uses OAuth, run `roder mcp login {self.config.name}`)"
            )


class BearerAuth(httpx2.Auth):
    """Adds the server's bearer token to every request; on a 401 refreshes it and tries once
    more; a 401 that remains marks the server as needing a sign-in (the SDK then fails the
    request, and the connection reports ``needs_login`` instead of the SDK's wording)."""

    def __init__(self, auth: ServerAuth) -> None:
        self.auth = auth

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.auth.token()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            self.auth.accepted()
            return
        if token:
            fresh = await self.auth.token(rejected=token)
            if fresh and fresh != token:
                request.headers["Authorization"] = f"Bearer {fresh}"
                response = yield request
                if response.status_code != 401:
                    self.auth.accepted()
                    return
        self.auth.refused(bearer_challenge(response.headers.get("www-authenticate", "")), sent_token=bool(token))


async def _challenge(config: ServerConfig, rule: OutboundRule) -> dict[str, str]:
    """The server's ``WWW-Authenticate`` Bearer parameters, from a request without a token
    (empty when it did not answer 401: the metadata is then looked for where RFC 9728 puts it)."""
    async with http_client(config.url, rule) as http:
        try:
            if config.transport == "sse":
                request = http.build_request("GET", config.url, headers={"accept": "text/event-stream"})
            else:
                accept = "application/json, text/event-stream"
                request = http.build_request("POST", config.url, json=_PROBE, headers={"accept": accept})
            response = await http.send(request, stream=True)
            await response.aclose()
        except unreachable() as exc:
            raise OAuthError(f"cannot reach MCP server {config.name!r}: {exc}") from None
    return bearer_challenge(response.headers.get("www-authenticate", "")) if response.status_code == 401 else {}


async def start_login(config: ServerConfig, service: LoginService, *, open_browser: bool = True) -> LoginStart:
    """Discover the server's authorization server and start the browser sign-in; the flow
    finishes in ``service`` (``service.wait``), which stores the tokens."""
    if config.transport == "stdio" or not config.url:
        raise OAuthError(f"MCP server {config.name!r} runs on stdio; only servers over HTTP sign in")
    rule = server_rule(config.url)
    challenge = await _challenge(config, rule)
    resource = await OAuthClient.protected_resource(config.url, challenge.get("resource_metadata"), rule)
    endpoints = await OAuthClient.discover(resource.authorization_servers[0], rule)
    scopes = config.oauth_scopes or tuple(challenge.get("scope", "").split()) or resource.scopes

    async def client_for(redirect_uri: str) -> OAuthClient:
        client_id = config.oauth_client_id
        if not client_id:
            if not endpoints.registration:
                raise OAuthError(
                    f"{endpoints.issuer} offers no client registration; set oauth.client_id for MCP server {config.name!r}"
                )
            client_id = await OAuthClient.register(endpoints.registration, CLIENT_NAME, [redirect_uri], rule)
        return OAuthClient(endpoints, client_id, scopes, rule)

    return await service.start_browser(
        credential_name(config.name),
        credential_name(config.name),
        client_for,
        resource=resource.resource,
        open_browser=open_browser,
        extra={"server_url": config.url},
    )


async def logout(config: ServerConfig, store: CredentialStore) -> tuple[bool, bool]:
    """(signed out, revoked) for the server's sign-in; see ``LoginService.logout``."""
    rule = server_rule(config.url) if config.url else None
    return await LoginService({}, store).logout(credential_name(config.name), rule)


def configured_server(cwd: Path, name: str, *, trust: bool | None = None) -> ServerConfig:
    """The server ``name`` as a session in ``cwd`` would run it (``trust=None``: as the user
    decided for the folder); a clear error naming the known ones. Signing in is a credential
    operation on the user's own machine, like ``roder providers login``: it needs the server's
    definition, not a running session."""
    from roder_core.kernel.distribution import make_host
    from roder_ext_mcp import host_settings

    servers = host_settings(make_host(cwd, trust=trust, interactive=False)).servers
    config = servers.get(name)
    if config is None:
        known = ", ".join(sorted(servers)) or "none configured"
        raise OAuthError(f"no MCP server named {name!r} (known: {known})")
    if config.error:
        raise OAuthError(config.error)
    return config
