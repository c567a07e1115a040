"""The extension object: installs one JsonlThreadStore as both ThreadStore and CheckpointStore."""

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

from .store import JsonlThreadStore


class JsonlThreadStoreExtension(RoderExtension):
    def __init__(self, thread_dir: Path, *, scratch: bool = False) -> None:
        """``scratch``: the data folder is thrown away after the run (no index, no fsync)."""
        self.store = JsonlThreadStore(thread_dir, indexed=not scratch, durable=not scratch)

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-jsonl-store",
            name="JSONL thread store",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Crash-safe append-only JSONL threads with resume, fork and a rebuildable index",
            provides=[ProvidedService.ThreadStore("jsonl"), ProvidedService.CheckpointStore("jsonl")],
            required_capabilities=[CapabilityRequest("fs.readwrite.roder-home")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.thread_store(self.store)
        registry.checkpoint_store(self.store)


def create(host: HostContext) -> JsonlThreadStoreExtension:
    return JsonlThreadStoreExtension(host.paths.threads_dir, scratch=host.scratch_data)
