"""A real MCP server (stdio) with one tool that returns a screenshot, as a browser MCP server does.
With the argument ``bad-crc`` the PNG carries a text chunk whose CRC is wrong (browsers show it)."""

from __future__ import annotations

import io
import struct
import sys

from mcp.server.mcpserver import Image, MCPServer
from PIL import Image as PILImage

server = MCPServer("browser")


@server.tool(description="Take a screenshot of the page.")
def screenshot() -> Image:
    out = io.BytesIO()
    PILImage.new("RGB", (32, 24), (200, 100, 0)).save(out, format="PNG")
    data = out.getvalue()
    if "bad-crc" in sys.argv[1:]:
        text = b"Comment\x00made by a sloppy encoder"
        chunk = struct.pack(">I", len(text)) + b"tEXt" + text + b"\xde\xad\xbe\xef"
        after_header = 8 + 25  # the signature and the IHDR chunk
        data = data[:after_header] + chunk + data[after_header:]
    return Image(data=data, format="png")


if __name__ == "__main__":
    server.run("stdio")
