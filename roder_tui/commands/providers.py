"""``roder providers list [--json]``: every configured provider, its dialect, endpoint and key status.

Only whether a key is present is ever shown, never a key. The last line says which provider a
run without ``--provider`` would use, and why.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from roder_core.config import ConfigError
from roder_core.distribution import Distribution, build_distribution, make_host
from roder_core.errors import RoderError
from roder_core.providers.selection import choose_default_provider
from roder_core.registry import RegistryError

PROVIDER_EXTENSION_PREFIX = "roder-ext-provider-"
#: Entry points of the dialect extensions: a broken [providers.NAME] table makes its factory fail.
DIALECT_ENTRY_POINTS = ("entry point openai-responses", "entry point chat-completions",
                        "entry point anthropic-messages")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list configured providers and whether their keys are set")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--profile", default="developer", help="capability profile to evaluate")
    listing.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")


def load(args: argparse.Namespace) -> Distribution:
    host = make_host(trust=True if args.trust else None, profile=args.profile, interactive=False)
    return build_distribution(host)


def key_status(meta: Any) -> str:
    if meta.auth_type != "api_key":
        return "no key needed"
    return f"{meta.auth_label or 'key'} {'set' if meta.auth_configured else 'missing'}"


def provider_rows(dist: Distribution) -> list[dict[str, Any]]:
    engines = sorted(dist.registry.inference_engines, key=lambda e: e.metadata().sort_order)
    rows = []
    for engine in engines:
        meta = engine.metadata()
        rows.append({
            "id": engine.id(), "name": meta.name, "dialect": meta.dialect, "baseUrl": meta.base_url,
            "keyEnv": meta.auth_label, "keySet": bool(meta.auth_configured) if meta.auth_type == "api_key" else None,
            "key": key_status(meta), "defaultModel": engine.default_model() or None,
        })
    return rows


def run(args: argparse.Namespace) -> int:
    try:
        dist = load(args)
        rows = provider_rows(dist)
        choice = choose_default_provider(dist.registry.inference_engines, dist.host.config)
    except (ConfigError, RegistryError, RoderError) as exc:
        print(f"roder: {exc}")
        return 2
    skipped = [{"id": s.source.removeprefix(PROVIDER_EXTENSION_PREFIX), "reason": s.reason}
               for s in dist.skipped if s.source.startswith(PROVIDER_EXTENSION_PREFIX) or s.source in DIALECT_ENTRY_POINTS]
    if args.json:
        print(json.dumps({"providers": rows, "default": {"id": choice.provider, "reason": choice.reason},
                          "notLoaded": skipped}, indent=2))
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
