"""What a runtime loads at its first model call and its first command, for processes that serve
many runs and would rather load it ahead: a ``roder serve`` host before it says it is ready, the
batch pool's fork server before it forks its workers.

A one-shot run loads each of these lazily, when it needs it (most runs never use some of them);
a long-lived process pays them once either way, and ahead of time nobody waits for them.
"""

from __future__ import annotations

import contextlib
import importlib

from pydantic import BaseModel

from roder_core.brokers.httpx_loader import load_httpx


def import_model_client() -> None:
    """httpx and the asyncio backend its connection pool starts on at the first model call."""
    load_httpx()
    with contextlib.suppress(ImportError):
        importlib.import_module("anyio._backends._asyncio")


def import_command_parser() -> None:
    """tree-sitter and its bash grammar, which policy loads to read the first command (a third
    of a second of CPU on a busy machine); the parser itself is built per thread at first use."""
    with contextlib.suppress(ImportError):
        importlib.import_module("tree_sitter")
        importlib.import_module("tree_sitter_bash")


def import_command_broker() -> None:
    """The host's brokers (sandbox, process broker, cgroups) that the first command's brokers
    are built from."""
    importlib.import_module("roder_core.brokers.host")


def build_models(*module_names: str) -> None:
    """Build every pydantic model defined in these modules that has not been built yet. Models
    build at first use (``defer_build``) so a one-shot builds only what it touches; a process
    that runs turns for others builds them before the first client waits for them."""
    for name in module_names:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == name:
                value.model_rebuild(raise_errors=False)  # nothing to do for a model already built
