"""``roder attach``: the full app as a client of a running host; ``roder --detach`` starts one.

roder attach                                  # this user's background host (roder serve)
roder attach ws://HOST:PORT --token env:VAR   # an app server started with --remote
roder attach 'roder://connect?payload=...'    # its pairing link (asks for the token if it has none)

Quitting the app (or losing the terminal) only detaches: turns keep running in the host and
approvals wait there for the next client.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from roder_tui.terminal_text import ask

if TYPE_CHECKING:
    from roder_core.server.remote_client import RemoteAppClient


@dataclass(frozen=True)
class Target:
    """Where to attach: this user's unix socket (``url`` None) or a WebSocket with its token."""

    url: str | None = None
    token: str = ""

    @property
    def label(self) -> str:
        return self.url or "this user's host"

    async def connect(self) -> RemoteAppClient:
        from roder_core.server.remote_client import HostUnreachable, RemoteAppClient

        if self.url is not None:
            return await RemoteAppClient.connect_websocket(self.url, self.token)
        from roder_tui import host

        client = await host.connect()
        if client is None:
            raise HostUnreachable("no Roder host is running; start one with `roder serve` or `roder --detach`")
        return client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", nargs="?", help="ws://HOST:PORT or a roder://connect pairing link (default: this user's host)")
    parser.add_argument("--token", metavar="env:VAR", help="read the WebSocket bearer token from this environment variable")
    parser.add_argument("-r", "--resume", nargs="?", const="", default=None, metavar="ID", help="open this thread of the host")
    parser.add_argument("-c", "--continue", dest="continue_last", action="store_true", help="open the host's latest thread")


def target_of(address: str | None, token_source: str | None, env: dict[str, str] | None = None) -> Target:
    """Resolve the address and token; raises ValueError with what to fix."""
    env = dict(os.environ) if env is None else env
    token = ""
    if token_source is not None:
        if not token_source.startswith("env:") or len(token_source) == 4:
            raise ValueError("--token takes env:VAR (a token on the command line would show in `ps`)")
        token = env.get(token_source[4:], "").strip()
        if not token:
            raise ValueError(f"--token {token_source}: the environment variable {token_source[4:]} is empty or unset")
    if address is None:
        return Target()
    if address.startswith("roder://"):
        urls, paired_token = parse_pairing_link(address)
        return Target(urls[0], token or paired_token)
    parts = urlsplit(address)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"cannot attach to {address!r}: give ws://HOST:PORT or a roder://connect pairing link")
    return Target(address, token)


def parse_pairing_link(link: str) -> tuple[list[str], str]:
    """The addresses and (when included) the token of ``roder app-server --remote``'s link."""
    query = parse_qs(urlsplit(link).query)
    payload = (query.get("payload") or [""])[0]
    try:
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error):
        raise ValueError("the pairing link is damaged (copy it again from the server's output)") from None
    urls = [u for u in data.get("urls", []) if isinstance(u, str)] if isinstance(data, dict) else []
    if not urls:
        raise ValueError("the pairing link names no address")
    return urls, str(data.get("token") or "")


def run(args: argparse.Namespace) -> int:
    try:
        target = target_of(args.address, args.token)
    except ValueError as exc:
        sys.stderr.write(f"roder: {exc}\n")
        return 2
    if target.url is not None and not target.token:
        target = Target(target.url, _ask_token(target.url))
    return attach(args, target)


def _ask_token(url: str) -> str:
    if not sys.stdin.isatty():
        return ""
    return ask(f"token for {url}: ", hidden=True).strip()


def attach(args: argparse.Namespace, target: Target) -> int:
    """Open the app on the host; returns the exit code."""
    from roder_core.server.errors import RpcError

    in_browser = bool(os.environ.get("TEXTUAL_DRIVER"))  # a `roder web` page: textual-serve's driver
    if not in_browser and (not sys.stdin.isatty() or not sys.stdout.isatty()):
        sys.stderr.write("roder: attaching needs a terminal (or a browser: `roder web`)\n")
        return 2
    try:
        workspace = asyncio.run(_workspace(target))
    except RpcError as exc:
        sys.stderr.write(f"roder: {exc.message}\n")
        return 1
    from roder_tui.app import RoderApp

    # The host's folder names its threads and runs its commands, here or not; when it is not on
    # this machine, the app lists and attaches its files through the host.
    app = RoderApp(_app_args(args), client_factory=target.connect, cwd=Path(workspace), files_remote=not Path(workspace).is_dir())
    code = app.run()
    if app.exit_message:
        sys.stderr.write(app.exit_message + "\n")
    return int(code or 0)


async def _workspace(target: Target) -> str:
    """The host's workspace, asked before the app starts (the app's folder views need it)."""
    client = await target.connect()
    async with client:
        from roder_core.server.protocol import INITIALIZE, ClientInfo, InitializeParams

        return (await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="roder-attach")))).cwd


def _app_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(
        attach=True,
        prompt=getattr(args, "prompt", None) or [],
        resume=getattr(args, "resume", None),
        continue_last=getattr(args, "continue_last", False),
        provider=getattr(args, "provider", None),
    )


def untrusted_note(folder: Path) -> str:
    """The one line a background host started without ``--trust`` owes its user when ``folder``
    brings its own items and was never trusted or refused: the app would have asked (its
    first-open trust prompt), a host cannot, so it says what it left out and how to load it."""
    from roder_core.policy.trust import TrustStore, project_items
    from roder_core.settings.paths import RoderPaths

    if not TrustStore(RoderPaths.from_env(dict(os.environ))).needs_prompt(folder):
        return ""
    items = ", ".join(project_items(folder))
    return (
        f"roder: this folder is not trusted, so its own items ({items}) are not loaded; "
        "`roder trust` trusts it (then `roder serve --stop` and start again), or start with --trust"
    )


def detach(args: argparse.Namespace) -> int:
    """``roder --detach``: start this user's host here if none runs, then attach to it."""
    from roder_tui import host

    async def running() -> str | None:
        client = await host.connect()
        if client is None:
            return None
        async with client:
            return (await host.status(client)).cwd

    workspace = asyncio.run(running())
    if workspace is None:
        try:
            host.start_background(host.runtime_flags(args), Path.cwd())
        except (host.HostStartError, OSError) as exc:
            sys.stderr.write(f"roder: {exc}\n")
            return 2
        if not getattr(args, "trust", False):
            note = untrusted_note(Path.cwd())
            if note:
                sys.stderr.write(note + "\n")
    elif Path(workspace).resolve() != Path.cwd().resolve():
        sys.stderr.write(f"roder: attaching to the running host of {workspace} (`roder serve --stop` ends it)\n")
    return attach(args, Target())
