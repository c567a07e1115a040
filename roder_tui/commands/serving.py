"""Shared start-up of the long-running server subcommands (``app-server``, ``acp``)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any


def run_server(serve: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Warnings to stderr (stdout carries the protocol), Ctrl-C exits with 130."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="roder: %(levelname)s %(name)s: %(message)s", force=True)
    try:
        return asyncio.run(serve())
    except KeyboardInterrupt:
        return 130


def start_error(exc: Exception) -> int:
    """A runtime that refused to start: one line on stderr, exit code 2 (a configuration error
    rises past it to the CLI's one handler, which says it the same way)."""
    sys.stderr.write(f"roder: {exc}\n")
    return 2


def startup_errors() -> tuple[type[Exception], ...]:
    from roder_core.errors import RoderError

    return (RoderError,)
