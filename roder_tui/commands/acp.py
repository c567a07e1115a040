"""``roder acp``: Roder as an Agent Client Protocol agent on stdio (Zed, Toad, other ACP clients).

roder acp [--mode ask] [--provider P --model M] [--client-terminal auto|always|never]
"""

from __future__ import annotations

import argparse
import sys

from roder_tui.commands.serving import run_server, start_error, startup_errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_tui.cli import add_runtime_flags

    add_runtime_flags(parser)
    parser.add_argument(
        "--client-terminal",
        choices=("auto", "always", "never"),
        default="auto",
        help="run commands in the editor's terminal: auto = when it offers one and Roder's sandbox is off; "
        "always = even if that leaves the sandbox; never = Roder's process broker",
    )


def run(args: argparse.Namespace) -> int:
    return run_server(lambda: _serve(args))


async def _serve(args: argparse.Namespace) -> int:
    from roder_core.runtime.bootstrap import settings_from_args
    from roder_core.server.acp.serve import serve_acp
    from roder_core.server.client import LocalAppClient
    from roder_core.server.stdio import reserve_stdout

    protocol_fd = reserve_stdout()
    try:
        app = LocalAppClient.start(settings_from_args(args, interactive=True))
    except startup_errors() as exc:
        return start_error(exc)
    async with app:
        await serve_acp(app, stdin=sys.stdin.buffer, stdout_fd=protocol_fd, client_terminal=args.client_terminal)
    return 0
