"""``roder extensions list [--json]``: manifests and capability statuses (seed 003 shape).

The listing is ``extensions/list`` through an in-process client; ``--json`` prints seed 003's
shape (``extensions``, ``capability_statuses``) plus the extensions that did not load and the
state of those that run outside Roder's process (programs, WebAssembly modules)."""

from __future__ import annotations

import argparse
import asyncio
import json

from roder_core.errors import RoderError
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.errors import RpcError
from roder_core.server.protocol import EXTENSIONS_LIST, ExtensionsListResult
from roder_tui.commands.control import fail, local_client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list installed extensions")
    listing.add_argument("--json", action="store_true", help="print the extensions/list JSON shape")
    listing.add_argument("--profile", default="developer", help="capability profile to evaluate")
    listing.add_argument("--trust", action="store_true", help="include this folder's project extensions")


def settings_for(args: argparse.Namespace) -> StartSettings:
    """A headless start-up evaluating ``--profile``, with the folder's own items only on ``--trust``
    (or when the folder is trusted already)."""
    return StartSettings(profile=args.profile, trust=True if args.trust else None, interactive=False)


async def _listing(args: argparse.Namespace) -> ExtensionsListResult:
    async with local_client(settings_for(args)) as client:
        return await client.call(EXTENSIONS_LIST)


def run(args: argparse.Namespace) -> int:
    try:
        result = asyncio.run(_listing(args))
    except RpcError as exc:
        return fail(exc.message)
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        return fail(str(exc))
    skipped = [{"source": s.source, "reason": s.reason} for s in result.skipped]
    processes = {p.id: p for p in result.processes}
    if args.json:
        data = {
            "extensions": result.extensions,
            "capability_statuses": result.capability_statuses,
            "skipped": skipped,
            "processes": [p.wire() for p in result.processes],
        }
        print(json.dumps(data, indent=2))
        return 0
    for ext in result.extensions:
        provides = ", ".join(f"{k}({v})" for svc in ext["provides"] for k, v in svc.items())
        print(f"{ext['id']} {ext['version']}  {ext['name']}")
        if ext.get("description"):
            print(f"    {ext['description']}")
        print(f"    provides: {provides or '-'}")
        caps = result.capability_statuses.get(ext["id"], [])
        if caps:
            print("    capabilities: " + ", ".join(f"{c['id']} ({c['decision']})" for c in caps))
        if (process := processes.get(ext["id"])) is not None:
            confined = "sandboxed" if process.sandboxed else "NOT sandboxed (no bubblewrap)"
            restarts = f", {process.restarts} restarts" if process.restarts else ""
            print(f"    {process.kind}: {process.state}, {confined}{restarts}")
            if process.last_error:
                print(f"    last error: {process.last_error}")
    for entry in skipped:
        print(f"not loaded: {entry['source']}: {entry['reason']}")
    return 0
