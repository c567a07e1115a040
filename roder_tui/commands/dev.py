"""``roder dev fake-server``: the loopback model server that speaks the three wire dialects.

It ships inside the package (``roder_core.testing.fake_server``), so the documentation's "try a real
engine offline" steps work from a wheel install as well as from a checkout.
"""

from __future__ import annotations

import argparse

from roder_core.testing import fake_server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    tools = parser.add_subparsers(dest="tool", required=True, metavar="TOOL")
    server = tools.add_parser(
        "fake-server",
        help="serve scripted answers on 127.0.0.1 (prints the base URL on stdout's first line)",
        description=(fake_server.__doc__ or "").split("\n")[0],
    )
    fake_server.add_arguments(server)


def run(args: argparse.Namespace) -> int:
    return fake_server.serve(args)
