"""``roder acp``: Roder as an Agent Client Protocol agent on stdio (Zed, Toad, other ACP clients).

    roder acp [--mode ask] [--provider P --model M] [--client-terminal auto|always|never]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_tui.cli import add_runtime_flags

    add_runtime_flags(parser)
    parser.add_argument(
        "--client-terminal", choices=("auto", "always", "never"), default="auto",
        help="run commands in the editor's terminal: auto = when it offers one and Roder's sandbox is off; "
             "always = even if that leaves the sandbox; never = Roder's process broker",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="roder: %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_serve(args))
    except KeyboardInterrupt:
        return 130


async def _serve(args: argparse.Namespace) -> int:
    from roder_core.bootstrap import settings_from_args
    from roder_core.config import ConfigError
    from roder_core.errors import RoderError
    from roder_core.registry import RegistryError
    from roder_core.server.acp.serve import serve_acp
    from roder_core.server.client import LocalAppClient
    from roder_core.server.stdio import reserve_stdout

    protocol_fd = reserve_stdout()
    try:
        app = LocalAppClient.start(settings_from_args(args, interactive=True))
    except (RoderError, RegistryError, ConfigError) as exc:
        sys.stderr.write(f"roder: {exc}\n")
        return 2
    async with app:
        await serve_acp(app, stdin=sys.stdin.buffer, stdout_fd=protocol_fd, client_terminal=args.client_terminal)
    return 0
