"""Handlers of ``auth/codex/*`` and ``auth/supergrok/*``: one ``LoginService`` per server.

The service lives in ``Dispatcher.services`` so a sign-in started by one call is seen by the
next (``status`` says it is in progress; ``logout`` stops it). Configuration errors answer
``INVALID_PARAMS`` naming the setting; a failing authorization server answers ``RUNTIME_ERROR``
with its one-line reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from roder_core.auth.logins import LoginNotConfigured, LoginService, LoginStatus, user_logins
from roder_core.auth.oauth import OAuthError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import RUNTIME_ERROR, InvalidParams, RpcError
from roder_core.server.methods.core import runtime_env
from roder_core.server.protocol import NoParams, from_domain
from roder_core.server.protocol_auth import (
    AUTH_CODEX_LOGIN,
    AUTH_CODEX_LOGOUT,
    AUTH_CODEX_STATUS,
    AUTH_SUPERGROK_LOGIN,
    AUTH_SUPERGROK_LOGOUT,
    AUTH_SUPERGROK_STATUS,
    LOGIN_NAMES,
    AuthLoginCompleted,
    AuthLoginParams,
    AuthLoginResult,
    AuthLogoutResult,
    AuthStatusResult,
)
from roder_core.settings.credentials import CredentialStore

SERVICE = "logins"


def login_service(app: Dispatcher) -> LoginService:
    """The server's sign-ins, made on first use from the runtime's config and credentials file."""
    service = app.services.get(SERVICE)
    if service is None:
        runtime = app.runtime
        service = LoginService(user_logins(runtime.options.paths), CredentialStore.for_env(runtime_env(runtime)))
        app.services[SERVICE] = service
    assert isinstance(service, LoginService)
    return service


def _rpc_error(exc: OAuthError) -> RpcError:
    if isinstance(exc, LoginNotConfigured):
        return InvalidParams(str(exc))
    return RpcError(RUNTIME_ERROR, str(exc))


def _reload_engine(app: Dispatcher, provider: str) -> None:
    """A provider signed in (or out) while the server runs uses the new token at once."""
    for engine in app.runtime.registry.inference_engines:
        if engine.id() == provider:
            reload_key = getattr(engine, "reload_key", None)
            if reload_key is not None:
                reload_key()


def _login(name: str) -> Callable[[Dispatcher, AuthLoginParams, CallContext], Awaitable[AuthLoginResult]]:
    async def login(app: Dispatcher, params: AuthLoginParams, ctx: CallContext) -> AuthLoginResult:
        service = login_service(app)

        def done(login_name: str, error: str | None) -> None:
            if error is None:
                _reload_engine(app, service.status(login_name).provider)
            ctx.notify(AuthLoginCompleted(name=login_name, success=error is None, error=error))

        service.on_done = done
        try:
            start = await service.start(name, params.flow, open_browser=params.open_browser)
        except OAuthError as exc:
            raise _rpc_error(exc) from None
        return AuthLoginResult(
            name=start.name,
            flow=start.flow,
            provider=start.provider,
            user_code=start.user_code,
            verification_uri=start.verification_uri,
            verification_uri_complete=start.verification_uri_complete,
            authorization_url=start.authorization_url,
            browser_opened=start.browser_opened,
            expires_at=start.expires_at,
        )

    return login


def _status(name: str) -> Callable[[Dispatcher, NoParams, CallContext], Awaitable[AuthStatusResult]]:
    async def status(app: Dispatcher, params: NoParams, ctx: CallContext) -> AuthStatusResult:
        try:
            state = login_service(app).status(name)
        except OAuthError as exc:
            raise _rpc_error(exc) from None
        return status_result(state)

    return status


def status_result(state: LoginStatus) -> AuthStatusResult:
    """The protocol's view of a sign-in's status (``auth/NAME/status``): ``LoginStatus`` is the
    domain's, and every one of its fields crosses (``from_domain`` refuses one the model lacks)."""
    return from_domain(AuthStatusResult, dataclasses.asdict(state))


def _logout(name: str) -> Callable[[Dispatcher, NoParams, CallContext], Awaitable[AuthLogoutResult]]:
    async def logout(app: Dispatcher, params: NoParams, ctx: CallContext) -> AuthLogoutResult:
        service = login_service(app)
        provider = service.status(name).provider
        try:
            signed_out, revoked = await service.logout(name)
        except OAuthError as exc:
            _reload_engine(app, provider)  # the tokens are forgotten even when revocation failed
            raise RpcError(RUNTIME_ERROR, f"signed out of {name} here, but {exc}") from None
        _reload_engine(app, provider)
        return AuthLogoutResult(name=name, signed_out=signed_out, revoked=revoked)

    return logout


def _register() -> None:
    """Each sign-in's three handlers, registered by their specs (typed like ``@handles``)."""
    signins = (
        ("codex", AUTH_CODEX_LOGIN, AUTH_CODEX_STATUS, AUTH_CODEX_LOGOUT),
        ("supergrok", AUTH_SUPERGROK_LOGIN, AUTH_SUPERGROK_STATUS, AUTH_SUPERGROK_LOGOUT),
    )
    if {name for name, *_ in signins} != set(LOGIN_NAMES):
        raise RuntimeError("every sign-in of LOGIN_NAMES needs its three handlers here")
    for name, login, status, logout in signins:
        handles(login)(_login(name))
        handles(status)(_status(name))
        handles(logout)(_logout(name))


_register()
