"""``roder-ext-jsonl-store``: threads as append-only JSON Lines files under the data directory.

Provides the ThreadStore and CheckpointStore (fork) services with one object, so a fork sees
exactly what the store wrote. Files live in ``RoderPaths.threads_dir`` (``$RODER_HOME/data/threads``
when RODER_HOME is set).

The names below load on first use (PEP 562): ``roder sessions list`` reads the thread index
(``roder_ext_jsonl_store.index``) without importing the store, the kernel or pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .extension import JsonlThreadStoreExtension, create
    from .store import JsonlThreadStore, ThreadInUseError

__all__ = ["JsonlThreadStore", "JsonlThreadStoreExtension", "ThreadInUseError", "create"]

_EXPORTS = {
    "JsonlThreadStore": ".store",
    "ThreadInUseError": ".store",
    "JsonlThreadStoreExtension": ".extension",
    "create": ".extension",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
