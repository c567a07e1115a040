"""A tool of an MCP server that is not connected (failed to start, disabled, still starting,
restarting) reads to the model, to app-server clients and in ``/mcp`` as that server's tool and
why it is unavailable, never as "unknown tool": real server processes play each state."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import roder_ext_mcp

from roder_core.ir import ToolResultItem
from roder_core.kernel.tool_catalog import source_statuses
from roder_core.server.errors import RpcError
from roder_core.server.protocol import TOOLS_LIST, ToolsListParams
from roder_core.server.protocol_features import MCP_LIST, McpListParams
from roder_core.server.protocol_host import TOOLS_CALL, ToolsCallParams
from tests.builders import until
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with
from tests.ecosystem.test_mcp_edges import configure, raw_server, run_calls, text_result


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


OK = [{"name": "ok", "result": text_result("fine")}]
MUTE_FAILURE = "could not connect: no answer to the handshake (initialize) within 1 s (startup_timeout)"


async def test_a_model_calling_a_tool_of_a_server_that_is_not_connected_reads_which_server_and_why(
    workspace: Path, roder_home: Path
) -> None:
    """Three servers that never connect, and one that does: each call names the server and its
    state; a name no server owns is still "unknown tool"."""
    configure(
        roder_home,
        raw_server("mute", OK, RAW_SILENT_INIT="1").replace("startup_timeout = 30", "startup_timeout = 1"),
        raw_server("off", OK) + "enabled = false\n",
        '\n[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n',
        f'\n[mcp.servers.web]\ntype = "http"\nurl = "http://127.0.0.1:{closed_port()}/mcp"\n',
        raw_server("live", OK),
    )
    turn, results, statuses = await run_calls(
        workspace,
        [
            call("mcp__mute__ok"),
            call("mcp__off__ok"),
            call("mcp__gone__anything"),
            call("mcp__web__search"),
            call("mcp__live__ok"),
            call("mcp__live__okay"),
            call("nope"),
        ],
    )
    assert turn.status == "completed"
    texts = {name: r.text for name, r in results.items()}
    assert texts["mcp__live__ok"] == "fine"
    assert texts["mcp__mute__ok"] == f"tool 'mcp__mute__ok' is unavailable: MCP server 'mute' failed to start: {MUTE_FAILURE}"
    assert texts["mcp__off__ok"] == (
        "tool 'mcp__off__ok' is unavailable: MCP server 'off' is disabled in the configuration (enabled = false)"
    )
    gone = "tool 'mcp__gone__anything' is unavailable: MCP server 'gone' failed to start: "
    assert texts["mcp__gone__anything"].startswith(gone)
    assert "No such file" in texts["mcp__gone__anything"]
    web = "tool 'mcp__web__search' is unavailable: MCP server 'web' failed to start: could not connect: "
    assert texts["mcp__web__search"].startswith(web)
    assert texts["mcp__live__okay"] == (
        "tool 'mcp__live__okay' is unavailable: MCP server 'live' does not list a tool by that name (its tools: mcp__live__ok)"
    )
    assert texts["nope"].startswith("unknown tool 'nope'; available: ")
    assert all(results[name].is_error for name in texts if name != "mcp__live__ok")
    # The listing says the same words the model read.
    by_name = {s.name: s for s in statuses}
    assert (by_name["mute"].status, by_name["mute"].error) == ("failed", f"failed to start: {MUTE_FAILURE}")
    assert (by_name["off"].status, by_name["off"].error) == ("disabled", "is disabled in the configuration (enabled = false)")
    assert texts["mcp__gone__anything"].endswith(by_name["gone"].error or "(none)")


async def test_app_server_calls_and_listings_say_a_server_is_starting_or_restarting(workspace: Path, roder_home: Path) -> None:
    """A server that has not answered ``initialize`` yet: ``tools/call`` refuses with why, and
    ``mcp/list`` and ``tools/list`` (what ``/mcp`` and ``roder mcp list`` show) say the same;
    stopped and started again, it says it is restarting."""
    from roder_core.server.client import LocalAppClient

    configure(roder_home, raw_server("slow", OK, RAW_SILENT_INIT="1").replace("startup_timeout = 30", "startup_timeout = 600"))
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    runtime = runtime_with(host, [extension], [{"text": "hi"}])
    client = LocalAppClient.for_runtime(runtime)
    connection = extension.manager.connections["slow"]
    try:
        await client.call(TOOLS_LIST, ToolsListParams())  # starts the servers
        await until(lambda: connection.pid is not None)
        starting = "MCP server 'slow' is still starting; its tools appear when it has connected"
        with pytest.raises(RpcError) as refused:
            await client.call(TOOLS_CALL, ToolsCallParams(tool_name="mcp__slow__ok", arguments={}))
        assert refused.value.message == f"tool 'mcp__slow__ok' is unavailable: {starting}"
        [server] = (await client.call(MCP_LIST, McpListParams(wait_ms=0))).servers
        assert (server.status, server.error) == ("connecting", starting.removeprefix("MCP server 'slow' "))
        [source] = (await client.call(TOOLS_LIST, ToolsListParams())).sources
        assert source.error == server.error

        await connection.stop()
        connection.start()
        restarting = "is restarting (start 2); its tools return when it has connected"
        [status] = source_statuses(runtime.registry)
        assert (status.status, status.error) == ("connecting", restarting)
        with pytest.raises(RpcError) as again:
            await client.call(TOOLS_CALL, ToolsCallParams(tool_name="mcp__slow__ok", arguments={}))
        assert again.value.message == f"tool 'mcp__slow__ok' is unavailable: MCP server 'slow' {restarting}"
    finally:
        await runtime.close()


async def test_a_thread_restricted_to_some_of_a_servers_tools_is_not_told_the_server_lacks_the_others(
    workspace: Path, roder_home: Path
) -> None:
    """A subagent's or skill's thread offered only ``mcp__live__ok`` calls ``mcp__live__two``,
    which the connected server does list: the call is refused as a tool this thread is not
    offered, never as one the server "does not list" (while naming it among the server's tools)."""
    configure(roder_home, raw_server("live", [*OK, {"name": "two", "result": text_result("two")}]))
    host = host_for(workspace, trusted=False)
    runtime = runtime_with(
        host,
        [roder_ext_mcp.create(host)],
        [{"tool_calls": [call("mcp__live__ok"), call("mcp__live__two"), call("mcp__live__three")]}, {"text": "done"}],
    )
    try:
        thread = await runtime.start_thread()
        runtime.restrict_thread(thread.id, tools=frozenset({"mcp__live__ok"}))
        await runtime.run_turn(thread.id, "go")
        texts = {r.name: r.text for r in items(runtime, thread.id, ToolResultItem)}
    finally:
        await runtime.close()
    assert texts["mcp__live__ok"] == "fine"
    assert texts["mcp__live__two"] == "unknown tool 'mcp__live__two'; available: mcp__live__ok"
    assert texts["mcp__live__three"] == (
        "tool 'mcp__live__three' is unavailable: MCP server 'live' does not list a tool by that name"
        " (its tools: mcp__live__ok, mcp__live__two)"
    )
