"""Named OAuth sign-ins (``[auth.NAME]``): start, finish in the background, status, sign-out,
and the fresh access token a provider sends as its key.

A sign-in is started by ``auth/NAME/login`` (or ``roder providers login NAME``) and answers at
once with what the user must do (a device code and where to type it, or the browser address);
the flow then finishes in a task and reports through ``on_done``. What is stored (the
credentials file, never config.toml) is enough to refresh and revoke without the config: the
token endpoint, the revocation endpoint and the client id travel with the tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from roder_core.auth.oauth import DeviceCode, Endpoints, OAuthClient, OAuthError, Pkce, TokenSet
from roder_core.auth.redirect import LoopbackRedirect
from roder_core.brokers.browser import open_in_browser
from roder_core.settings.config import AuthLoginConfig, load_config
from roder_core.settings.credentials import CredentialStore
from roder_core.settings.paths import RoderPaths

if TYPE_CHECKING:
    from roder_core.brokers.outbound import OutboundRule

#: The seed's vendor logins and the provider each one signs in for unless ``provider`` says otherwise.
DEFAULT_PROVIDERS = {"codex": "openai", "supergrok": "xai"}
Flow = Literal["device", "browser"]
#: The fields of a stored record that a refresh replaces (the rest names endpoints and client).
TOKEN_FIELDS = frozenset({"access_token", "token_type", "refresh_token", "expires_at", "scope"})


class LoginNotConfigured(OAuthError):
    """No issuer (or client id) is set for a login: the message names the setting."""


@dataclass(frozen=True)
class LoginStart:
    """What the user must do to finish a sign-in that has started."""

    name: str
    flow: Flow
    provider: str
    user_code: str | None = None
    verification_uri: str | None = None
    verification_uri_complete: str | None = None
    authorization_url: str | None = None
    expires_at: float | None = None
    browser_opened: bool = False


@dataclass(frozen=True)
class LoginStatus:
    name: str
    configured: bool
    signed_in: bool
    provider: str
    issuer: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    refreshable: bool = False
    in_progress: bool = False
    reason: str | None = None


def user_logins(paths: RoderPaths) -> dict[str, AuthLoginConfig]:
    """The ``[auth.NAME]`` tables of the user's own config.toml. A project's config, even a
    trusted one, never names the server a sign-in goes to (it could send the user to its own)."""
    return dict(load_config(paths).auth)


def provider_for(name: str, config: AuthLoginConfig | None) -> str:
    return (config.provider if config and config.provider else None) or DEFAULT_PROVIDERS.get(name, name)


def not_configured(name: str) -> LoginNotConfigured:
    return LoginNotConfigured(
        f"no issuer is configured for the {name} sign-in: set issuer and client_id under [auth.{name}] in config.toml"
    )


async def endpoints_for(name: str, config: AuthLoginConfig) -> Endpoints:
    """The configured endpoints, or those the issuer publishes."""
    if not config.issuer or not config.client_id:
        raise not_configured(name)
    if config.token_endpoint:
        from roder_core.auth.oauth import endpoints_from_metadata

        return endpoints_from_metadata(config.issuer, config.model_dump(exclude_none=True))
    return await OAuthClient.discover(config.issuer)


class LoginService:
    """The sign-ins of one runtime: at most one flow in progress per name."""

    def __init__(
        self,
        configs: dict[str, AuthLoginConfig],
        store: CredentialStore,
        on_done: Callable[[str, str | None], None] = lambda _name, _error: None,
    ) -> None:
        self.configs = configs
        self.store = store
        self.on_done = on_done
        self._flows: dict[str, asyncio.Task[None]] = {}
        #: Opens the browser for a browser sign-in (replaced in tests and headless hosts).
        self.open_browser: Callable[[str], bool] = open_in_browser  # never a browser a workspace folder holds

    def config(self, name: str) -> AuthLoginConfig:
        config = self.configs.get(name)
        if config is None or not config.issuer or not config.client_id:
            raise not_configured(name)
        return config

    async def start(self, name: str, flow: Flow | None = None, open_browser: bool = True) -> LoginStart:
        config = self.config(name)
        endpoints = await endpoints_for(name, config)
        client = OAuthClient(endpoints, config.client_id or "", tuple(config.scopes))
        chosen: Flow = flow or config.flow or ("device" if endpoints.device_authorization else "browser")
        provider = provider_for(name, config)
        if chosen == "device":
            await self.cancel(name)
            code = await client.start_device()
            self._run(name, self._finish_device(name, provider, client, code))
            return LoginStart(
                name,
                "device",
                provider,
                user_code=code.user_code,
                verification_uri=code.verification_uri,
                verification_uri_complete=code.verification_uri_complete,
                expires_at=code.expires_at,
            )
        return await self.start_browser(name, provider, client, open_browser=open_browser)

    async def start_browser(
        self,
        name: str,
        provider: str,
        client: OAuthClient | Callable[[str], Awaitable[OAuthClient]],
        *,
        resource: str | None = None,
        open_browser: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> LoginStart:
        """The authorization-code flow with PKCE and a loopback redirect, finished in the
        background. ``client`` may be a function of the redirect URI (a client registered for
        it, RFC 7591); ``resource`` is the RFC 8707 indicator sent with the authorization and
        token requests and kept for refreshes; ``extra`` is stored with the tokens."""
        await self.cancel(name)
        state = secrets.token_urlsafe(24)
        redirect = LoopbackRedirect(state)
        await redirect.start()
        try:
            oauth = client if isinstance(client, OAuthClient) else await client(redirect.redirect_uri)
            pkce = Pkce.new()
            url = oauth.authorization_url(redirect.redirect_uri, state, pkce, resource)
        except BaseException:
            await redirect.close()
            raise
        kept = {**(extra or {}), **({"resource": resource} if resource else {})}
        self._run(name, self._finish_browser(name, provider, oauth, redirect, pkce, kept))
        opened = self.open_browser(url) if open_browser else False
        return LoginStart(name, "browser", provider, authorization_url=url, browser_opened=opened)

    async def wait(self, name: str) -> None:
        """Until the sign-in in progress for ``name`` ends (its outcome went to ``on_done``)."""
        task = self._flows.get(name)
        if task is not None:
            await asyncio.wait({task})  # a cancelled caller is cancelled; the flow's end is not an error here

    async def cancel(self, name: str) -> bool:
        task = self._flows.pop(name, None)
        if task is None or task.done():
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return True

    async def aclose(self) -> None:
        """Stop every sign-in in progress (the server is closing)."""
        for name in list(self._flows):
            await self.cancel(name)

    def status(self, name: str) -> LoginStatus:
        config = self.configs.get(name)
        configured = bool(config and config.issuer and config.client_id)
        record = self.store.oauth(name)
        in_progress = name in self._flows and not self._flows[name].done()
        provider = provider_for(name, config)
        if record is None:
            reason = None if configured else not_configured(name).args[0]
            return LoginStatus(name, configured, False, provider, in_progress=in_progress, reason=reason)
        tokens = TokenSet.from_json(record)
        expired = tokens.expired(time.time(), margin=0)
        return LoginStatus(
            name,
            configured,
            signed_in=not expired or bool(tokens.refresh_token),
            provider=str(record.get("provider") or provider),
            issuer=str(record.get("issuer") or "") or None,
            expires_at=tokens.expires_at,
            scope=tokens.scope,
            refreshable=bool(tokens.refresh_token),
            in_progress=in_progress,
            reason="the sign-in expired and cannot be refreshed; sign in again" if expired and not tokens.refresh_token else None,
        )

    async def logout(self, name: str, rule: OutboundRule | None = None) -> tuple[bool, bool]:
        """(signed out, revoked): stops a flow in progress, revokes at the server, forgets the tokens.

        The tokens are forgotten even when revocation fails; the error is raised afterwards so
        the user learns the server may still honour them."""
        await self.cancel(name)
        record = self.store.oauth(name)
        if record is None:
            return False, False
        self.store.set_oauth(name, None)
        endpoints = Endpoints(
            issuer=str(record.get("issuer") or ""),
            token=str(record.get("token_endpoint") or ""),
            revocation=str(record["revocation_endpoint"]) if record.get("revocation_endpoint") else None,
        )
        client = OAuthClient(endpoints, str(record.get("client_id") or ""), rule=rule)
        revoked = await client.revoke(TokenSet.from_json(record))
        return True, revoked

    # ------------------------------------------------------------------ the background halves

    def _run(self, name: str, flow: Any) -> None:
        task = asyncio.get_running_loop().create_task(flow, name=f"roder-login-{name}")
        self._flows[name] = task

    async def _finish_device(self, name: str, provider: str, client: OAuthClient, code: DeviceCode) -> None:
        await self._finish(name, provider, client, client.poll_device(code), {})

    async def _finish_browser(
        self, name: str, provider: str, client: OAuthClient, redirect: LoopbackRedirect, pkce: Pkce, extra: dict[str, Any]
    ) -> None:
        async def tokens() -> TokenSet:
            code = await redirect.code()
            return await client.exchange_code(code, redirect.redirect_uri, pkce, extra.get("resource"))

        try:
            await self._finish(name, provider, client, tokens(), extra)
        finally:
            await redirect.close()

    async def _finish(self, name: str, provider: str, client: OAuthClient, pending: Any, extra: dict[str, Any]) -> None:
        try:
            tokens: TokenSet = await pending
        except OAuthError as exc:
            self.on_done(name, str(exc))
            return
        self.store.set_oauth(name, record_for(provider, client, tokens, extra))
        self.on_done(name, None)


def record_for(provider: str, client: OAuthClient, tokens: TokenSet, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the credentials file keeps of a sign-in: enough to refresh and revoke later."""
    record: dict[str, Any] = {
        **(extra or {}),
        "provider": provider,
        "issuer": client.endpoints.issuer,
        "client_id": client.client_id,
        "token_endpoint": client.endpoints.token,
        **tokens.to_json(),
    }
    if client.endpoints.revocation:
        record["revocation_endpoint"] = client.endpoints.revocation
    return record


def signed_in_for(store: CredentialStore, provider: str) -> tuple[str, dict[str, Any]] | None:
    """The sign-in (name, record) whose token ``provider`` uses, if any."""
    for name, record in sorted(store.all_oauth().items()):
        if record.get("provider") == provider and record.get("access_token"):
            return name, record
    return None


async def fresh_access_token(store: CredentialStore, provider: str) -> str | None:
    """The provider's access token, refreshed first when it is about to expire; None when the
    provider has no sign-in."""
    found = signed_in_for(store, provider)
    if found is None:
        return None
    return await fresh_token(store, found[0])


async def fresh_token(
    store: CredentialStore, name: str, *, rejected: str | None = None, rule: OutboundRule | None = None
) -> str | None:
    """The access token of sign-in ``name``, refreshed first when it is about to expire or when
    it is ``rejected`` (the server answered 401 to it); None when there is no sign-in. Refreshes
    are serialised across processes by a file lock and re-read under it, so a token another
    process just refreshed is used, not refreshed again. A stored ``resource`` (RFC 8707) is
    sent with the refresh. Raises ``OAuthError`` when the refresh fails."""
    record = store.oauth(name)
    if record is None:
        return None
    tokens = TokenSet.from_json(record)
    if not tokens.expired(time.time()) and tokens.access_token != rejected:
        return tokens.access_token
    lock = store.refresh_lock(name)
    await asyncio.to_thread(lock.__enter__)
    try:
        record = store.oauth(name)
        if record is None:  # signed out meanwhile
            return None
        tokens = TokenSet.from_json(record)
        if not tokens.expired(time.time()) and tokens.access_token != rejected:
            return tokens.access_token
        endpoints = Endpoints(issuer=str(record.get("issuer") or ""), token=str(record.get("token_endpoint") or ""))
        client = OAuthClient(endpoints, str(record.get("client_id") or ""), rule=rule)
        resource = record.get("resource")
        fresh = await client.refresh(tokens, str(resource) if resource else None)
        kept = {k: v for k, v in record.items() if k not in TOKEN_FIELDS}
        store.set_oauth(name, {**kept, **fresh.to_json()})
        return fresh.access_token
    finally:
        lock.__exit__(None, None, None)
