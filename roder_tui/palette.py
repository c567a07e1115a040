"""The command palette (ctrl+p): Textual's palette fed by every installed ``PaletteSource``.

Each source turns the app's state into ``PaletteCommand`` rows (``palette/commands`` runs them
where the runtime is, in process or on the host); choosing one runs its method
through the app (control-plane methods go to the client unchanged, ``tui/...`` ones are app
actions). A failing source is skipped with a log line, never breaking the palette.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.style import Style

    from roder_core.kernel.services import PaletteCommand
    from roder_tui.app import RoderApp

log = logging.getLogger(__name__)


class PaletteSourcesProvider(Provider):
    def __init__(self, screen: Screen[Any], match_style: Style | None = None) -> None:
        super().__init__(screen, match_style)
        self.rows: list[PaletteCommand] = []

    @property
    def roder(self) -> RoderApp:
        from roder_tui.app import RoderApp  # loaded already: the app opened this palette

        app = self.app
        if not isinstance(app, RoderApp):
            raise TypeError(f"the palette's sources serve RoderApp, not {type(app).__name__}")
        return app

    async def startup(self) -> None:
        """The rows of every source the host has installed, for this app's state (the sources
        run where the runtime is: some read its state, like MCP servers)."""
        from roder_core.kernel.services import PaletteCommand
        from roder_core.server.protocol_attach import PALETTE_COMMANDS, PaletteCommandsParams

        app = self.roder
        result = await app._client().call(PALETTE_COMMANDS, PaletteCommandsParams(state=await app.palette_state()))
        for source, error in result.errors.items():
            log.warning("palette source %s failed: %s", source, error)
        self.rows = [PaletteCommand(c.title, c.help, c.method, dict(c.params)) for c in result.commands]

    def _run(self, command: PaletteCommand) -> None:
        self.roder.run_palette_command(command)

    async def discover(self) -> Hits:
        for command in self.rows:
            yield DiscoveryHit(command.title, partial(self._run, command), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self.rows:
            score = matcher.match(f"{command.title} {command.help}")
            title_score = matcher.match(command.title)
            if score > 0 or title_score > 0:
                yield Hit(
                    max(score, title_score * 1.1),
                    matcher.highlight(command.title),
                    partial(self._run, command),
                    help=command.help,
                )
