"""What ``/tools``, ``/mcp``, ``/skills`` and ``/agents`` list, as the text of their info screen:
asked of the runtime through the client (the app shows it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roder_tui.docs_links import docs_page

if TYPE_CHECKING:
    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_features import CommandInfoModel


async def tools_text(client: AppClient, thread_id: str | None, *, mcp_only: bool) -> str:
    """Each MCP server's state and tool count; with ``mcp_only`` false, every tool as well."""
    from roder_core.server.protocol import TOOLS_LIST, ToolsListParams

    result = await client.call(TOOLS_LIST, ToolsListParams(thread_id=thread_id))
    lines: list[str] = []
    for source in result.sources:
        error = f" ({source.error})" if source.error else ""
        lines.append(f"MCP {source.name}: {source.status}, {source.tool_count} tools{error}")
    if not mcp_only:
        lines += [
            f"{t.name}  [{t.kind}{', read-only' if t.read_only else ''}]  {t.description.splitlines()[0]}" for t in result.tools
        ]
    lines += [f"{source} failed: {error}" for source, error in result.errors.items()]
    return "\n".join(lines) or "none configured"


def skills_text(commands: list[CommandInfoModel]) -> str:
    """The Agent Skills among the slash commands."""
    text = "\n".join(f"/{c.name}  {c.description}" for c in commands if c.kind == "skill")
    return text or f"no Agent Skills found (see Agent Skills in {docs_page('customization.md')})"


async def agents_text(client: AppClient, workspace: str) -> str:
    """The subagents a task can start here."""
    from roder_core.server.protocol_features import AGENTS_LIST, AgentsListParams

    result = await client.call(AGENTS_LIST, AgentsListParams(workspace=workspace))
    return "\n".join(f"{a.name}  ({a.scope})  {a.description}" for a in result.agents) or "no subagents defined"
