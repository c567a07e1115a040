"""``roder models [--provider P] [--json]``: the models each provider offers, with capabilities.

A provider's ``models`` list from config.toml wins; otherwise the endpoint's ``/models`` listing
is asked (remote providers only when their key is set). Each model shows the capability profile
Roder will use (context window, max output, reasoning, images, price per Mtok); ``?`` marks a
model the built-in table does not know, whose limits are defaults until a
``[models."provider/model"]`` table sets them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from roder_core.errors import RoderError
from roder_core.ir import ModelProfile
from roder_core.kernel.registry import RegistryError
from roder_core.settings.config import ConfigError
from roder_tui.commands.providers import load

LIST_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", help="only this provider (see `roder providers list`)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--profile", default="developer", help="capability profile to evaluate")
    parser.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")


async def _listing(engine: Any) -> tuple[list[ModelProfile], str | None]:
    meta = engine.metadata()
    if meta.auth_type == "api_key" and not meta.auth_configured:
        return [], f"{meta.auth_label or 'its key'} is not set and no key is stored (roder providers login)"
    try:
        return await asyncio.wait_for(engine.list_models(), LIST_TIMEOUT), None
    except TimeoutError:
        return [], f"no answer from {meta.base_url} within {LIST_TIMEOUT:.0f} s"
    except (RoderError, ConfigError) as exc:
        return [], str(exc)


def _price(value: float) -> str:
    return f"{value:g}" if value else "-"


def _sent_limit(engine: Any, profile: ModelProfile) -> int | None:
    """The output limit Roder actually sends for this model (None: the server decides)."""
    limit = getattr(engine, "sent_output_limit", None)
    return limit(profile) if limit is not None else profile.max_output_tokens


def _row(engine: Any, profile: ModelProfile) -> tuple[str, ...]:
    known = getattr(engine, "knows", lambda _m: True)(profile.id)
    price = f"{_price(profile.input_price)}/{_price(profile.output_price)}"
    if profile.cache_read_price:
        price += f" (cache {_price(profile.cache_read_price)})"
    return (
        profile.id + ("" if known else " ?"),
        f"{profile.context_window:,}",
        f"{limit:,}" if (limit := _sent_limit(engine, profile)) else "-",
        "yes" if profile.reasoning else "no",
        "yes" if profile.images else "no",
        price,
    )


async def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    dist = load(args)
    engines = sorted(dist.registry.inference_engines, key=lambda e: e.metadata().sort_order)
    if args.provider:
        engines = [e for e in engines if e.id() == args.provider]
        if not engines:
            known = ", ".join(e.id() for e in dist.registry.inference_engines)
            raise RoderError(f"unknown provider {args.provider!r} (configured: {known})")
    try:
        listings = await asyncio.gather(*(_listing(engine) for engine in engines))
    finally:
        for service in dist.registry.closeable_services():
            await service.aclose()
    return [
        {"engine": engine, "provider": engine.id(), "models": models, "error": error}
        for engine, (models, error) in zip(engines, listings, strict=True)
    ]


def run(args: argparse.Namespace) -> int:
    try:
        results = asyncio.run(collect(args))
    except (ConfigError, RegistryError, RoderError) as exc:
        print(f"roder: {exc}")
        return 2
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "provider": r["provider"],
                        "error": r["error"],
                        "models": [
                            {
                                **m.wire(),
                                "known": getattr(r["engine"], "knows", lambda _m: True)(m.id),
                                "sentOutputLimit": _sent_limit(r["engine"], m),
                            }
                            for m in r["models"]
                        ],
                    }
                    for r in results
                ],
                indent=2,
            )
        )
        return 0 if all(r["error"] is None for r in results) or not args.provider else 1
    headers = ("MODEL", "CONTEXT", "MAX OUT", "REASONING", "IMAGES", "$/MTOK IN/OUT")
    for result in results:
        print(f"{result['provider']}:")
        if result["error"]:
            print(f"  ({result['error']})")
            continue
        table = [_row(result["engine"], m) for m in result["models"]]
        if not table:
            print("  (no models listed)")
            continue
        widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
        for line in (headers, *table):
            print("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    if any("?" in _row(r["engine"], m)[0] for r in results for m in r["models"]):
        print('? = not in the built-in table: limits are defaults; set them in [models."provider/model"]')
    return 0 if not args.provider or results[0]["error"] is None else 1
