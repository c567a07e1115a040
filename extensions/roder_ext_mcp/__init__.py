"""MCP client extension: tools of configured MCP servers, connected in the background.

Servers come from ``[mcp.servers.NAME]`` in config.toml, for a trusted folder from its
``.mcp.json`` (see ``roder_ext_mcp.config``), and from enabled plugins
(``plugin:<p>:<s>``). Installs the ``mcp`` tool provider (a dynamic tool
source), a hook that starts connecting when a session starts and lets the first turn wait a few
seconds for servers still connecting, and a palette source that lists servers with a restart
command.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from roder_core import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ExtensionManifest,
    HookOutcome,
    HookPoint,
    PaletteCommand,
    ProvidedService,
    RoderExtension,
    __version__,
)
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.plugins.components import plugin_servers
from roder_core.plugins.enabled import ActivePlugins, active_plugins
from roder_core.settings.credentials import CredentialStore
from roder_ext_mcp.client_features import RootSet
from roder_ext_mcp.config import McpSettings, add_plugin_server, load_settings
from roder_ext_mcp.manager import McpManager
from roder_ext_mcp.tools import McpToolContributor, ReviewStore

__all__ = ["McpExtension", "create"]


class McpStartupHook:
    """Starts connections with the session; the first turn waits briefly for late servers."""

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager

    def id(self) -> str:
        return "mcp-startup"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.SESSION_START, HookPoint.BEFORE_TURN})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        self.manager.start()
        if point is HookPoint.BEFORE_TURN and self.manager.connecting():
            try:
                await self.manager.wait_ready(self.manager.startup_wait)
            except Exception:  # waiting is a courtesy; a turn never fails because of it
                pass
        return None


class McpPalette:
    def __init__(self, manager: McpManager) -> None:
        self.manager = manager

    def id(self) -> str:
        return "mcp-servers"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        rows = []
        for connection in self.manager.connections.values():
            count = len(connection.tools) if connection.status == "connected" else 0
            rows.append(
                PaletteCommand(
                    title=f"MCP: restart {connection.name} ({connection.status}, {count} tools)",
                    help=connection.error or connection.config.describe(),
                    method="mcp/restart",
                    params={"server": connection.name},
                )
            )
        return rows


class McpExtension(RoderExtension):
    def __init__(
        self,
        settings: McpSettings,
        manager: McpManager,
        reviews: ReviewStore,
        plugin_servers: Callable[[ActivePlugins], McpSettings] | None = None,
    ) -> None:
        self.settings = settings
        self.manager = manager
        self.contributor = McpToolContributor(manager, reviews, plugin_servers)

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-mcp",
            name="MCP client",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Tools from MCP servers (stdio and streamable HTTP) as mcp__<server>__<tool>",
            provides=[
                ProvidedService.ToolProvider("mcp"),
                ProvidedService.Hook("mcp-startup"),
                ProvidedService.PaletteSource("mcp-servers"),
            ],
            required_capabilities=[CapabilityRequest("process.spawn.mcp"), CapabilityRequest("network.mcp")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(self.contributor)
        registry.hook(McpStartupHook(self.manager))
        registry.palette_source(McpPalette(self.manager))


def host_settings(host: HostContext) -> McpSettings:
    """Every server the host would run: config.toml, a trusted folder's ``.mcp.json``, plugins."""
    settings = load_settings(host.config.model_extra, host.cwd, host.trusted, host.env)
    active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    add_plugin_servers(settings, host, active)
    return settings


def add_plugin_servers(settings: McpSettings, host: HostContext, active: ActivePlugins) -> McpSettings:
    """The enabled plugins' servers added to ``settings``: at start, and again (into empty
    settings) when plugins change while running."""
    for server in plugin_servers(active, host.cwd):
        add_plugin_server(settings, server.id, server.spec.raw, f"plugin {server.plugin}", host.env, server.env)
    return settings


def create(host: HostContext) -> McpExtension:
    settings = host_settings(host)
    for problem in settings.problems:
        logging.getLogger(__name__).warning("%s", problem)
    roots = RootSet((host.cwd, *settings.roots))
    store = CredentialStore.for_env(host.env)
    manager = McpManager(settings.servers, host.paths.cache_dir / "mcp-logs", settings.startup_wait, roots, store, host.secrets)
    reviews = ReviewStore(host.paths.data_dir / "mcp-reviewed.json")
    return McpExtension(settings, manager, reviews, lambda active: add_plugin_servers(McpSettings(), host, active))
