"""A real stdio MCP server whose one tool, ``report``, sends the value of the variable it is
given as a log message (``notifications/message``), as a server logging its configuration does."""

from __future__ import annotations

import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("log-server")


@server.tool(description="Send a log message holding the value of the named variable.")
async def report(variable: str, ctx: Context) -> str:
    await ctx.info(f"configured {variable}={os.environ.get(variable, '')}")
    return "reported"


if __name__ == "__main__":
    server.run("stdio")
