"""Every tool the model can be offered, with where it comes from, and the state of dynamic sources.

``roder tools list``, ``roder mcp list``, the app server's ``tools/list`` and the TUI palette all
read this one catalog. Built-in and extension tools are known at once; dynamic sources (MCP
servers) connect in the background, so a caller may wait for them first. A tool contributor is a
dynamic source when it implements ``DynamicToolSource`` (structurally: no inheritance needed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from roder_core.kernel.registry import TOOL_PROVIDER, ExtensionRegistry
from roder_core.kernel.tools import is_read_only, tool_kind


@dataclass
class SourceStatus:
    """One dynamic tool source (an MCP server): state, error and tools."""

    name: str
    kind: str
    status: str  # pending | connecting | connected | needs-login | failed | exited | disabled
    error: str | None = None
    tools: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "error": self.error,
            "toolCount": len(self.tools),
            "tools": list(self.tools),
            **self.detail,
        }


@runtime_checkable
class ServerHost(Protocol):
    """A tool source that can take more servers while it runs: the MCP servers an editor passes
    in ACP's ``session/new``. Definitions use the ``.mcp.json`` shape (``command``/``args``/``env``,
    or ``type`` http/sse with ``url``/``headers``); returns one problem line per refused entry."""

    def add_servers(self, servers: Mapping[str, Mapping[str, Any]], origin: str) -> list[str]: ...


@runtime_checkable
class DynamicToolSource(Protocol):
    """A ToolContributor whose tools appear later (servers connecting in the background)."""

    async def wait_ready(self, timeout: float) -> None: ...

    def source_statuses(self) -> list[SourceStatus]: ...

    async def restart_source(self, name: str) -> SourceStatus: ...


@dataclass
class ToolInfo:
    name: str
    description: str
    source: str
    extension: str
    kind: str
    read_only: bool
    parameters: dict[str, Any]


@dataclass
class ToolCatalog:
    tools: list[ToolInfo]
    sources: list[SourceStatus]
    #: Contributors that failed to list their tools: source -> error.
    errors: dict[str, str]


def dynamic_sources(registry: ExtensionRegistry) -> list[DynamicToolSource]:
    return [c for c in registry.tools if isinstance(c, DynamicToolSource)]


async def wait_for_sources(registry: ExtensionRegistry, timeout: float) -> None:
    """Wait (at most ``timeout`` seconds overall) until every dynamic source settled."""
    sources = dynamic_sources(registry)
    if sources:
        await asyncio.gather(*(s.wait_ready(timeout) for s in sources))


def source_statuses(registry: ExtensionRegistry) -> list[SourceStatus]:
    return [status for source in dynamic_sources(registry) for status in source.source_statuses()]


async def restart_source(registry: ExtensionRegistry, name: str) -> SourceStatus:
    """Restart one dynamic source (an MCP server) by name."""
    for source in dynamic_sources(registry):
        if any(s.name == name for s in source.source_statuses()):
            return await source.restart_source(name)
    known = ", ".join(s.name for s in source_statuses(registry)) or "none configured"
    raise KeyError(f"no tool source named {name!r} (known: {known})")


async def build_catalog(registry: ExtensionRegistry, wait: float = 0.0) -> ToolCatalog:
    """The current tool list; with ``wait`` > 0, first give dynamic sources time to connect."""
    if wait > 0:
        await wait_for_sources(registry, wait)
    errors: dict[str, str] = {}
    tools = registry.tool_registry(on_error=lambda source, exc: errors.__setitem__(source, str(exc)))
    rows = []
    for name in tools.names():
        tool = tools.get(name)
        assert tool is not None
        spec = tool.spec()
        source = tools.source_of(name)
        contributor = registry.service(TOOL_PROVIDER, source)
        rows.append(
            ToolInfo(
                name=name,
                description=spec.description,
                source=source,
                extension=registry.extension_of(contributor) or "",
                kind=tool_kind(tool),
                read_only=is_read_only(tool),
                parameters=spec.parameters,
            )
        )
    return ToolCatalog(rows, source_statuses(registry), errors)
