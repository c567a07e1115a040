"""Roder's built-in TUI surfaces: the status-bar segments and command-palette sources.

They are ordinary extensions (``StatusSegment`` and ``PaletteSource`` services), so a third-party
extension adds a segment or a palette source the same way and the app shows it with no change.
Nothing here imports Textual: segments turn a plain state dict into text, and palette sources
turn it into commands naming a control-plane method (``session/set_mode``, ``providers/select``,
``thread/fork``...) or an app action under ``tui/`` (switch thread, theme, export).
"""

from __future__ import annotations

from roder_core import EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_ext_tui.palette import PALETTE_SOURCES
from roder_ext_tui.segments import STATUS_SEGMENTS


class DefaultTuiExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-tui",
            name="Default TUI surfaces",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Status-bar segments and command-palette sources of the Roder app",
            provides=[
                *(ProvidedService.StatusSegment(s.id()) for s in STATUS_SEGMENTS),
                *(ProvidedService.PaletteSource(p.id()) for p in PALETTE_SOURCES),
            ],
            required_capabilities=[],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        for segment in STATUS_SEGMENTS:
            registry.status_segment(segment)
        for source in PALETTE_SOURCES:
            registry.palette_source(source)


def create(host: HostContext) -> DefaultTuiExtension:
    return DefaultTuiExtension()
