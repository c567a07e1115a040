"""``roder providers login NAME`` for an OAuth sign-in (``[auth.NAME]`` in the user's config.toml).

The device flow prints the code and the address to type it at (it works over SSH and on a
phone); the browser flow opens the browser on this machine (or prints the address with
``--no-browser``) and waits for the loopback redirect. Ctrl+C stops the wait and stores nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from roder_core.auth.logins import Flow, LoginService, user_logins
from roder_core.auth.oauth import OAuthError
from roder_core.settings.config import ConfigError
from roder_core.settings.credentials import CredentialsError, CredentialStore
from roder_core.settings.paths import RoderPaths


def sign_in_names() -> set[str]:
    """Names with an ``[auth.NAME]`` table (unreadable config: none, the key path reports it)."""
    try:
        return set(user_logins(RoderPaths.from_env()))
    except ConfigError:
        return set()


def has_sign_in(name: str) -> bool:
    try:
        return CredentialStore.for_env().oauth(name) is not None
    except CredentialsError:
        return False


async def finish_sign_in(service: LoginService, outcome: list[str | None], begin: Callable[[], Awaitable[str]]) -> int:
    """The part every OAuth sign-in command shares: ``begin`` starts the flow and shows the user
    where to go (it returns the credential's name); then wait for it, and say how it ended.
    0 when the tokens are stored; 1 when the flow failed; 2 when it could not start. ``outcome``
    is where ``service``'s finish callback put the error (None: stored)."""
    try:
        name = await begin()
        print("waiting for the sign-in to finish (Ctrl+C to stop)...", file=sys.stderr, flush=True)
        await service.wait(name)
    except OAuthError as exc:
        print(f"roder: {exc}; nothing stored", file=sys.stderr)
        return 2
    finally:
        await service.aclose()
    error = outcome[0] if outcome else "the sign-in did not finish"
    if error is not None:
        print(f"roder: {error}; nothing stored", file=sys.stderr)
        return 1
    return 0


def show_address(what: str, address: str, browser_opened: bool) -> None:
    opened = "opened in your browser" if browser_opened else "open it in a browser on this machine"
    print(f"Sign in to {what} at this address ({opened}):\n{address}", flush=True)


async def sign_in(args: argparse.Namespace) -> int:
    outcome: list[str | None] = []
    service = LoginService(user_logins(RoderPaths.from_env()), CredentialStore.for_env(), lambda _n, error: outcome.append(error))
    flow: Flow | None = "device" if args.device else "browser" if args.browser else None

    async def begin() -> str:
        start = await service.start(args.provider, flow, open_browser=not args.no_browser)
        if start.flow == "device":
            where = start.verification_uri_complete or start.verification_uri
            print(f"To sign in to {args.provider}, open {where}\nand enter the code: {start.user_code}", flush=True)
        else:
            show_address(args.provider, start.authorization_url or "", start.browser_opened)
        return str(args.provider)

    code = await finish_sign_in(service, outcome, begin)
    if code:
        return code
    status = service.status(args.provider)
    print(
        f"signed in to {args.provider} for provider {status.provider}; the tokens are in {service.store.path} "
        f"(readable by you only); `roder providers logout {args.provider}` signs out"
    )
    return 0


async def sign_out(name: str) -> int:
    service = LoginService(user_logins(RoderPaths.from_env()), CredentialStore.for_env())
    try:
        _, revoked = await service.logout(name)
    except OAuthError as exc:
        print(f"roder: signed out of {name} here, but {exc}", file=sys.stderr)
        return 1
    print(f"signed out of {name}" + ("; the server revoked the tokens" if revoked else " (the server offers no revocation)"))
    return 0


def run_sign_in(args: argparse.Namespace) -> int:
    return run_guarded(sign_in(args))


def run_guarded(command: Coroutine[Any, Any, int]) -> int:
    """Run a sign-in or sign-out command: Ctrl+C and a broken credentials file each end it with
    one line (nothing was stored) instead of a traceback; a broken config rises to the CLI's one
    handler of configuration errors."""
    try:
        return asyncio.run(command)
    except KeyboardInterrupt:
        print("\nroder: sign-in stopped; nothing stored", file=sys.stderr)
        return 1
    except CredentialsError as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 2
