"""``roder app-server``: the control plane over stdio, or over an authenticated WebSocket.

roder app-server                         # JSON-RPC lines on stdin/stdout
roder app-server --remote [--listen ws://127.0.0.1:9786] [--auth-token env:VAR] [--print-qr=false]
                         [--allow-host NAME ...]
roder app-server --schema                # JSON Schema of every method and notification
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import sys

from roder_tui.commands.serving import run_server, start_error, startup_errors

DEFAULT_LISTEN = "ws://127.0.0.1:9786"


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_tui.cli import add_runtime_flags

    add_runtime_flags(parser)
    parser.add_argument("--remote", action="store_true", help="serve JSON-RPC on a WebSocket instead of stdio")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, help=f"WebSocket address (default {DEFAULT_LISTEN})")
    parser.add_argument(
        "--auth-token", metavar="env:VAR", help="read the bearer token from an environment variable (default: a random token)"
    )
    parser.add_argument(
        "--print-qr",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="print the pairing link as a terminal QR code (default true)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name WebSocket clients may use besides localhost and IP addresses "
        "(repeatable; e.g. a Tailscale machine name)",
    )
    parser.add_argument("--schema", action="store_true", help="print the protocol's JSON Schema and exit")
    parser.add_argument(
        "--no-persist-config", action="store_true", help="do not write provider/settings changes back to config.toml"
    )
    parser.add_argument(
        "--queue-size", type=int, default=10_000, help="notifications a client may fall behind before it is told so"
    )


def run(args: argparse.Namespace) -> int:
    if args.schema:
        from roder_core.server.schema import protocol_schema

        print(json.dumps(protocol_schema(), indent=2))
        return 0
    return run_server(lambda: _serve(args))


async def _serve(args: argparse.Namespace) -> int:
    from roder_core.runtime.bootstrap import settings_from_args, start_runtime
    from roder_core.server.dispatcher import Dispatcher

    options = None
    if args.remote:
        from roder_core.server.websocket import RemoteOptions

        try:
            options = RemoteOptions.from_args(args.listen, args.auth_token, print_qr=args.print_qr, allow_hosts=args.allow_host)
        except ValueError as exc:
            return start_error(exc)
    protocol_fd = None
    if not args.remote:
        from roder_core.server.stdio import reserve_stdout

        protocol_fd = reserve_stdout()
    try:
        settings = settings_from_args(args, interactive=True)
        if options is not None:  # known before any extension starts a process
            settings = dataclasses.replace(settings, secrets={"app-server token": options.token})
        started = start_runtime(settings)
    except startup_errors() as exc:
        return start_error(exc)
    for warning in started.distribution.warnings:
        sys.stderr.write(f"roder: {warning}\n")
    dispatcher = Dispatcher(
        started.runtime, started=started, persist_config=not args.no_persist_config, queue_size=args.queue_size
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if options is not None:
            from roder_core.server.websocket import serve_remote

            await serve_remote(dispatcher, options, stop)
        else:
            from roder_core.server.stdio import serve_stdio

            serving = asyncio.create_task(serve_stdio(dispatcher, stdout_fd=protocol_fd))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for task in (serving, stopping):
                task.cancel()
            await asyncio.gather(serving, stopping, return_exceptions=True)
    finally:
        await dispatcher.close()
        await started.runtime.close()
    return 0
