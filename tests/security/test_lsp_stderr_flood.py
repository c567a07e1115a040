"""A language server's stderr is read to its end whatever it writes: a line longer than the
reader's buffer (200 KB) followed by a flood used to end the reading task, leaving the server
blocked on a full pipe and ``initialize`` unanswered. What is kept is bounded (the last lines,
each cut to 300 characters)."""

from __future__ import annotations

import sys
from pathlib import Path

from roder_ext_lsp.client import LspClient

SERVER = Path(__file__).with_name("lsp_stderr_flood_server.py")


async def test_a_server_flooding_stderr_with_a_huge_line_still_starts(tmp_path: Path) -> None:
    client = LspClient("flood", {".txt": "plaintext"})
    try:
        await client.start([sys.executable, str(SERVER)], {"PATH": "/usr/bin:/bin"}, tmp_path, None, 60)
        assert client.alive
    finally:
        await client.stop()
    kept = list(client._stderr)
    assert kept and all(len(line) <= 300 for line in kept)
