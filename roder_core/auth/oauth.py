"""OAuth 2.1 sign-in for a public client: discovery, the device flow, the authorization-code flow
with PKCE and a loopback redirect, refresh and revocation.

Roder is a public client (it cannot keep a client secret), so it follows the native-app rules:
RFC 8252 (a redirect to ``http://127.0.0.1:PORT/callback`` on a port chosen per sign-in), RFC
7636 PKCE with S256 on every authorization-code request, RFC 8628 for the device flow (a code the
user types on another device, polled at the interval the server asks for and slowed on
``slow_down``), RFC 8414 / OpenID discovery of the endpoints from the issuer, RFC 7009
revocation, RFC 7591 dynamic registration, RFC 8707 resource indicators and RFC 9728
protected-resource metadata (what an MCP server over HTTP names in its 401). One client serves
vendor logins (``auth/*``) and MCP servers over HTTP; the latter pass an ``OutboundRule`` so
every endpoint a server's metadata names is reached under the SSRF rules of
``brokers/outbound.py`` (a server cannot point the sign-in at the user's private network).

Tokens never appear in messages: errors quote the server's ``error`` code and description only.
httpx is imported when a flow runs, never at import time.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from roder_core.brokers.httpx_loader import load_httpx
from roder_core.brokers.terminal_text import quoted_line
from roder_core.errors import RoderError

if TYPE_CHECKING:
    import httpx

    from roder_core.brokers.outbound import OutboundRule

#: How long one HTTP exchange with the authorization server may take.
HTTP_TIMEOUT = 30.0
#: The device flow's default poll interval (RFC 8628 section 3.5) and its slow_down step.
DEFAULT_INTERVAL = 5.0
SLOW_DOWN_STEP = 5.0
#: A token this close to its expiry is refreshed before use.
REFRESH_MARGIN = 60.0
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
WELL_KNOWN = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
#: RFC 9728: where a protected resource publishes which authorization servers it trusts.
RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"
_CHALLENGE_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class OAuthError(RoderError):
    """A sign-in step failed; the message says which and what the server answered."""


@dataclass(frozen=True)
class Endpoints:
    """Where one authorization server takes each request (discovered or configured)."""

    issuer: str
    token: str
    authorization: str | None = None
    device_authorization: str | None = None
    revocation: str | None = None
    registration: str | None = None


@dataclass
class TokenSet:
    """What a token endpoint returned, with an absolute expiry; ``to_json`` is what is stored."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_response(cls, data: Mapping[str, Any], now: float, previous: TokenSet | None = None) -> TokenSet:
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthError("the token endpoint answered without an access_token")
        expires_in = data.get("expires_in")
        refresh = data.get("refresh_token")
        kept_refresh = previous.refresh_token if previous else None
        return cls(
            access_token=token,
            token_type=str(data.get("token_type") or "Bearer"),
            # A refresh answer may leave the refresh token out: the old one stays valid (RFC 6749 6).
            refresh_token=refresh if isinstance(refresh, str) and refresh else kept_refresh,
            expires_at=now + float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None,
            scope=str(data["scope"]) if isinstance(data.get("scope"), str) else (previous.scope if previous else None),
        )

    def expired(self, now: float, margin: float = REFRESH_MARGIN) -> bool:
        return self.expires_at is not None and now + margin >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"access_token": self.access_token, "token_type": self.token_type}
        if self.refresh_token:
            data["refresh_token"] = self.refresh_token
        if self.expires_at is not None:
            data["expires_at"] = self.expires_at
        if self.scope:
            data["scope"] = self.scope
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TokenSet:
        expires = data.get("expires_at")
        return cls(
            access_token=str(data.get("access_token") or ""),
            token_type=str(data.get("token_type") or "Bearer"),
            refresh_token=str(data["refresh_token"]) if data.get("refresh_token") else None,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            scope=str(data["scope"]) if data.get("scope") else None,
        )


@dataclass(frozen=True)
class DeviceCode:
    """What the user must do to finish a device sign-in, and how to poll for its end."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_at: float
    interval: float


@dataclass(frozen=True)
class Pkce:
    """A code verifier and its S256 challenge (RFC 7636 4.1-4.2)."""

    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> Pkce:
        verifier = secrets.token_urlsafe(64)[:96]
        digest = hashlib.sha256(verifier.encode("ascii")).digest()
        return cls(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii"))


@dataclass(frozen=True)
class ProtectedResource:
    """RFC 9728 metadata of a protected resource: its canonical URI (the RFC 8707 ``resource``
    sent with every authorization and token request) and the authorization servers it trusts."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes: tuple[str, ...] = ()


def bearer_challenge(header: str) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer ...`` challenge (RFC 6750 3, RFC 9728 5.1):
    ``resource_metadata``, ``scope``, ``error``; empty when the header has no Bearer challenge."""
    start = header.lower().find("bearer")
    if start < 0:
        return {}
    return {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _CHALLENGE_PARAM.finditer(header[start + 6 :])
    }


def _server_error(what: str, response: httpx.Response) -> OAuthError:
    """One line naming the step, the status and the server's own error code and description."""
    detail = ""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        detail = f": {quoted_line(str(body['error']), 80)}"
        if body.get("error_description"):
            detail += f" ({quoted_line(str(body['error_description']))})"
    return OAuthError(f"{what} failed with HTTP {response.status_code}{detail}")


def _checked_url(url: str, what: str) -> str:
    """Endpoints must be absolute http(s) URLs; plain http only on loopback (RFC 8252 8.3 spirit)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OAuthError(f"{what} {url!r} is not an http(s) URL")
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise OAuthError(f"{what} {url!r} must use https (plain http is only accepted on loopback)")
    return url


class OAuthClient:
    """The sign-in steps against one authorization server, for one public client id."""

    def __init__(
        self, endpoints: Endpoints, client_id: str, scopes: tuple[str, ...] = (), rule: OutboundRule | None = None
    ) -> None:
        self.endpoints = endpoints
        self.client_id = client_id
        self.scopes = scopes
        #: The outbound rule every request goes through (None: a vendor login's configured issuer).
        self.rule = rule
        self.clock: Callable[[], float] = time.time

    # ------------------------------------------------------------------ discovery

    @staticmethod
    async def discover(issuer: str, rule: OutboundRule | None = None) -> Endpoints:
        """RFC 8414 metadata, then OpenID discovery, both tried at the issuer's path."""
        issuer = _checked_url(issuer.rstrip("/"), "issuer")
        parts = urlsplit(issuer)
        base = f"{parts.scheme}://{parts.netloc}"
        async with http_client(issuer, rule) as http:
            for suffix in WELL_KNOWN:
                url = base + suffix + parts.path if suffix.endswith("authorization-server") else issuer + suffix
                response = await _get(http, url, f"the issuer {issuer}")
                if response.status_code == 200:
                    return endpoints_from_metadata(issuer, _json(response, "discovery"))
        raise OAuthError(f"{issuer} publishes no authorization server metadata ({', '.join(WELL_KNOWN)})")

    @staticmethod
    async def protected_resource(url: str, metadata_url: str | None, rule: OutboundRule | None = None) -> ProtectedResource:
        """RFC 9728 metadata of the resource at ``url``: from ``metadata_url`` (the 401's
        ``resource_metadata``) or else the well-known addresses at the resource's path and root.
        The metadata's ``resource`` must be ``url`` or a prefix of it on the same origin
        (RFC 9728 3.3): metadata naming another resource is refused, not used."""
        parts = urlsplit(_checked_url(url, "the server url"))
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        candidates = [metadata_url] if metadata_url else [base + RESOURCE_WELL_KNOWN + path, base + RESOURCE_WELL_KNOWN]
        async with http_client(url, rule) as http:
            for candidate in dict.fromkeys(candidates):
                response = await _get(http, _checked_url(candidate, "resource_metadata"), urlsplit(candidate).netloc)
                if response.status_code == 200:
                    break
            else:
                raise OAuthError(
                    f"{url} publishes no protected resource metadata ({candidates[0]} answered {response.status_code})"
                )
        meta = _json(response, "the protected resource metadata")
        resource = meta.get("resource")
        servers = meta.get("authorization_servers")
        if not isinstance(resource, str) or not isinstance(servers, list) or not servers:
            raise OAuthError("the protected resource metadata lacks resource or authorization_servers")
        same_origin = urlsplit(resource)[:2] == parts[:2]
        if not same_origin or not url.rstrip("/").startswith(resource.rstrip("/")):
            raise OAuthError(f"the protected resource metadata names {resource!r}, not {url!r}; refused")
        scopes = meta.get("scopes_supported")
        return ProtectedResource(
            resource=resource,
            authorization_servers=tuple(str(s) for s in servers),
            scopes=tuple(str(s) for s in scopes) if isinstance(scopes, list) else (),
        )

    # ------------------------------------------------------------------ device flow (RFC 8628)

    async def start_device(self) -> DeviceCode:
        url = self.endpoints.device_authorization
        if not url:
            raise OAuthError(f"{self.endpoints.issuer} offers no device authorization endpoint; use the browser sign-in")
        data = await self._post(url, {"client_id": self.client_id, **self._scope()}, "device authorization")
        try:
            return DeviceCode(
                device_code=str(data["device_code"]),
                user_code=str(data["user_code"]),
                verification_uri=str(data.get("verification_uri") or data["verification_url"]),
                verification_uri_complete=str(data["verification_uri_complete"])
                if data.get("verification_uri_complete")
                else None,
                expires_at=self.clock() + float(data.get("expires_in") or 900),
                interval=float(data.get("interval") or DEFAULT_INTERVAL),
            )
        except (KeyError, TypeError, ValueError):
            raise OAuthError("the device authorization answer lacks device_code, user_code or verification_uri") from None

    async def poll_device(self, code: DeviceCode, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> TokenSet:
        """Poll until the user approves, denies, or the code expires (the server sets the pace)."""
        interval = code.interval
        while True:
            if self.clock() >= code.expires_at:
                raise OAuthError("the device code expired before the sign-in was approved; start again")
            await sleep(interval)
            response = await self._raw_post(
                self.endpoints.token, {"grant_type": DEVICE_GRANT, "device_code": code.device_code, "client_id": self.client_id}
            )
            if response.status_code == 200:
                return TokenSet.from_response(_json(response, "token"), self.clock())
            error = _error_code(response)
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += SLOW_DOWN_STEP
                continue
            if error == "access_denied":
                raise OAuthError("the sign-in was denied at the authorization server")
            if error == "expired_token":
                raise OAuthError("the device code expired before the sign-in was approved; start again")
            raise _server_error("the device token request", response)

    # ------------------------------------------------------------------ authorization code + PKCE

    def authorization_url(self, redirect_uri: str, state: str, pkce: Pkce, resource: str | None = None) -> str:
        url = self.endpoints.authorization
        if not url:
            raise OAuthError(f"{self.endpoints.issuer} offers no authorization endpoint; use the device sign-in")
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            **self._scope(),
        }
        if resource:
            query["resource"] = resource
        return url + ("&" if "?" in url else "?") + urlencode(query)

    async def exchange_code(self, code: str, redirect_uri: str, pkce: Pkce, resource: str | None = None) -> TokenSet:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": self.client_id,
            "code_verifier": pkce.verifier,
        }
        if resource:
            form["resource"] = resource
        data = await self._post(self.endpoints.token, form, "the token request")
        return TokenSet.from_response(data, self.clock())

    # ------------------------------------------------------------------ refresh and revocation

    async def refresh(self, tokens: TokenSet, resource: str | None = None) -> TokenSet:
        if not tokens.refresh_token:
            raise OAuthError("the sign-in has expired and the server gave no refresh token; sign in again")
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "client_id": self.client_id}
        if resource:
            form["resource"] = resource
        data = await self._post(self.endpoints.token, form, "refreshing the sign-in")
        return TokenSet.from_response(data, self.clock(), previous=tokens)

    async def revoke(self, tokens: TokenSet) -> bool:
        """Revoke the refresh token (which ends the grant) and the access token; False when the
        server has no revocation endpoint. Failures are reported, never hidden."""
        url = self.endpoints.revocation
        if not url:
            return False
        for token, hint in ((tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")):
            if token:
                response = await self._raw_post(url, {"token": token, "token_type_hint": hint, "client_id": self.client_id})
                if response.status_code >= 400:
                    raise _server_error("revoking the sign-in", response)
        return True

    # ------------------------------------------------------------------ dynamic registration (RFC 7591)

    @staticmethod
    async def register(endpoint: str, name: str, redirect_uris: list[str], rule: OutboundRule | None = None) -> str:
        """Register a public client and return its id (MCP servers expect this)."""
        body = {
            "client_name": name,
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        async with http_client(endpoint, rule) as http:
            try:
                response = await http.post(_checked_url(endpoint, "registration endpoint"), json=body)
            except unreachable() as exc:
                raise OAuthError(f"client registration failed: {exc}") from None
        if response.status_code >= 400:
            raise _server_error("client registration", response)
        client_id = _json(response, "client registration").get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise OAuthError("client registration answered without a client_id")
        return client_id

    # ------------------------------------------------------------------ plumbing

    def _scope(self) -> dict[str, str]:
        return {"scope": " ".join(self.scopes)} if self.scopes else {}

    async def _raw_post(self, url: str, form: Mapping[str, str]) -> httpx.Response:
        async with http_client(url, self.rule) as http:
            try:
                return await http.post(_checked_url(url, "endpoint"), data=dict(form), headers={"accept": "application/json"})
            except unreachable() as exc:
                raise OAuthError(f"cannot reach {urlsplit(url).netloc}: {exc}") from None

    async def _post(self, url: str, form: Mapping[str, str], what: str) -> dict[str, Any]:
        response = await self._raw_post(url, form)
        if response.status_code >= 400:
            raise _server_error(what, response)
        return _json(response, what)


def endpoints_from_metadata(issuer: str, meta: Mapping[str, Any]) -> Endpoints:
    token = meta.get("token_endpoint")
    if not isinstance(token, str):
        raise OAuthError(f"{issuer}'s metadata names no token_endpoint")

    def optional(key: str) -> str | None:
        value = meta.get(key)
        return _checked_url(value, key) if isinstance(value, str) and value else None

    return Endpoints(
        issuer=issuer,
        token=_checked_url(token, "token_endpoint"),
        authorization=optional("authorization_endpoint"),
        device_authorization=optional("device_authorization_endpoint"),
        revocation=optional("revocation_endpoint"),
        registration=optional("registration_endpoint"),
    )


def http_client(url: str = "", rule: OutboundRule | None = None) -> httpx.AsyncClient:
    """A client for one exchange with an OAuth or a resource server (this module's, and the MCP
    sign-in's probe of its server); proxies from the environment apply except on loopback. With
    a rule, every connection goes through it (and no proxy is used)."""
    module = load_httpx()
    if rule is not None:
        from roder_core.brokers.outbound import async_transport

        ruled: httpx.AsyncClient = module.AsyncClient(
            timeout=HTTP_TIMEOUT, follow_redirects=False, transport=async_transport(rule)
        )
        return ruled
    loopback = urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")
    client: httpx.AsyncClient = module.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False, trust_env=not loopback)
    return client


def unreachable() -> tuple[type[Exception], ...]:
    """What a request raises when its server cannot be reached (or the outbound rule refused it)."""
    from roder_core.brokers.outbound import OutboundRefused

    return (load_httpx().HTTPError, OutboundRefused)


async def _get(http: httpx.AsyncClient, url: str, what: str) -> httpx.Response:
    try:
        return await http.get(url, headers={"accept": "application/json"})
    except unreachable() as exc:
        raise OAuthError(f"cannot reach {what}: {exc}") from None


def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise OAuthError(f"{what}: the server did not answer with JSON") from None
    if not isinstance(data, dict):
        raise OAuthError(f"{what}: the server's answer is not a JSON object")
    return data


def _error_code(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return ""
    return str(data.get("error") or "") if isinstance(data, dict) else ""
