"""``roder serve``: this user's background host, which outlives the terminal.

roder serve [RUNTIME FLAGS]                 # start it in the background (returns once it is ready)
roder serve --status                        # is one running, where, with which settings
roder serve --stop                          # stop it (running turns are interrupted and saved)
roder serve --foreground                    # run it here (systemd units, containers, debugging)
roder serve --remote [--listen ws://...]    # also serve the authenticated WebSocket

The host is the runtime and app server the app normally embeds, listening on a private unix
socket; ``roder attach``, ``roder --detach``, ``roder web`` and ``roder -p`` use it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path

from roder_tui.commands.serving import run_server, start_error, startup_errors

EXIT_NOT_RUNNING = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_tui.cli import add_runtime_flags
    from roder_tui.commands.app_server import DEFAULT_LISTEN, _bool

    add_runtime_flags(parser)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="say whether a host runs, where and with which settings")
    what.add_argument("--stop", action="store_true", help="stop the running host (running turns are interrupted and saved)")
    what.add_argument("--foreground", action="store_true", help="run the host in this process instead of the background")
    parser.add_argument("--remote", action="store_true", help="also serve the authenticated WebSocket (see app-server)")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, help=f"WebSocket address with --remote (default {DEFAULT_LISTEN})")
    parser.add_argument("--auth-token", metavar="env:VAR", help="with --remote: read the bearer token from this variable")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME", help="with --remote: an extra host name")
    parser.add_argument("--print-qr", type=_bool, nargs="?", const=True, default=False, metavar="true|false")
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.status:
        return asyncio.run(_status())
    if args.stop:
        return asyncio.run(_stop())
    if args.foreground:
        return run_server(lambda: _serve(args))
    return _start(args)


async def _status() -> int:
    from roder_tui import host

    client = await host.connect()
    if client is None:
        sys.stderr.write("roder: no host is running (start one with `roder serve` or `roder --detach`)\n")
        return EXIT_NOT_RUNNING
    async with client:
        print(host.describe(await host.status(client)))
    return 0


async def _stop() -> int:
    from roder_tui import host

    client = await host.connect()
    if client is None:
        sys.stderr.write("roder: no host is running\n")
        return EXIT_NOT_RUNNING
    async with client:
        info = await host.status(client)
        from roder_core.server.protocol_attach import HOST_STOP

        await client.call(HOST_STOP)
        await client.closed.wait()  # the host closes every connection as it shuts down
    print(f"roder host stopped (pid {info.pid})")
    return 0


def _start(args: argparse.Namespace) -> int:
    from roder_tui import host

    async def running() -> str | None:
        client = await host.connect()
        if client is None:
            return None
        async with client:
            return host.describe(await host.status(client))

    described = asyncio.run(running())
    if described is not None:
        print(described)
        print("roder: a host is already running; `roder attach` opens it, `roder serve --stop` stops it")
        return 0
    try:
        socket, banner = host.start_background(_forwarded(args), Path.cwd())
    except (host.HostStartError, OSError) as exc:
        return start_error(exc)
    print(f"roder host started in the background on {socket}")
    sys.stdout.write(banner)
    print("  attach with `roder attach`, open it in a browser with `roder web`, stop it with `roder serve --stop`")
    return 0


def _forwarded(args: argparse.Namespace) -> list[str]:
    from roder_tui import host

    flags = host.runtime_flags(args)
    if args.remote:
        flags += ["--remote", "--listen", args.listen, *(f"--allow-host={h}" for h in args.allow_host)]
        if args.auth_token:
            flags += ["--auth-token", args.auth_token]
    return flags


async def _serve(args: argparse.Namespace) -> int:
    """The host itself: runtime, dispatcher, unix socket (and the WebSocket with --remote)."""
    from roder_core.runtime.bootstrap import settings_from_args, start_runtime
    from roder_core.server.dispatcher import Dispatcher
    from roder_core.server.host_paths import HostDirError, HostPaths
    from roder_core.server.unix import UnixHost

    options = None
    if args.remote:
        from roder_core.server.websocket import RemoteOptions

        try:
            options = RemoteOptions.from_args(args.listen, args.auth_token, print_qr=args.print_qr, allow_hosts=args.allow_host)
        except ValueError as exc:
            return start_error(exc)
    try:
        settings = settings_from_args(args, interactive=True)
        if options is not None:  # known before any extension starts a process
            settings = dataclasses.replace(settings, secrets={"app-server token": options.token})
        started = start_runtime(settings)
    except startup_errors() as exc:
        return start_error(exc)
    for warning in started.distribution.warnings:
        sys.stderr.write(f"roder: {warning}\n")
    dispatcher = Dispatcher(started.runtime, started=started, persist_config=True)
    flags = {name: getattr(args, name, None) for name in ("provider", "model", "mode", "sandbox", "profile", "max_iterations")}
    unix = UnixHost(dispatcher, HostPaths.from_env(), {**flags, "trust": bool(args.trust)})
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, unix.request_stop)
    loop.add_signal_handler(signal.SIGHUP, lambda: None)  # the terminal that started it went away
    remote = None
    try:
        try:
            await unix.start()
            banner = ""
            if options is not None:  # the WebSocket too; its address and token go to whoever started it
                import io

                from roder_core.server.websocket import RemoteServer, announce

                remote = RemoteServer(dispatcher, options)
                text = io.StringIO()
                announce(options, await remote.start(), text)
                banner = text.getvalue()
                sys.stderr.write(banner)
        except (HostDirError, OSError) as exc:
            return start_error(exc)
        _warm_up()
        sys.stderr.write(
            f"roder: host listening on {unix.socket_path} (pid {os.getpid()}, workspace {started.runtime.options.cwd})\n"
        )
        sys.stderr.flush()
        _signal_ready(args.ready_fd, f"ready {unix.socket_path}\n{banner}")
        await unix.stopped.wait()
        sys.stderr.write("roder: host stopping\n")
    finally:
        if remote is not None:
            await remote.stop()
        await unix.close()
        await dispatcher.close()
        await started.runtime.close()
    return 0


#: The modules whose models a turn builds (the requests and results of the methods a client
#: calls to run one, the thread's items and events, the hooks' payloads): built by ``_warm_up``.
TURN_MODEL_MODULES = (
    "roder_core.ir",
    "roder_core.threads.events",
    "roder_core.kernel.hook_payloads",
    "roder_core.server.protocol",
    "roder_core.server.protocol_attach",
)


def _warm_up() -> None:
    """Do, once the host listens and before it says it is ready, what a new host's first turn
    would otherwise do while its client waits: import the server's method handlers (the
    dispatcher loads them all at its first call), the model client, the brokers and the command
    parser, and build the models a turn uses (``runtime.first_use``) and the tools' argument
    schemas. Before ready, not after: a client that starts as soon as ``roder serve`` returns (a
    script, the one-shot benchmark) would otherwise wait for the same work in the middle of its
    first turn, on the host's one event loop. A client that connects meanwhile waits no longer
    than its first turn would have."""
    from roder_core.kernel.tool_args import build_pending_schemas
    from roder_core.runtime import first_use
    from roder_core.server.dispatcher import load_method_modules

    load_method_modules()
    build_pending_schemas()
    first_use.import_model_client()
    first_use.import_command_broker()
    first_use.import_command_parser()
    first_use.build_models(*TURN_MODEL_MODULES)


def _signal_ready(fd: int | None, line: str) -> None:
    """Tell ``roder serve`` (waiting in the background start) that the socket listens."""
    if fd is None:
        return
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
