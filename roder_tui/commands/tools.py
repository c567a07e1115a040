"""``roder tools list [--json]``: every tool (built-in, extension, MCP) with its source.

The listing is ``tools/list`` through an in-process client, which first gives MCP servers
``--wait`` seconds to connect so their tools are listed too; servers that failed are listed
with their error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from roder_core.errors import RoderError
from roder_core.server.errors import RpcError
from roder_core.server.protocol import TOOLS_LIST, ToolsListParams, ToolsListResult
from roder_tui.commands.control import fail, local_client
from roder_tui.commands.extensions import settings_for


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--trust", action="store_true", help="include this folder's project items (.mcp.json, ...)")
    parser.add_argument("--profile", default="developer", help="capability profile")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for MCP servers (default 30)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    add_common(sub.add_parser("list", help="list every tool with its source"))


async def _listing(args: argparse.Namespace) -> ToolsListResult:
    async with local_client(settings_for(args)) as client:
        return await client.call(TOOLS_LIST, ToolsListParams(wait=min(max(args.wait, 0.0), 120.0)))


def load_listing(args: argparse.Namespace) -> ToolsListResult | int:
    """The listing, or the exit code after printing why there is none."""
    try:
        return asyncio.run(_listing(args))
    except RpcError as exc:
        return fail(exc.message)
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        return fail(str(exc))


def source_line(source: dict[str, Any]) -> str:
    line = f"{source['name']}  {source['status']}  {source['toolCount']} tools  ({source.get('target', '')})"
    if source.get("error"):
        line += "\n    " + source["error"].replace("\n", "\n    ")
    return line


def run(args: argparse.Namespace) -> int:
    listing = load_listing(args)
    if isinstance(listing, int):
        return listing
    sources = [source.wire() for source in listing.sources]
    errors = [f"{source}: {error}" for source, error in listing.errors.items()]
    if args.json:
        print(json.dumps({"tools": [tool.wire() for tool in listing.tools], "sources": sources, "errors": errors}, indent=2))
        return 0
    width = max((len(t.name) for t in listing.tools), default=10)
    for tool in listing.tools:
        description = " ".join(tool.description.split())
        tag = "" if not tool.read_only else " [read-only]"
        print(f"{tool.name:<{width}}  {tool.source}{tag}  {description[:100]}")
    for source in sources:
        if source["status"] != "connected":
            print("not available: " + source_line(source))
    for error in errors:
        print(f"error: {error}")
    return 0
