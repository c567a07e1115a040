"""A real MCP server (stdio) with one tool that returns a screenshot, as a browser MCP server does."""

from __future__ import annotations

import io

from mcp.server.mcpserver import Image, MCPServer
from PIL import Image as PILImage

server = MCPServer("browser")


@server.tool(description="Take a screenshot of the page.")
def screenshot() -> Image:
    out = io.BytesIO()
    PILImage.new("RGB", (32, 24), (200, 100, 0)).save(out, format="PNG")
    return Image(data=out.getvalue(), format="png")


if __name__ == "__main__":
    server.run("stdio")
