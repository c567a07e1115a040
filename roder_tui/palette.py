"""The command palette (ctrl+p): Textual's palette fed by every installed ``PaletteSource``.

Each source turns the app's state into ``PaletteCommand`` rows; choosing one runs its method
through the app (control-plane methods go to the client unchanged, ``tui/...`` ones are app
actions). A failing source is skipped with a log line, never breaking the palette.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand
    from roder_tui.app import RoderApp

log = logging.getLogger(__name__)


class PaletteSourcesProvider(Provider):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rows: list[PaletteCommand] = []

    @property
    def roder(self) -> RoderApp:
        return self.app  # type: ignore[return-value]

    async def startup(self) -> None:
        app = self.roder
        state = await app.palette_state()
        rows: list[PaletteCommand] = []
        for source in app.palette_sources:
            try:
                rows.extend(await source.commands(state))
            except Exception as exc:
                log.warning("palette source %s failed: %s", source.id(), exc)
        self.rows = rows

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
