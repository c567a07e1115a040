"""``roder providers list|login|logout``: configured providers and their keys.

``list`` shows every provider, its dialect, endpoint and whether (and where from) it has a key,
never a key; its last line says which provider a run without ``--provider`` would use, and why.
``login PROVIDER`` stores a key in the user's private credentials file, read from stdin when it
is piped and from a hidden prompt otherwise (never from the command line, where it would land in
shell history and ``ps``); ``logout PROVIDER`` removes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from roder_core.errors import RoderError
from roder_core.kernel.distribution import Distribution, build_distribution, make_host
from roder_core.kernel.registry import RegistryError
from roder_core.providers.selection import choose_default_provider
from roder_core.settings.config import ConfigError
from roder_core.settings.credentials import CredentialsError, CredentialStore, check_key

PROVIDER_EXTENSION_PREFIX = "roder-ext-provider-"
#: Entry points of the dialect extensions: a broken [providers.NAME] table makes its factory fail.
DIALECT_ENTRY_POINTS = ("entry point openai-responses", "entry point chat-completions", "entry point anthropic-messages")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list configured providers and whether their keys are set")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--profile", default="developer", help="capability profile to evaluate")
    listing.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")
    login = sub.add_parser("login", help="store a provider's API key (read from stdin or a hidden prompt)")
    login.add_argument("provider", help="provider id (see `roder providers list`)")
    login.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")
    logout = sub.add_parser("logout", help="remove a provider's stored API key")
    logout.add_argument("provider", help="provider id")


def load(args: argparse.Namespace) -> Distribution:
    host = make_host(trust=True if args.trust else None, profile=getattr(args, "profile", "developer"), interactive=False)
    return build_distribution(host)


def key_status(meta: Any) -> str:
    if meta.auth_type != "api_key":
        return "no key needed"
    if meta.auth_source == "stored":
        return "stored key"
    return f"{meta.auth_label or 'key'} {'set' if meta.auth_configured else 'missing'}"


def provider_rows(dist: Distribution) -> list[dict[str, Any]]:
    engines = sorted(dist.registry.inference_engines, key=lambda e: e.metadata().sort_order)
    rows = []
    for engine in engines:
        meta = engine.metadata()
        rows.append(
            {
                "id": engine.id(),
                "name": meta.name,
                "dialect": meta.dialect,
                "baseUrl": meta.base_url,
                "keyEnv": meta.auth_label,
                "keySet": bool(meta.auth_configured) if meta.auth_type == "api_key" else None,
                "keySource": meta.auth_source,
                "key": key_status(meta),
                "defaultModel": engine.default_model() or None,
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    if args.action == "login":
        return login(args)
    if args.action == "logout":
        return logout(args)
    try:
        dist = load(args)
        rows = provider_rows(dist)
        choice = choose_default_provider(dist.registry.inference_engines, dist.host.config)
    except (ConfigError, RegistryError, RoderError) as exc:
        print(f"roder: {exc}")
        return 2
    skipped = [
        {"id": s.source.removeprefix(PROVIDER_EXTENSION_PREFIX), "reason": s.reason}
        for s in dist.skipped
        if s.source.startswith(PROVIDER_EXTENSION_PREFIX) or s.source in DIALECT_ENTRY_POINTS
    ]
    if args.json:
        print(
            json.dumps(
                {"providers": rows, "default": {"id": choice.provider, "reason": choice.reason}, "notLoaded": skipped}, indent=2
            )
        )
        return 0
    headers = ("PROVIDER", "DIALECT", "BASE URL", "KEY", "DEFAULT MODEL")
    table = [(r["id"], r["dialect"] or "-", r["baseUrl"] or "-", r["key"], r["defaultModel"] or "-") for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
    for line in (headers, *table):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    for entry in skipped:
        print(f"not loaded: {entry['id']}: {entry['reason']}")
    print(f"default: {choice.provider} ({choice.reason})")
    return 0


def read_key(provider: str) -> str:
    """The key from piped stdin, or typed at a hidden prompt on a terminal."""
    if not sys.stdin.isatty():
        return sys.stdin.read()
    import getpass

    return getpass.getpass(f"API key for {provider} (input hidden): ")


def login(args: argparse.Namespace) -> int:
    provider = args.provider
    if provider == "mock":
        print("roder: 'mock' is the built-in offline model; it takes no key", file=sys.stderr)
        return 2
    try:
        dist = load(args)
    except (ConfigError, RegistryError, RoderError) as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 2
    engine = next((e for e in dist.registry.inference_engines if e.id() == provider), None)
    if engine is None:
        names = ", ".join(e.id() for e in dist.registry.inference_engines if e.id() != "mock")
        print(
            f"roder: unknown provider {provider!r} (configured: {names or 'none'}); add a [providers.{provider}] "
            "table to config.toml first",
            file=sys.stderr,
        )
        return 2
    try:
        key = read_key(provider)
    except (EOFError, KeyboardInterrupt):
        print("\nroder: no key given; nothing stored", file=sys.stderr)
        return 1
    store = CredentialStore.for_env(dist.host.env)
    try:
        store.set(provider, check_key(provider, key))
    except CredentialsError as exc:
        print(f"roder: {exc}; nothing stored", file=sys.stderr)
        return 2
    print(f"stored the {provider} key in {store.path} (readable by you only); `roder providers logout {provider}` removes it")
    env_name = engine.metadata().auth_label
    if env_name and dist.host.env.get(env_name):
        print(f"note: {env_name} is set in this environment and takes precedence over the stored key")
    return 0


def logout(args: argparse.Namespace) -> int:
    store = CredentialStore.for_env()
    try:
        removed = store.remove(args.provider)
    except CredentialsError as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 2
    if not removed:
        print(f"roder: no key is stored for {args.provider}", file=sys.stderr)
        return 1
    print(f"removed the stored {args.provider} key from {store.path}")
    return 0
