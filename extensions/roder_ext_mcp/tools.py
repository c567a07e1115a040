"""MCP tools in Roder's registry: ``mcp__<server>__<tool>``, policy-checked like any tool.

Before the first call to a server the user has not reviewed yet, the user sees the server's
tools and their descriptions and approves or refuses it (tool descriptions are instructions the
model will follow, so they are shown before they are used). The review is remembered per server
identity (name + command or URL) and per fingerprint of the descriptions: if a server changes its
tools' descriptions later, it is reviewed again. Headless runs cannot ask; they rely on the user
having configured the server (project servers additionally need ``--trust``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roder_core.customization.slash_commands import CommandInfo
from roder_core.ir import ApprovalOption, ApprovalRequest, Attachment
from roder_core.kernel.tool_catalog import SourceStatus
from roder_core.kernel.tools import (
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    ToolSpecError,
    bounded_result_text,
)
from roder_core.plugins.components import PLUGIN_SERVER_PREFIX
from roder_core.plugins.enabled import ActivePlugins
from roder_ext_mcp import prompts
from roder_ext_mcp.config import McpSettings, parse_server, tool_names
from roder_ext_mcp.manager import McpManager, ServerConnection, ServerUnavailable, describe_error


def tool_name(connection: ServerConnection, mcp_name: str) -> str:
    """``mcp__<server>__<tool>``, unique within the server (``config.tool_names``)."""
    return connection.tool_names.get(mcp_name) or tool_names(connection.config.tool_prefix, [mcp_name])[mcp_name]


def fingerprint(connection: ServerConnection) -> str:
    listing = sorted((t.name, t.description or "", json.dumps(t.input_schema, sort_keys=True)) for t in connection.tools)
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:32]


def describe_tools(connection: ServerConnection) -> str:
    lines = [f"MCP server {connection.name!r}: {connection.config.describe()} ({connection.config.origin})"]
    for tool in connection.tools:
        description = " ".join((tool.description or "(no description)").split())
        lines.append(f"- {tool_name(connection, tool.name)}: {description}")
    return "\n".join(lines)


class ReviewStore:
    """Which server identities (and description fingerprints) the user approved."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def approved(self, connection: ServerConnection) -> bool:
        return self._load().get(connection.config.identity()) == fingerprint(connection)

    def changed(self, connection: ServerConnection) -> bool:
        return connection.config.identity() in self._load() and not self.approved(connection)

    def approve(self, connection: ServerConnection) -> None:
        data = self._load()
        data[connection.config.identity()] = fingerprint(connection)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)


def convert_result(call: ToolCall, result: Any) -> ToolResult:
    """MCP content blocks -> text for the model, images as attachments, structured data kept."""
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            attachments.append(Attachment(name=f"{call.name}-{kind}", mime_type=block.mime_type, data_base64=block.data))
            texts.append(f"[{kind} {block.mime_type} attached]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            texts.append(text if text is not None else f"[binary resource {resource.uri}]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.uri}{' ' + block.name if getattr(block, 'name', '') else ''}]")
    text = "\n".join(texts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return ToolResult(
        id=call.id,
        name=call.name,
        text=bounded_result_text(text) or "(no output)",
        data=result.structured_content,
        is_error=bool(result.is_error),
        attachments=attachments,
    )


class McpTool(Tool):
    kind = "other"

    def __init__(self, connection: ServerConnection, mcp_tool: Any, reviews: ReviewStore) -> None:
        self.connection = connection
        self.mcp_name = mcp_tool.name
        self.name = tool_name(connection, mcp_tool.name)
        self.description = (mcp_tool.description or f"{mcp_tool.name} (MCP server {connection.name})").strip()
        schema = dict(mcp_tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters = schema
        # The server's readOnlyHint, or the user's read_only_tools list (for servers that give no hint).
        hint = getattr(getattr(mcp_tool, "annotations", None), "read_only_hint", None)
        self.read_only = hint is True or mcp_tool.name in connection.config.read_only_tools
        self._reviews = reviews

    async def preview(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        return {"command": f"{self.connection.name}.{self.mcp_name} {json.dumps(call.arguments, ensure_ascii=False)}"}

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        refused = await self._review(ctx, call)
        if refused is not None:
            return refused
        try:
            result = await self.connection.call_tool(self.mcp_name, call.arguments, ctx)
        except ServerUnavailable as exc:
            return ToolResult.error(call, str(exc))
        except TimeoutError:
            return ToolResult.error(call, f"{self.name} timed out after {self.connection.config.tool_timeout:g}s")
        except Exception as exc:
            return ToolResult.error(call, f"MCP server {self.connection.name!r} refused the call: {describe_error(exc)}")
        return convert_result(call, result)

    async def _review(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult | None:
        """First use of a server (or changed descriptions): show its tools, ask the user."""
        host = ctx.host
        if host is None or not host.interactive:
            return None
        try:
            await self.connection.ensure_connected()
        except ServerUnavailable as exc:
            return ToolResult.error(call, str(exc))
        if self._reviews.approved(self.connection):
            return None
        changed = self._reviews.changed(self.connection)
        headline = (
            f"MCP server {self.connection.name!r} changed its tools since you approved it; review them again."
            if changed
            else f"First use of MCP server {self.connection.name!r}: review the tools it gives the model."
        )
        request = ApprovalRequest(
            thread_id=ctx.thread_id,
            turn_id=ctx.turn_id,
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            reason=f"{headline}\n\n{describe_tools(self.connection)}",
            command=f"{self.connection.name}.{self.mcp_name}",
            options=[
                ApprovalOption(id="allow_once", label=f"Use server {self.connection.name}"),
                ApprovalOption(id="deny", label="Refuse this server for now"),
            ],
        )
        decision = await host.request_approval(request)
        if not decision.allowed:
            return ToolResult(
                id=call.id,
                name=call.name,
                is_error=True,
                data={"policy_denied": True},
                text=f"the user refused MCP server {self.connection.name!r}",
            )
        self._reviews.approve(self.connection)
        return None


class McpToolContributor:
    """The ``mcp`` tool provider: a DynamicToolSource whose tools appear as servers connect. It
    is also a CommandSource (prompts as ``/mcp__server__prompt``) and a MentionSource
    (resources as ``@server:uri``)."""

    def __init__(
        self, manager: McpManager, reviews: ReviewStore, plugin_servers: Callable[[ActivePlugins], McpSettings] | None = None
    ) -> None:
        self.manager = manager
        self.reviews = reviews
        self._plugin_servers = plugin_servers

    #: PluginAware: what of a plugin it takes.
    plugin_parts = frozenset({"mcp_servers"})

    def id(self) -> str:
        return "mcp"

    def contribute(self, registry: ToolRegistry) -> None:
        self.manager.start()
        for connection in self.manager.connections.values():
            # An exited server keeps offering its last known tools: calling one restarts it (one
            # whose sign-in lapsed keeps them too: calling one says which command signs in).
            # One with no tools known (signed out since start-up: it never listed them) says why
            # it cannot be used, not that it lists nothing.
            if connection.status not in ("connected", "exited", "needs-login") or (
                connection.status != "connected" and not connection.tools
            ):
                registry.withhold(connection.config.tool_prefix, connection.unavailable_reason(), prefix=True)
                continue
            # A name under its prefix it does not list (a tool it dropped on list_changed, a typo).
            offered = ", ".join(tool_name(connection, t.name) for t in connection.tools) or "none"
            registry.withhold(
                connection.config.tool_prefix,
                f"MCP server {connection.name!r} does not list a tool by that name (its tools: {offered})",
                prefix=True,
            )
            for mcp_tool in connection.tools:
                try:
                    registry.register(McpTool(connection, mcp_tool, self.reviews))
                except ToolSpecError as exc:  # one unusable tool never takes the others down
                    connection.leave_out(mcp_tool.name, str(exc))
                    registry.withhold(
                        tool_name(connection, mcp_tool.name),
                        f"MCP server {connection.name!r} lists it, but it cannot be offered to the model: {exc}",
                    )

    async def wait_ready(self, timeout: float) -> None:
        await self.manager.wait_ready(timeout)

    def source_statuses(self) -> list[SourceStatus]:
        return [status_of(c) for c in self.manager.connections.values()]

    async def restart_source(self, name: str) -> SourceStatus:
        return status_of(await self.manager.restart(name))

    async def aclose(self) -> None:
        await self.manager.aclose()

    def add_servers(self, servers: Mapping[str, Mapping[str, Any]], origin: str) -> list[str]:
        """ServerHost: start servers given while running (an editor's, over ACP), checked like
        configured ones; their tools go through the same policy and first-use review."""
        problems: list[str] = []
        for name, raw in servers.items():
            config = parse_server(name, dict(raw), origin, os.environ)
            if config.error:
                problems.append(config.error)
                continue
            self.manager.add(config)
        return problems

    async def reload_plugins(self, active: ActivePlugins) -> list[str]:
        """PluginAware: start the servers of plugins enabled while running and stop those of
        plugins disabled or removed (``plugin:<p>:<s>``; an unchanged definition keeps running)."""
        if self._plugin_servers is None:
            return []
        settings = self._plugin_servers(active)
        for name in [n for n in self.manager.connections if n.startswith(PLUGIN_SERVER_PREFIX) and n not in settings.servers]:
            self.manager.remove(name)
        for config in settings.servers.values():
            self.manager.add(config)
        return list(settings.problems)

    # CommandSource and MentionSource (roder_ext_mcp.prompts)
    def source_commands(self) -> list[CommandInfo]:
        return prompts.prompt_commands(self.manager)

    async def expand_command(self, name: str, arguments: str) -> str:
        return await prompts.expand_prompt(self.manager, name, arguments)

    def mention_servers(self) -> set[str]:
        return prompts.mention_servers(self.manager)

    def mentions(self) -> list[str]:
        return prompts.mentions(self.manager)

    async def read_mention(self, server: str, uri: str) -> Attachment:
        return await prompts.read_mention(self.manager, server, uri)


def status_of(connection: ServerConnection) -> SourceStatus:
    return SourceStatus(
        name=connection.name,
        kind="mcp",
        status=connection.status,
        error=connection.availability() or connection.listing_reason(),
        tools=[tool_name(connection, t.name) for t in connection.tools if t.name not in connection.left_out]
        if connection.status == "connected"
        else [],
        detail={
            "transport": connection.config.transport,
            "target": connection.config.describe(),
            "origin": connection.config.origin,
            "server": connection.server_version,
            "descriptions": {tool_name(connection, t.name): t.description or "" for t in connection.tools},
            "prompts": [f"/{prompts.command_name(connection, p.name)}" for p in connection.prompts],
            "resources": [f"@{connection.name}:{r.uri}" for r in connection.resources],
            "resourceTemplates": [f"@{connection.name}:{t.uri_template}" for t in connection.resource_templates],
            "sampling": connection.config.sampling,
        },
    )
