"""``roder web``: the app in a browser (phones too), each page a client of this user's host.

roder web [--host 127.0.0.1] [--port 8765] [--token env:VAR] [--print-qr=false] [RUNTIME FLAGS]

Starts the background host first if none runs (with the runtime flags given here). Prints the
address with its token, once, and a QR code of it for a phone; the page exchanges the token for
a cookie. Binding anything but a loopback address prints a warning about TLS and tunnels.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from roder_tui.commands.serving import start_error

if TYPE_CHECKING:
    from roder_core.server.websocket import RemoteOptions

DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_tui.cli import add_runtime_flags
    from roder_tui.commands.app_server import _bool

    add_runtime_flags(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--token", metavar="env:VAR", help="read the page's token from this variable (default: a random one)")
    parser.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME", help="a host name browsers may use (e.g. a Tailscale name)"
    )
    parser.add_argument(
        "--print-qr", type=_bool, nargs="?", const=True, default=True, metavar="true|false", help="print a QR code of the address"
    )


def run(args: argparse.Namespace) -> int:
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        from roder_core.kernel.install_hints import extra_install_hint

        return start_error(RuntimeError(f"roder web needs the 'remote' extra: {extra_install_hint('remote')}"))
    try:
        options = _options(args)
    except ValueError as exc:
        return start_error(exc)
    problem = _ensure_host(args)
    if problem is not None:
        return problem
    try:
        return asyncio.run(_serve(options, args.print_qr))
    except KeyboardInterrupt:
        return 130


def _options(args: argparse.Namespace) -> RemoteOptions:
    import os

    from roder_core.server.websocket import RemoteOptions

    source = args.token
    if source is None:
        token, source = secrets.token_urlsafe(32), "generated"
    elif not source.startswith("env:") or len(source) == 4:
        raise ValueError("--token takes env:VAR (a token on the command line would show in `ps`)")
    else:
        token = os.environ.get(source[4:], "").strip()
        if not token:
            raise ValueError(f"--token {source}: the environment variable {source[4:]} is empty or unset")
    names = tuple(h.strip().lower() for h in args.allow_host if h.strip())
    return RemoteOptions(args.host, args.port, token, source, args.print_qr, names)


def _ensure_host(args: argparse.Namespace) -> int | None:
    """Every page attaches to this user's host: start it here if none runs."""
    from roder_tui import host

    async def running() -> bool:
        client = await host.connect()
        if client is None:
            return False
        await client.close()
        return True

    if asyncio.run(running()):
        return None
    try:
        socket, _banner = host.start_background(host.runtime_flags(args), Path.cwd())
    except (host.HostStartError, OSError) as exc:
        return start_error(exc)
    sys.stderr.write(f"roder: started a background host on {socket} (`roder serve --stop` ends it)\n")
    return None


async def _serve(options: RemoteOptions, print_qr: bool) -> int:
    from roder_tui.web import RoderWebServer, WebSite

    site = WebSite(RoderWebServer(options))
    try:
        port = await site.start()
    except OSError as exc:
        return start_error(RuntimeError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}"))
    announce(options, port, print_qr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await site.stop()
    return 0


def page_urls(host: str, port: int) -> list[str]:
    from roder_core.server.websocket import connect_urls

    return [url.replace("ws://", "http://", 1) + "/" for url in connect_urls(host, port)]


def announce(options: RemoteOptions, port: int, print_qr: bool, out: TextIO | None = None) -> None:
    from roder_core.brokers.addresses import is_loopback_host

    out = out or sys.stdout
    urls = page_urls(options.host, port)
    shown = options.token if options.token_source == "generated" else "<the token>"
    first = f"{urls[0]}?token={shown}"
    out.write(f"roder web: open {first}\n")
    for url in urls[1:]:
        out.write(f"  also reachable at {url}?token={shown}\n")
    if options.token_source != "generated":
        out.write(f"  (the token is the value of {options.token_source[4:]})\n")
    out.write("  the page swaps the token for a cookie; every page is a client of this user's host\n")
    if not is_loopback_host(options.host):
        out.write(
            "roder: WARNING: serving on a non-loopback address without TLS. Anyone who can reach this port and "
            "learns the token controls Roder here, and the traffic is readable on the way. Put it behind TLS (a "
            "reverse proxy with a certificate) or reach it through a tunnel instead: "
            f"`ssh -L {port}:127.0.0.1:{port} this-machine`, Tailscale or WireGuard.\n"
        )
    if print_qr and options.token_source == "generated":
        from roder_core.server.websocket import qr_text

        try:
            out.write(qr_text(urls[-1] + f"?token={options.token}"))
        except ImportError:
            from roder_core.kernel.install_hints import extra_install_hint

            out.write(f"  (for a QR code: {extra_install_hint('remote')})\n")
    out.flush()
