"""The built-in coding tools: read, write, edit, apply_patch, bash, grep, glob, ls and web_fetch.

Every tool reaches the machine only through the brokers in its ``ToolExecutionContext``
(``tests/tools/test_no_host_access.py`` fails if a module here imports os, subprocess, socket,
shutil or calls ``open``). Two extensions come from this package so a capability profile can
drop web access alone: ``roder-ext-builtin-coding-tools`` (files and shell) and
``roder-ext-web-fetch`` (needs ``network.web``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roder_core import EXTENSION_API_VERSION, CapabilityRequest, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.brokers.command_conditions import CommandConditions
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tools import ToolRegistry

from .bash import BashTool
from .edit import EditTool
from .patch import ApplyPatchTool
from .read import ReadTool
from .search import GlobTool, GrepTool, LsTool
from .web import WebFetchTool
from .write import WriteTool


class _Contributor:
    def __init__(self, ident: str, tools: list[Any]) -> None:
        self._id = ident
        self._tools = tools

    def id(self) -> str:
        return self._id

    def contribute(self, registry: ToolRegistry) -> None:
        for tool in self._tools:
            registry.register(tool)


class BuiltinCodingToolsExtension(RoderExtension):
    def __init__(self, conditions: Callable[[], CommandConditions] | None = None) -> None:
        self._conditions = conditions

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-builtin-coding-tools",
            name="Built-in coding tools",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Workspace file, search, patch, edit, and shell tools",
            provides=[ProvidedService.ToolProvider("builtin-coding-tools")],
            required_capabilities=[
                CapabilityRequest("fs.read.workspace"),
                CapabilityRequest("fs.write.workspace"),
                CapabilityRequest("process.spawn.shell"),
            ],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        tools = [
            ReadTool(),
            WriteTool(),
            EditTool(),
            ApplyPatchTool(),
            BashTool(self._conditions),
            GrepTool(),
            GlobTool(),
            LsTool(),
        ]
        registry.tool_contributor(_Contributor("builtin-coding-tools", tools))


class WebFetchExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-web-fetch",
            name="Web fetch",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="web_fetch: pages from allowlisted hosts as text",
            provides=[ProvidedService.ToolProvider("web-fetch")],
            required_capabilities=[CapabilityRequest("network.web")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(_Contributor("web-fetch", [WebFetchTool()]))


def create(host: HostContext) -> list[RoderExtension]:
    return [BuiltinCodingToolsExtension(lambda: host_conditions(host)), WebFetchExtension()]


def host_conditions(host: HostContext) -> CommandConditions:
    """What commands may do under the host's config (the bubblewrap probe is cached on disk)."""
    from roder_core.brokers.sandbox import sandbox_status

    status = sandbox_status(host.config.sandbox, cache_file=host.paths.cache_dir / "sandbox-probe.json")
    return CommandConditions.of("blocked" if status.blocked else status.effective, host.config.network.commands)
