"""``roder-ext-memory``: local memory, seed 003's multi-service example.

One SQLite file (``<data dir>/memory/memory.sqlite``, FTS5 full-text search) with project and
global notes; a factory provides the ``MemoryStore`` service, a context provider recalls the few
notes most relevant to each prompt, and two tools let the agent save and search notes. Everything
stays under Roder's home (``fs.readwrite.roder-home``).
"""

from __future__ import annotations

from pathlib import Path

from roder_core import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
    __version__,
)
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar

from .recall import MemoryContextProvider
from .store import SqliteMemoryStore, project_key
from .tools import MemoryToolContributor

__all__ = ["MemoryExtension", "SqliteMemoryStore", "SqliteMemoryStoreFactory", "create", "project_key"]


class SqliteMemoryStoreFactory:
    """The installed MemoryStore service: ``create()`` returns the one store of this file."""

    def __init__(self, base_path: Path, default_project: Path) -> None:
        self._store = SqliteMemoryStore(base_path / "memory.sqlite", default_project)

    def id(self) -> str:
        return "sqlite-memory"

    def create(self) -> SqliteMemoryStore:
        return self._store


class MemoryExtension(RoderExtension):
    def __init__(self, base_path: Path, default_project: Path) -> None:
        self.base_path = base_path
        self.default_project = default_project

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-memory",
            name="Local Memory",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="SQLite-backed project and global memory store",
            provides=[
                ProvidedService.MemoryStore("sqlite-memory"),
                ProvidedService.ContextProvider("memory-context"),
                ProvidedService.ToolProvider("memory-tools"),
            ],
            required_capabilities=[CapabilityRequest("fs.readwrite.roder-home")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        factory = SqliteMemoryStoreFactory(self.base_path, self.default_project)
        store = factory.create()
        registry.memory_store_factory(factory)
        registry.context_provider(MemoryContextProvider(store))
        registry.tool_contributor(MemoryToolContributor(store))


def create(host: HostContext) -> MemoryExtension:
    return MemoryExtension(host.paths.data_dir / "memory", host.cwd)
