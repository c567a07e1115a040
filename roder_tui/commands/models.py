"""``roder models [--provider P] [--json]``: the models each provider offers, with capabilities.

A provider's ``models`` list from config.toml wins; otherwise the endpoint's ``/models`` listing
is asked (remote providers only when their key is set). Each model shows the capability profile
Roder will use (context window, max output, reasoning, images, price per Mtok); ``?`` marks a
model the built-in table does not know, whose limits are defaults until a
``[models."provider/model"]`` table sets them. The listing is ``providers/list`` then one
``model/list`` per provider (all at once), through an in-process client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from roder_core.errors import RoderError
from roder_core.ir import ModelProfile
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.server.protocol import MODEL_LIST, PROVIDERS_LIST, ModelListParams, ModelNotes, ProviderInfo
from roder_tui.commands.control import local_client
from roder_tui.commands.providers import settings_for

LIST_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", help="only this provider (see `roder providers list`)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--profile", default="developer", help="capability profile to evaluate")
    parser.add_argument("--trust", action="store_true", help="include this folder's .roder/config.toml")


@dataclass
class Listing:
    """One provider's models, or why there are none."""

    provider: str
    models: list[ModelProfile] = field(default_factory=list)
    notes: list[ModelNotes] = field(default_factory=list)
    error: str | None = None


async def _listing(client: LocalAppClient, info: ProviderInfo) -> Listing:
    if info.auth_type == "api_key" and not info.auth_configured:
        return Listing(info.id, error=f"{info.auth_label or 'its key'} is not set and no key is stored (roder providers login)")
    try:
        async with asyncio.timeout(LIST_TIMEOUT):
            listed = await client.call(MODEL_LIST, ModelListParams(provider=info.id))
    except TimeoutError:
        return Listing(info.id, error=f"no answer from {info.base_url} within {LIST_TIMEOUT:.0f} s")
    except RpcError as exc:
        return Listing(info.id, error=exc.message)
    return Listing(info.id, listed.models, listed.notes)


async def collect(args: argparse.Namespace) -> list[Listing]:
    async with local_client(settings_for(args)) as client:
        providers = (await client.call(PROVIDERS_LIST)).providers
        if args.provider:
            chosen = [p for p in providers if p.id == args.provider]
            if not chosen:
                known = ", ".join(p.id for p in providers)
                raise RoderError(f"unknown provider {args.provider!r} (configured: {known})")
            providers = chosen
        return list(await asyncio.gather(*(_listing(client, info) for info in providers)))


def _price(value: float) -> str:
    return f"{value:g}" if value else "-"


def _row(profile: ModelProfile, notes: ModelNotes) -> tuple[str, ...]:
    price = f"{_price(profile.input_price)}/{_price(profile.output_price)}"
    if profile.cache_read_price:
        price += f" (cache {_price(profile.cache_read_price)})"
    limit = notes.sent_output_limit
    return (
        profile.id + ("" if notes.known else " ?"),
        f"{profile.context_window:,}",
        f"{limit:,}" if limit else "-",
        "yes" if profile.reasoning else "no",
        "yes" if profile.images else "no",
        price,
    )


def _json_rows(listing: Listing) -> list[dict[str, Any]]:
    return [
        {**model.wire(), "known": notes.known, "sentOutputLimit": notes.sent_output_limit}
        for model, notes in zip(listing.models, listing.notes, strict=True)
    ]


def run(args: argparse.Namespace) -> int:
    try:
        results = asyncio.run(collect(args))
    except RpcError as exc:
        print(f"roder: {exc.message}")
        return 2
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        print(f"roder: {exc}")
        return 2
    if args.json:
        data = [{"provider": r.provider, "error": r.error, "models": _json_rows(r)} for r in results]
        print(json.dumps(data, indent=2))
        return 0 if all(r.error is None for r in results) or not args.provider else 1
    headers = ("MODEL", "CONTEXT", "MAX OUT", "REASONING", "IMAGES", "$/MTOK IN/OUT")
    for result in results:
        print(f"{result.provider}:")
        if result.error:
            print(f"  ({result.error})")
            continue
        table = [_row(m, n) for m, n in zip(result.models, result.notes, strict=True)]
        if not table:
            print("  (no models listed)")
            continue
        widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
        for line in (headers, *table):
            print("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    if any(not n.known for r in results for n in r.notes):
        print('? = not in the built-in table: limits are defaults; set them in [models."provider/model"]')
    return 0 if not args.provider or results[0].error is None else 1
