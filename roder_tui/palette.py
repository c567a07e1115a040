"""The command palette's rows: every installed ``PaletteSource``'s commands for the app's state.

``palette/commands`` runs the sources where the runtime is (in process or on the host: some read
its state, like MCP servers); the palette panel (``widgets/command_palette.py``) lists the rows
and hands the chosen one back to the app. A failing source is skipped with a log line, never
breaking the palette.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand
    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_features import CommandInfoModel

log = logging.getLogger(__name__)


async def palette_rows(client: AppClient, state: dict[str, Any]) -> list[PaletteCommand]:
    """Every source's rows for ``state`` (the app's threads, models, mode, themes, commands)."""
    from roder_core.kernel.services import PaletteCommand
    from roder_core.server.protocol_attach import PALETTE_COMMANDS, PaletteCommandsParams

    result = await client.call(PALETTE_COMMANDS, PaletteCommandsParams(state=state))
    for source, error in result.errors.items():
        log.warning("palette source %s failed: %s", source, error)
    return [PaletteCommand(c.title, c.help, c.method, dict(c.params)) for c in result.commands]


async def palette_state(
    client: AppClient,
    *,
    cwd: str,
    thread_id: str | None,
    mode: Any,
    themes: list[str],
    theme: str,
    commands: list[CommandInfoModel],
) -> dict[str, Any]:
    """What the sources build their rows from: this folder's threads, the providers and the models
    of each signed-in one, the open thread, mode and theme, and the slash commands."""
    from roder_core.server.protocol import MODEL_LIST, PROVIDERS_LIST, THREAD_LIST, ModelListParams, ThreadListParams

    threads = (await client.call(THREAD_LIST, ThreadListParams(cwd=cwd, limit=100))).threads
    providers = await client.call(PROVIDERS_LIST)
    models: list[dict[str, str]] = []
    for provider in providers.providers:
        if provider.auth_configured is False:
            continue
        with contextlib.suppress(Exception):
            listed = await client.call(MODEL_LIST, ModelListParams(provider=provider.id))
            models.extend({"provider": provider.id, "id": m.id} for m in listed.models)
    return {
        "threads": [
            {"id": t.id, "title": t.title, "updated_at": t.updated_at, "parent_id": t.parent.thread_id if t.parent else None}
            for t in threads
        ],
        "thread_id": thread_id,
        "providers": [
            {"id": p.id, "name": p.name, "default_model": p.default_model, "auth_configured": p.auth_configured}
            for p in providers.providers
        ],
        "models": models,
        "provider": providers.provider,
        "model": providers.model,
        "mode": mode,
        "themes": themes,
        "theme": theme,
        "commands": [{"name": c.name, "description": c.description, "argument_hint": c.argument_hint} for c in commands],
    }
