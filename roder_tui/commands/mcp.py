"""``roder mcp list [--json] [-v]``: configured MCP servers, their status, errors, tools, prompts
(as their ``/mcp__server__prompt`` commands) and resources (as ``@server:uri`` mentions).
``roder mcp login NAME`` / ``roder mcp logout NAME``: sign in to (out of) an MCP server over HTTP
that asks for OAuth (``roder_ext_mcp.authorization``); the browser opens on this machine, or with
``--no-browser`` the address is printed, and the loopback redirect finishes the sign-in.

The MCP sources of ``tools/list`` (through an in-process client): every server is connected as a
session would (project servers only when the folder is trusted or with ``--trust``), so a
misconfigured or crashing server shows its error here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from roder_tui.commands.tools import add_common, load_listing, source_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list MCP servers with status and tools")
    add_common(listing)
    listing.add_argument("-v", "--verbose", action="store_true", help="show each tool's description")
    login = sub.add_parser("login", help="sign in to an MCP server over HTTP that asks for OAuth")
    login.add_argument("server", help="the server's name (see `roder mcp list`)")
    login.add_argument("--no-browser", action="store_true", help="print the sign-in address instead of opening it")
    login.add_argument("--trust", action="store_true", help="include this folder's .mcp.json")
    logout = sub.add_parser("logout", help="sign out of an MCP server (revokes the tokens where the server can)")
    logout.add_argument("server", help="the server's name")
    logout.add_argument("--trust", action="store_true", help="include this folder's .mcp.json")


async def sign_in(name: str, *, trust: bool, open_browser: bool) -> int:
    from roder_ext_mcp.authorization import configured_server, credential_name, start_login

    from roder_core.auth.logins import LoginService
    from roder_core.settings.credentials import CredentialStore
    from roder_tui.commands.sign_in import finish_sign_in, show_address

    outcome: list[str | None] = []
    service = LoginService({}, CredentialStore.for_env(), lambda _name, error: outcome.append(error))

    async def begin() -> str:
        config = configured_server(Path.cwd(), name, trust=True if trust else None)
        start = await start_login(config, service, open_browser=open_browser)
        show_address(f"MCP server {name}", start.authorization_url or "", start.browser_opened)
        return credential_name(name)

    code = await finish_sign_in(service, outcome, begin)
    if code:
        return code
    print(f"signed in to MCP server {name}; the tokens are in {service.store.path} (readable by you only)")
    return 0


async def sign_out(name: str, *, trust: bool) -> int:
    from roder_ext_mcp.authorization import configured_server, logout

    from roder_core.auth.oauth import OAuthError
    from roder_core.settings.credentials import CredentialStore

    try:
        config = configured_server(Path.cwd(), name, trust=True if trust else None)
        signed_out, revoked = await logout(config, CredentialStore.for_env())
    except OAuthError as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 1
    if not signed_out:
        print(f"not signed in to MCP server {name}")
    else:
        print(
            f"signed out of MCP server {name}"
            + ("; the server revoked the tokens" if revoked else " (the server offers no revocation)")
        )
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action in ("login", "logout"):
        from roder_tui.commands.sign_in import run_guarded

        if args.action == "login":
            return run_guarded(sign_in(args.server, trust=args.trust, open_browser=not args.no_browser))
        return run_guarded(sign_out(args.server, trust=args.trust))
    return list_servers(args)


def list_servers(args: argparse.Namespace) -> int:
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
