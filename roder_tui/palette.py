"""The command palette's rows: every installed ``PaletteSource``'s commands for the app's state.

``palette/commands`` runs the sources where the runtime is (in process or on the host: some read
its state, like MCP servers); the palette screen (``screens/command_palette.py``) lists the rows
and hands the chosen one back to the app. A failing source is skipped with a log line, never
breaking the palette.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand
    from roder_core.server.app_client import AppClient

log = logging.getLogger(__name__)


async def palette_rows(client: AppClient, state: dict[str, Any]) -> list[PaletteCommand]:
    """Every source's rows for ``state`` (the app's threads, models, mode, themes, commands)."""
    from roder_core.kernel.services import PaletteCommand
    from roder_core.server.protocol_attach import PALETTE_COMMANDS, PaletteCommandsParams

    result = await client.call(PALETTE_COMMANDS, PaletteCommandsParams(state=state))
    for source, error in result.errors.items():
        log.warning("palette source %s failed: %s", source, error)
    return [PaletteCommand(c.title, c.help, c.method, dict(c.params)) for c in result.commands]
