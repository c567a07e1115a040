"""Import httpx without its command-line tool.

``import httpx`` runs ``from ._main import main`` for the ``httpx`` console command, which pulls
in ``rich.console``, ``rich.progress``, ``click`` and ``pygments`` whenever they happen to be
installed (Textual installs rich). Roder never uses that command, and on this project's 2-core
machine those imports cost more than the rest of httpx together. Before the first import we
register a small stand-in for ``httpx._main`` whose ``main`` loads the real module on demand,
so the command still works if anything calls it.

httpx builds its connection pool with httpcore, whose first import also imports ``trio`` when
trio is installed (to pick its locks under a trio event loop). Roder runs on asyncio only, and
where trio is installed (Selenium brings it) that import alone cost about 0.12 s of CPU, paid by
every ``roder -p`` at its first model call. ``load_httpx`` therefore imports httpcore with trio
hidden, unless trio is already loaded; httpcore then uses its asyncio (anyio) locks, as it would
anyway under asyncio, and ``import trio`` works normally afterwards.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

CLI_MODULE = "httpx._main"
POOL_MODULE = "httpcore"
TRIO = "trio"


def _cli_main(*args: Any, **kwargs: Any) -> Any:
    """Load httpx's real command-line module in place of the stand-in, then run it."""
    if isinstance(sys.modules.get(CLI_MODULE), _DeferredCli):
        del sys.modules[CLI_MODULE]
    return importlib.import_module(CLI_MODULE).main(*args, **kwargs)


class _DeferredCli(types.ModuleType):
    """Stands in for ``httpx._main`` until its ``main`` is called."""


def load_httpx() -> types.ModuleType:
    """The httpx module, imported without its CLI dependencies on first use."""
    if "httpx" not in sys.modules and CLI_MODULE not in sys.modules:
        stand_in = _DeferredCli(CLI_MODULE, "httpx's command-line tool, loaded when first called")
        stand_in.main = _cli_main  # type: ignore[attr-defined]
        sys.modules[CLI_MODULE] = stand_in
    import httpx

    _load_httpcore_for_asyncio()
    return httpx


def _load_httpcore_for_asyncio() -> None:
    """Import httpcore without making it import trio (see the module docstring)."""
    if POOL_MODULE in sys.modules or TRIO in sys.modules:
        return
    sys.modules[TRIO] = None  # type: ignore[assignment]  # makes ``import trio`` raise ImportError
    try:
        importlib.import_module(POOL_MODULE)
    finally:
        if TRIO in sys.modules and sys.modules[TRIO] is None:
            del sys.modules[TRIO]
