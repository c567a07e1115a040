"""App-server ``mcp/list`` and ``mcp/restart`` against the real MCP fixture server process, in
process and over a real stdio pipe; the MCP palette's restart command is one of them."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from roder_ext_mcp import McpPalette

from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RpcError
from tests.builders import until
from tests.ecosystem.test_mcp import STDIO_SERVER, _fixture_children, mcp_runtime, write_config
from tests.server.support import PipePeer

BROKEN_SERVER = '\n[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\n'


async def test_list_and_restart_in_process_after_the_server_is_killed(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER + BROKEN_SERVER)
    runtime, ext = mcp_runtime(workspace, [{"text": "hi"}])
    client = LocalAppClient.for_runtime(runtime)
    try:
        listing = await client.request("mcp/list", {"waitMs": 20_000})
        servers = {s.name: s for s in listing.servers}
        fixture = servers["fixture"]
        assert (fixture.status, fixture.tool_count, fixture.transport) == ("connected", 5, "stdio")
        assert "mcp__fixture__add" in fixture.tools
        assert fixture.descriptions["mcp__fixture__add"] == "Add two integers."
        assert servers["broken"].status == "failed"
        assert "No such file" in (servers["broken"].error or "")

        [first_pid] = _fixture_children()
        os.kill(first_pid, signal.SIGKILL)
        await until(lambda: first_pid not in _fixture_children())

        restarted = (await client.request("mcp/restart", {"server": "fixture"})).server
        assert restarted.status == "connected"
        assert restarted.tool_count == 5
        [second_pid] = _fixture_children()
        assert second_pid != first_pid
        assert ext.manager.connections["fixture"].starts == 2

        still_broken = (await client.request("mcp/restart", {"server": "broken"})).server
        assert still_broken.status == "failed"
        assert still_broken.error
        with pytest.raises(RpcError) as raised:
            await client.request("mcp/restart", {"server": "nowhere"})
        assert raised.value.code == INVALID_PARAMS
        assert "known: fixture, broken" in raised.value.message

        # The palette offers exactly these calls; each one is a method the server implements.
        commands = await McpPalette(ext.manager).commands({})
        assert [(c.method, c.params) for c in commands] == [
            ("mcp/restart", {"server": "fixture"}),
            ("mcp/restart", {"server": "broken"}),
        ]
        result = await client.request(commands[0].method, commands[0].params)
        assert result.server.status == "connected"
        assert ext.manager.connections["fixture"].starts == 3
    finally:
        await runtime.close()


@pytest.mark.e2e
async def test_list_and_restart_over_stdio(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    peer = await PipePeer.start(workspace, {**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        info = await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
        assert {"name": "mcp", "available": True, "methods": ["mcp/list", "mcp/restart"]}.items() <= {
            g["name"]: g for g in info["methodGroups"]
        }["mcp"].items()
        listing = await peer.call("mcp/list", {"waitMs": 20_000})
        [server] = listing["servers"]
        assert (server["name"], server["status"], server["toolCount"]) == ("fixture", "connected", 5)
        restarted = (await peer.call("mcp/restart", {"server": "fixture"}))["server"]
        assert restarted["status"] == "connected"
        assert restarted["toolCount"] == 5
        missing = await peer.request("mcp/restart", {})
        assert missing["error"]["code"] == INVALID_PARAMS
        assert "server" in missing["error"]["message"]
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
