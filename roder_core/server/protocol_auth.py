"""Protocol models of the vendor sign-ins: ``auth/codex/*`` and ``auth/supergrok/*`` (seed 004).

Each is a standard OAuth 2.1 sign-in configured under ``[auth.codex]`` / ``[auth.supergrok]``
(issuer, client id, scopes). ``login`` answers at once with what the user must do (a device
code and the address to type it at, or the browser address of a PKCE sign-in whose redirect
comes back to a loopback port); ``auth/login/completed`` reports the outcome to the connection
that started it. Tokens never travel over the protocol.
"""

from __future__ import annotations

from typing import Literal

from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel, ServerNotification, register, register_notification

#: The seed's sign-ins, each served as ``auth/NAME/login|status|logout``.
LOGIN_NAMES = ("codex", "supergrok")


class AuthLoginParams(ProtocolModel):
    #: "device" or "browser"; unset: ``[auth.NAME] flow``, else device where the server offers it.
    flow: Literal["device", "browser"] | None = None
    #: Open the browser on this machine for a browser sign-in (off for remote clients that open
    #: ``authorizationUrl`` themselves).
    open_browser: bool = True


class AuthLoginResult(ProtocolModel):
    name: str
    flow: Literal["device", "browser"]
    #: The provider whose requests will carry the token.
    provider: str
    #: Device flow: the code the user types at ``verificationUri``.
    user_code: str | None = None
    verification_uri: str | None = None
    verification_uri_complete: str | None = None
    #: Browser flow: the address that starts the sign-in.
    authorization_url: str | None = None
    browser_opened: bool = False
    #: Unix time after which the device code stops working.
    expires_at: float | None = None


class AuthStatusResult(ProtocolModel):
    name: str
    #: Whether ``[auth.NAME]`` names an issuer and a client id.
    configured: bool
    signed_in: bool
    provider: str
    issuer: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    refreshable: bool = False
    in_progress: bool = False
    #: Why the sign-in is not usable, when it is not.
    reason: str | None = None


class AuthLogoutResult(ProtocolModel):
    name: str
    #: False when there was no sign-in to forget.
    signed_out: bool
    #: Whether the authorization server was asked to revoke the tokens (it has a revocation endpoint).
    revoked: bool


class AuthLoginCompleted(ServerNotification):
    """A sign-in started by ``auth/NAME/login`` ended (sent to the connection that started it)."""

    method: Literal["auth/login/completed"] = "auth/login/completed"
    name: str
    success: bool
    error: str | None = None


def _login(name: str) -> MethodSpec[AuthLoginParams, AuthLoginResult]:
    return MethodSpec(
        f"auth/{name}/login",
        "auth",
        AuthLoginParams,
        AuthLoginResult,
        f"Start the {name} OAuth sign-in ([auth.{name}]); the outcome arrives as auth/login/completed.",
    )


def _status(name: str) -> MethodSpec[NoParams, AuthStatusResult]:
    return MethodSpec(f"auth/{name}/status", "auth", NoParams, AuthStatusResult, f"Whether the {name} sign-in is active.")


def _logout(name: str) -> MethodSpec[NoParams, AuthLogoutResult]:
    return MethodSpec(
        f"auth/{name}/logout",
        "auth",
        NoParams,
        AuthLogoutResult,
        f"Revoke the {name} sign-in at its server (where it offers revocation) and forget its tokens.",
    )


AUTH_CODEX_LOGIN = register(_login("codex"))
AUTH_CODEX_STATUS = register(_status("codex"))
AUTH_CODEX_LOGOUT = register(_logout("codex"))
AUTH_SUPERGROK_LOGIN = register(_login("supergrok"))
AUTH_SUPERGROK_STATUS = register(_status("supergrok"))
AUTH_SUPERGROK_LOGOUT = register(_logout("supergrok"))
register_notification(AuthLoginCompleted)
