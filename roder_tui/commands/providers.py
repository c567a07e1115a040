"""``roder providers list|login|logout``: configured providers and their keys.

``list`` shows every provider, its dialect, endpoint and whether (and where from) it has a key,
never a key; its last line says which provider a run without ``--provider`` would use, and why.
``login PROVIDER`` stores a key in the user's private credentials file, read from stdin when it
is piped and from a hidden prompt otherwise (never from the command line, where it would land in
shell history and ``ps``); ``logout PROVIDER`` removes it. ``login NAME`` of an ``[auth.NAME]``
table runs that OAuth sign-in instead (``commands/sign_in.py``), and ``logout NAME`` ends it. All three are ``providers/list``,
``extensions/list`` and ``providers/configure`` through an in-process client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any

from roder_core.errors import RoderError
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.server.protocol import (
    EXTENSIONS_LIST,
    PROVIDERS_CONFIGURE,
    PROVIDERS_LIST,
    ProviderInfo,
    ProvidersConfigureParams,
    ProvidersListResult,
)
from roder_core.settings.credentials import CredentialsError, CredentialStore, check_key
from roder_tui.commands.control import local_client
from roder_tui.terminal_text import ask

PROVIDER_EXTENSION_PREFIX = "roder-ext-provider-"
#: Entry points of the dialect extensions: a broken [providers.NAME] table makes its factory fail.
DIALECT_ENTRY_POINTS = ("entry point openai-responses", "entry point chat-completions", "entry point anthropic-messages")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list configured providers and whether their keys are set")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--profile", default="developer", help="capability profile to evaluate")
    listing.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")
    login = sub.add_parser(
        "login", help="sign in ([auth.NAME] in config.toml) or store a provider's API key (read from stdin or a hidden prompt)"
    )
    login.add_argument("provider", help="provider id (see `roder providers list`), or the NAME of an [auth.NAME] sign-in")
    login.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")
    flow = login.add_mutually_exclusive_group()
    flow.add_argument("--device", action="store_true", help="sign in with a code typed on another device")
    flow.add_argument("--browser", action="store_true", help="sign in in the browser (loopback redirect)")
    login.add_argument("--no-browser", action="store_true", help="print the sign-in address instead of opening it")
    logout = sub.add_parser("logout", help="sign out, or remove a provider's stored API key")
    logout.add_argument("provider", help="provider id or sign-in NAME")


def settings_for(args: argparse.Namespace) -> StartSettings:
    trust = True if getattr(args, "trust", False) else None
    return StartSettings(profile=getattr(args, "profile", "developer"), trust=trust, interactive=False)


def key_status(info: ProviderInfo) -> str:
    if info.auth_source == "oauth":
        return "signed in"
    if info.auth_type != "api_key":
        return "no key needed"
    if info.auth_source == "stored":
        return "stored key"
    return f"{info.auth_label or 'key'} {'set' if info.auth_configured else 'missing'}"


def provider_row(info: ProviderInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "name": info.name,
        "dialect": info.dialect,
        "baseUrl": info.base_url,
        "keyEnv": info.auth_label,
        "keySet": bool(info.auth_configured) if info.auth_type == "api_key" else None,
        "keySource": info.auth_source,
        "key": key_status(info),
        "defaultModel": info.default_model or None,
    }


async def _listing(args: argparse.Namespace) -> tuple[ProvidersListResult, list[dict[str, str]]]:
    async with local_client(settings_for(args)) as client:
        providers = await client.call(PROVIDERS_LIST)
        extensions = await client.call(EXTENSIONS_LIST)
    skipped = [
        {"id": s.source.removeprefix(PROVIDER_EXTENSION_PREFIX), "reason": s.reason}
        for s in extensions.skipped
        if s.source.startswith(PROVIDER_EXTENSION_PREFIX) or s.source in DIALECT_ENTRY_POINTS
    ]
    return providers, skipped


def run(args: argparse.Namespace) -> int:
    from roder_tui.commands.sign_in import has_sign_in, run_sign_in, sign_in_names, sign_out

    if args.action == "login" and args.provider in sign_in_names():
        return run_sign_in(args)
    if args.action == "login":
        return login(args)
    if args.action == "logout" and has_sign_in(args.provider):
        return _guarded(sign_out(args.provider), "")
    if args.action == "logout":
        return _guarded(logout(args), "")
    try:
        listing, skipped = asyncio.run(_listing(args))
    except RpcError as exc:
        print(f"roder: {exc.message}")
        return 2
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        print(f"roder: {exc}")
        return 2
    rows = [provider_row(info) for info in listing.providers]
    reason = listing.default_reason or "chosen with --provider"
    if args.json:
        print(
            json.dumps({"providers": rows, "default": {"id": listing.provider, "reason": reason}, "notLoaded": skipped}, indent=2)
        )
        return 0
    headers = ("PROVIDER", "DIALECT", "BASE URL", "KEY", "DEFAULT MODEL")
    table = [(r["id"], r["dialect"] or "-", r["baseUrl"] or "-", r["key"], r["defaultModel"] or "-") for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
    for line in (headers, *table):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    for entry in skipped:
        print(f"not loaded: {entry['id']}: {entry['reason']}")
    print(f"default: {listing.provider} ({reason})")
    return 0


def _guarded(action: Coroutine[Any, Any, int], suffix: str) -> int:
    """Run a login/logout coroutine; start-up and call failures end with exit code 2."""
    try:
        return asyncio.run(action)
    except RpcError as exc:
        print(f"roder: {exc.message}{suffix}", file=sys.stderr)
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        print(f"roder: {exc}", file=sys.stderr)
    return 2


def read_key(provider: str) -> str:
    """The key from piped stdin, or typed at a hidden prompt on a terminal."""
    if not sys.stdin.isatty():
        return sys.stdin.read()
    return ask(f"API key for {provider} (input hidden): ", hidden=True)


async def _known(client: LocalAppClient, provider: str) -> bool:
    """Whether ``provider`` is configured; says so on stderr when it is not (before any prompt)."""
    listed = await client.call(PROVIDERS_LIST)
    if any(info.id == provider for info in listed.providers):
        return True
    names = ", ".join(info.id for info in listed.providers if info.id != "mock")
    print(
        f"roder: unknown provider {provider!r} (configured: {names or 'none'}); add a [providers.{provider}] "
        "table to config.toml first",
        file=sys.stderr,
    )
    return False


def login(args: argparse.Namespace) -> int:
    """Check the provider, prompt for its key, store it. The prompt runs with no event loop, so
    Ctrl+C or Ctrl+D there ends the command with one line (an event loop would turn Ctrl+C into a
    pending cancel that the blocked prompt never sees)."""
    provider = args.provider
    if provider == "mock":
        print("roder: 'mock' is the built-in offline model; it takes no key", file=sys.stderr)
        return 2
    if status := _guarded(_check_known(args), "; nothing stored"):
        return status
    try:
        key = check_key(provider, read_key(provider))  # refused here: an empty key would remove one
    except (EOFError, KeyboardInterrupt):
        print("\nroder: no key given; nothing stored", file=sys.stderr)
        return 1
    except CredentialsError as exc:
        print(f"roder: {exc}; nothing stored", file=sys.stderr)
        return 2
    return _guarded(_store_key(args, key), "; nothing stored")


async def _check_known(args: argparse.Namespace) -> int:
    async with local_client(settings_for(args), persist_config=True) as client:
        return 0 if await _known(client, args.provider) else 2


async def _store_key(args: argparse.Namespace, key: str) -> int:
    provider = args.provider
    async with local_client(settings_for(args), persist_config=True) as client:
        stored = await client.call(PROVIDERS_CONFIGURE, ProvidersConfigureParams(provider=provider, api_key=key))
    path = CredentialStore.for_env().path
    print(f"stored the {provider} key in {path} (readable by you only); `roder providers logout {provider}` removes it")
    for warning in stored.warnings:
        print(f"note: {warning}")
    return 0


async def logout(args: argparse.Namespace) -> int:
    async with local_client(StartSettings(interactive=False), persist_config=True) as client:
        removed = await client.call(PROVIDERS_CONFIGURE, ProvidersConfigureParams(provider=args.provider, api_key=""))
    if not removed.key_removed:
        print(f"roder: no key is stored for {args.provider}", file=sys.stderr)
        return 1
    print(f"removed the stored {args.provider} key from {CredentialStore.for_env().path}")
    return 0
