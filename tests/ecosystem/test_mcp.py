"""The MCP client against a real MCP server process (tests/ecosystem/mcp_fixture_server.py),
over stdio and over streamable HTTP on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import roder_ext_mcp
from roder_ext_mcp.config import McpConfigError, expand_vars, load_settings

from roder_core.ir import ApprovalDecision, ToolResultItem
from roder_core.kernel.tool_catalog import build_catalog, restart_source, source_statuses
from roder_core.server.protocol import TOOLS_LIST, ToolsListParams
from roder_core.threads.events import ApprovalRequested
from tests.builders import until
from tests.core.harness import call
from tests.ecosystem.harness import FIXTURE_SERVER, host_for, items, runtime_with, start_http_fixture

# The first turn waits for servers still connecting; the fixture is a Python process whose start
# can take longer than the default 5 s on a loaded machine.
STDIO_SERVER = f"""
[mcp]
startup_wait = 25

[mcp.servers.fixture]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FIXTURE_SERVER))}, "stdio"]
env = {{ FIXTURE_GREETING = "${{GREETING:-howdy}}" }}
"""


def write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text, encoding="utf-8")


def mcp_runtime(workspace: Path, script: list, *, env: dict | None = None, trusted: bool = False, **kw):
    host = host_for(workspace, trusted=trusted, env=env)
    extension = roder_ext_mcp.create(host)
    return runtime_with(host, [extension], script, **kw), extension


# --------------------------------------------------------------------------- configuration


def test_variable_expansion() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert expand_vars("x${A}y", env, "w") == "x1y"
    assert expand_vars("${B:-dflt}", env, "w") == "dflt"
    assert expand_vars("${EMPTY:-dflt}", env, "w") == "dflt"
    assert expand_vars("${A:-dflt}", env, "w") == "1"
    with pytest.raises(McpConfigError, match="B is not set"):
        expand_vars("${B}", env, "w")


def test_project_mcp_json_loads_only_when_trusted(workspace: Path) -> None:
    (workspace / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "proj": {"command": "srv", "args": ["--token", "${TOK:-none}"], "env": {"K": "${TOK}"}},
                    "web": {"type": "http", "url": "https://${HOST}/mcp", "headers": {"X": "y"}},
                }
            }
        )
    )
    assert load_settings({}, workspace, False, {}).servers == {}
    settings = load_settings({}, workspace, True, {"TOK": "t1"})
    proj, web = settings.servers["proj"], settings.servers["web"]
    assert proj.transport == "stdio"
    assert proj.args == ("--token", "t1")
    assert dict(proj.env) == {"K": "t1"}
    assert web.transport == "http"
    assert web.error is not None
    assert "HOST is not set" in web.error


def test_bad_definitions_fail_one_server_not_the_config(workspace: Path) -> None:
    settings = load_settings(
        {
            "mcp": {
                "servers": {
                    "nocmd": {"args": ["x"]},
                    "weird": {"type": "carrier-pigeon"},
                    "ok": {"url": "http://127.0.0.1:9/mcp"},
                }
            }
        },
        workspace,
        False,
        {},
    )
    assert "needs 'command'" in (settings.servers["nocmd"].error or "")
    assert "unknown type" in (settings.servers["weird"].error or "")
    assert settings.servers["ok"].error is None
    assert settings.servers["ok"].transport == "http"


# --------------------------------------------------------------------------- stdio


async def test_stdio_tools_join_the_registry_and_run(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    runtime, ext = mcp_runtime(
        workspace,
        [
            {
                "tool_calls": [
                    call("mcp__fixture__echo", text="hi"),
                    call("mcp__fixture__add", a=2, b=3),
                    call("mcp__fixture__broken"),
                ]
            },
            {"text": "done"},
        ],
    )
    try:
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "use the server")
        assert turn.status == "completed"
        results = {r.name: r for r in items(runtime, thread.id, ToolResultItem)}
        assert results["mcp__fixture__echo"].text == "howdy: hi"  # ${GREETING:-howdy} expanded
        assert results["mcp__fixture__add"].text == "5"
        assert not results["mcp__fixture__add"].is_error
        assert results["mcp__fixture__broken"].is_error
        [status] = source_statuses(runtime.registry)
        assert status.status == "connected"
        assert len(status.tools) == 5
    finally:
        await runtime.close()
    assert ext.manager.connections["fixture"].status == "stopped"


async def test_connection_is_background_and_never_blocks(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    runtime, ext = mcp_runtime(workspace, [{"text": "hi"}])
    try:
        tools = runtime.registry.tool_registry()  # kicks off the connection, returns at once
        # It returned before the server answered: the connection is still being made.
        assert ext.manager.connections["fixture"].status == "connecting"
        assert not any(name.startswith("mcp__") for name in tools.names())
        catalog = await build_catalog(runtime.registry, wait=20)
        mcp_tools = {t.name: t for t in catalog.tools if t.source == "mcp"}
        assert set(mcp_tools) == {
            "mcp__fixture__echo",
            "mcp__fixture__add",
            "mcp__fixture__broken",
            "mcp__fixture__die",
            "mcp__fixture__whoami",
        }
        assert mcp_tools["mcp__fixture__add"].extension == "roder-ext-mcp"
        assert mcp_tools["mcp__fixture__add"].parameters["required"] == ["a", "b"]
    finally:
        await runtime.close()


async def test_mcp_tools_go_through_policy(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    script = [{"tool_calls": [call("mcp__fixture__echo", text="x")]}, {"text": "ok"}]
    runtime, _ = mcp_runtime(workspace, script, mode="plan")
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "go")
        [result] = items(runtime, thread.id, ToolResultItem)
        assert result.is_error
        assert "plan mode" in result.text
    finally:
        await runtime.close()
    write_config(roder_home, STDIO_SERVER + 'read_only_tools = ["echo"]\n')
    runtime, _ = mcp_runtime(workspace, script, mode="plan")
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "go")
        [result] = items(runtime, thread.id, ToolResultItem)
        assert result.text == "howdy: x"
    finally:
        await runtime.close()
    # A tool the server annotates readOnlyHint runs in plan mode with no read_only_tools entry.
    write_config(roder_home, STDIO_SERVER)
    runtime, _ = mcp_runtime(workspace, [{"tool_calls": [call("mcp__fixture__whoami")]}, {"text": "ok"}], mode="plan")
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "go")
        [result] = items(runtime, thread.id, ToolResultItem)
        assert result.text == "fixture"
        assert not result.is_error
    finally:
        await runtime.close()


async def test_dead_server_is_reported_and_restarted_on_demand(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    runtime, ext = mcp_runtime(
        workspace,
        [
            {"tool_calls": [call("mcp__fixture__die")]},
            {"text": "it died"},
            {"tool_calls": [call("mcp__fixture__echo", text="again")]},
            {"text": "back"},
        ],
    )
    connection = ext.manager.connections["fixture"]
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "crash it")
        [died] = items(runtime, thread.id, ToolResultItem)
        assert died.is_error
        assert "exited" in died.text
        assert "restarted" in died.text
        assert connection.status == "exited"
        assert "fixture server starting on stdio" in (connection.error or "")  # stderr tail is shown
        await runtime.run_turn(thread.id, "try again")
        again = items(runtime, thread.id, ToolResultItem)[-1]
        assert again.text == "howdy: again"
        assert connection.status == "connected"
        assert connection.starts == 2
        restarted = await restart_source(runtime.registry, "fixture")
        assert restarted.status == "connected"
        assert connection.starts == 3
    finally:
        await runtime.close()


async def test_first_use_shows_descriptions_before_running(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    script = [
        {"tool_calls": [call("mcp__fixture__add", a=1, b=1)]},
        {"text": "ok"},
        {"tool_calls": [call("mcp__fixture__add", a=2, b=2)]},
        {"text": "ok"},
    ]
    runtime, _ = mcp_runtime(workspace, script, interactive=True)
    requests: list = []

    def answer(event):
        if isinstance(event, ApprovalRequested):
            requests.append(event.request)
            runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision="deny"))

    runtime.bus.add_listener(answer)
    try:
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "add")
        [refused] = items(runtime, thread.id, ToolResultItem)
        assert refused.is_error
        assert "refused MCP server 'fixture'" in refused.text
        [review] = requests
        assert "First use of MCP server 'fixture'" in review.reason
        assert "mcp__fixture__echo: Echo the text back" in review.reason
        assert "mcp__fixture__die: Exit the server process" in review.reason
    finally:
        await runtime.close()
    runtime2, _ = mcp_runtime(workspace, script[2:], interactive=True)
    seen: list = []
    runtime2.bus.add_listener(
        lambda ev: (
            (seen.append(ev), runtime2.resolve_approval(ev.request.approval_id, ApprovalDecision(decision="allow_once")))
            if isinstance(ev, ApprovalRequested)
            else None
        )
    )
    try:
        thread = await runtime2.start_thread()
        await runtime2.run_turn(thread.id, "add")
        assert items(runtime2, thread.id, ToolResultItem)[-1].text == "4"
        assert len(seen) == 1
        await runtime2.run_turn(thread.id, "add again")  # reviewed: no second prompt
        assert len(seen) == 1
    finally:
        await runtime2.close()


# --------------------------------------------------------------------------- streamable HTTP


async def test_streamable_http_server_with_headers(workspace: Path, roder_home: Path) -> None:
    proc, url = start_http_fixture(token="s3cret")
    try:
        write_config(
            roder_home,
            f"""
[mcp.servers.remote]
url = "{url}"
headers = {{ X-Test-Token = "${{FIXTURE_TEST_TOKEN}}" }}

[mcp.servers.wrongtoken]
url = "{url}"
headers = {{ X-Test-Token = "nope" }}
startup_timeout = 10
""",
        )
        runtime, ext = mcp_runtime(
            workspace,
            [
                {"tool_calls": [call("mcp__remote__add", a=20, b=22)]},
                {"text": "42"},
            ],
            env={"FIXTURE_TEST_TOKEN": "s3cret"},
        )
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "add remotely")
            [result] = items(runtime, thread.id, ToolResultItem)
            assert result.text == "42"
            assert not result.is_error
            statuses = {s.name: s for s in source_statuses(runtime.registry)}
            assert statuses["remote"].status == "connected"
            await ext.manager.wait_ready(15)
            assert statuses["wrongtoken"].status != "connected" or ext.manager.connections["wrongtoken"].status == "failed"
            assert ext.manager.connections["wrongtoken"].status == "failed"
            assert "HTTP 401 Unauthorized without an OAuth challenge: check the headers" in (
                ext.manager.connections["wrongtoken"].error or ""
            )
        finally:
            await runtime.close()
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- CLI


def _roder(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RODER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_cli_tools_and_mcp_list(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER + '\n[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\n')
    out = _roder("tools", "list", "--json", home=roder_home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    sources = {t["name"]: t["source"] for t in data["tools"]}
    assert sources["mcp__fixture__echo"] == "mcp"
    assert {s["name"]: s["status"] for s in data["sources"]} == {"fixture": "connected", "broken": "failed"}
    text = _roder("mcp", "list", "-v", home=roder_home, cwd=workspace)
    assert "fixture  connected  5 tools" in text.stdout
    assert "mcp__fixture__add: Add two integers." in text.stdout
    assert "/mcp__fixture__review  (prompt)" in text.stdout
    assert "@fixture:fixture://notes/readme  (resource)" in text.stdout
    assert "broken  failed" in text.stdout
    assert "No such file" in text.stdout


def test_cli_project_servers_need_trust(workspace: Path, roder_home: Path) -> None:
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"proj": {"command": sys.executable, "args": [str(FIXTURE_SERVER), "stdio"]}}})
    )
    untrusted = json.loads(_roder("mcp", "list", "--json", home=roder_home, cwd=workspace).stdout)
    assert untrusted["servers"] == []
    assert _roder("trust", str(workspace), home=roder_home, cwd=workspace).returncode == 0
    trusted = json.loads(_roder("mcp", "list", "--json", home=roder_home, cwd=workspace).stdout)
    assert [(s["name"], s["status"], s["toolCount"]) for s in trusted["servers"]] == [("proj", "connected", 5)]
    assert _roder("untrust", str(workspace), home=roder_home, cwd=workspace).returncode == 0
    assert json.loads(_roder("mcp", "list", "--json", home=roder_home, cwd=workspace).stdout)["servers"] == []


def _fixture_children() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"mcp_fixture_server" in cmdline:
            found.append(int(entry.name))
    return found


async def test_closing_the_runtime_stops_server_processes(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, STDIO_SERVER)
    runtime, ext = mcp_runtime(workspace, [{"text": "hi"}])
    await ext.manager.wait_ready(20)
    connection = ext.manager.connections["fixture"]
    assert connection.status == "connected"
    assert len(_fixture_children()) == 1
    await runtime.close()
    assert connection.status == "stopped"
    await until(lambda: not _fixture_children())
    # The MCP lifecycle: a connected server is first told by the end of its stdin, and exits by itself.
    assert "fixture server: stdin closed, exiting" in connection.log.path.read_text()


async def test_app_server_tools_list_shows_mcp_servers(workspace: Path, roder_home: Path) -> None:
    from roder_core.server.client import LocalAppClient

    write_config(roder_home, STDIO_SERVER + '\n[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\n')
    runtime, ext = mcp_runtime(workspace, [{"text": "hi"}])
    client = LocalAppClient.for_runtime(runtime)
    try:
        await ext.manager.wait_ready(20)
        listing = await client.call(TOOLS_LIST, ToolsListParams())
        assert {t.name: t.source for t in listing.tools}["mcp__fixture__add"] == "mcp"
        sources = {s.name: s for s in listing.sources}
        assert sources["fixture"].status == "connected"
        assert sources["fixture"].tool_count == 5
        assert sources["broken"].status == "failed"
        assert "No such file" in (sources["broken"].error or "")
    finally:
        await runtime.close()
