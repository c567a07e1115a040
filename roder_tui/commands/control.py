"""How the subcommands reach the control plane: an in-process client over a headless runtime.

``roder sessions``, ``roder replay``, ``roder extensions`` and the other subcommands call the same
methods a remote client calls (``client.call(SPEC, params)``), exactly as the app does, so the
command line can do nothing a client cannot. A failed call prints ``roder: <message>``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient


@contextlib.asynccontextmanager
async def local_client(settings: StartSettings | None = None, *, persist_config: bool = False) -> AsyncIterator[LocalAppClient]:
    """A client owning a runtime built like a headless run's (never auto-trusting the folder;
    writing config.toml and stored keys only with ``persist_config``, for the commands whose
    job that is); closed, with the runtime, on leaving."""
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient

    client = LocalAppClient.start(settings or StartSettings(interactive=False), persist_config=persist_config)
    try:
        yield client
    finally:
        await client.close()


def fail(message: str) -> int:
    print(f"roder: {message}", file=sys.stderr)
    return 1
