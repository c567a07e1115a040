"""``roder mcp list [--json] [-v]``: configured MCP servers, their status, errors, tools, prompts
(as their ``/mcp__server__prompt`` commands) and resources (as ``@server:uri`` mentions).

The MCP sources of ``tools/list`` (through an in-process client): every server is connected as a
session would (project servers only when the folder is trusted or with ``--trust``), so a
misconfigured or crashing server shows its error here.
"""

from __future__ import annotations

import argparse
import json

from roder_tui.commands.tools import add_common, load_listing, source_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list MCP servers with status and tools")
    add_common(listing)
    listing.add_argument("-v", "--verbose", action="store_true", help="show each tool's description")


def run(args: argparse.Namespace) -> int:
    listing = load_listing(args)
    if isinstance(listing, int):
        return listing
    sources = [source.wire() for source in listing.sources if source.kind == "mcp"]
    if args.json:
        print(json.dumps({"servers": sources}, indent=2))
        return 0
    if not sources:
        print("no MCP servers configured (add [mcp.servers.NAME] to config.toml or a .mcp.json to a trusted folder)")
        return 0
    for source in sources:
        print(source_line(source))
        for tool in source["tools"]:
            description = " ".join(source["descriptions"].get(tool, "").split())
            print(f"    {tool}" + (f": {description}" if args.verbose and description else ""))
        for prompt in source.get("prompts", []):
            print(f"    {prompt}  (prompt)")
        for resource in source.get("resources", []):
            print(f"    {resource}  (resource)")
        for template in source.get("resourceTemplates", []):
            print(f"    {template}  (resource template: fill in the {{...}} parts)")
    return 0
