"""ACP edges found by clients Roder's own tests did not write, driven with the official SDK's
client over real pipes: malformed lines, tool call statuses through a cancel, busy sessions,
capabilities and the model list."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp.schema import (
    AcpMcpServer,
    AgentMessageChunk,
    AvailableCommandsUpdate,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    ToolCallProgress,
    ToolCallStart,
)

from roder_core.server.connection import MAX_IN_FLIGHT
from tests.builders import until
from tests.e2e.test_acp import EditorClient, agent
from tests.ecosystem.harness import FIXTURE_SERVER, start_http_fixture
from tests.server.support import call, trusted_workspace

pytestmark = pytest.mark.e2e


def statuses(client: EditorClient, call_id: str) -> list[str]:
    return [u.status for u in client.of(ToolCallStart) + client.of(ToolCallProgress) if u.tool_call_id == call_id and u.status]


async def test_malformed_lines_get_errors_and_the_agent_stays_up(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [{"text": "still here"}])
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, proc):
        for line in (b"[1]\n", b'"just a string"\n', b"{not json\n", b"42\n", b'{"jsonrpc": "2.0", "method": 7}\n'):
            proc.stdin.write(line)
        await proc.stdin.drain()
        async with asyncio.timeout(30):
            init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1
        assert proc.returncode is None
        session = await conn.new_session(cwd=str(workspace))
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        assert result.stop_reason == "end_turn"
    assert proc.returncode == 0


async def test_tool_calls_run_in_progress_and_a_cancelled_call_is_closed(tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [call("shell", command="echo quick")]},
        {"tool_calls": [call("shell", command="sleep 60")]},
        {"text": "never reached"},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    client = EditorClient()
    async with agent(workspace, env, client, "--mode", "bypass") as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run both")]))
        await until(
            lambda: (
                len(client.of(ToolCallStart)) == 2 and "in_progress" in statuses(client, client.of(ToolCallStart)[1].tool_call_id)
            )
        )
        quick, slow = (s.tool_call_id for s in client.of(ToolCallStart))
        assert statuses(client, quick) == ["pending", "in_progress", "completed"]

        busy = conn.prompt(session_id=sid, prompt=[text_block("again")])
        with pytest.raises(RequestError) as refused:
            async with asyncio.timeout(30):
                await busy
        assert refused.value.code == -32000
        assert "already running" in str(refused.value)

        await conn.cancel(session_id=sid)
        async with asyncio.timeout(30):
            assert (await running).stop_reason == "cancelled"
    assert statuses(client, slow)[:2] == ["pending", "in_progress"]
    assert statuses(client, slow)[-1] == "failed"


async def test_capabilities_and_model_options_follow_the_schema(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    (workspace.parent / "home").mkdir()
    env["HOME"] = str(workspace.parent / "home")
    env["OLLAMA_HOST"] = "http://127.0.0.1:9"  # no local models: Ollama must not add an empty option
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        caps = init.agent_capabilities.session_capabilities
        assert caps.list is not None
        assert caps.resume is not None
        assert caps.close is not None
        assert caps.fork is not None  # where the unstable schema defines it
        session = await conn.new_session(cwd=str(workspace))
        values = [o.value for o in session.config_options[0].options]
        assert values and all(v.split("/", 1)[1] for v in values), values
        await conn.close_session(session_id=session.session_id)


def fixture_stdio(name: str) -> McpServerStdio:
    return McpServerStdio(name=name, command=sys.executable, args=[str(FIXTURE_SERVER), "stdio"], env=[])


async def test_editor_mcp_servers_run_for_the_session_over_stdio_and_http(tmp_path: Path) -> None:
    token = "editor-token-42"
    http_proc, url = start_http_fixture(token=token)
    steps = [
        {"tool_calls": [call("mcp__editor__add", a=2, b=3), call("mcp__web__whoami")]},
        {"text": "added"},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    # The first turn waits for servers still connecting (up to startup_wait), so the model's calls
    # find their tools even on a loaded machine.
    (Path(os.environ["RODER_HOME"]) / "config.toml").write_text("[mcp]\nstartup_wait = 25\n")
    client = EditorClient(["allow_once", "allow_once"])  # first use of each server is reviewed
    try:
        async with agent(workspace, env, client, "--mode", "bypass") as (conn, _proc):
            init = await conn.initialize(protocol_version=1)
            assert init.agent_capabilities.mcp_capabilities.http
            assert init.agent_capabilities.mcp_capabilities.sse
            refused = conn.new_session(cwd=str(workspace), mcp_servers=[AcpMcpServer(type="acp", name="inproc", server_id="x")])
            with pytest.raises(RequestError) as bad:
                async with asyncio.timeout(30):
                    await refused
            assert bad.value.code == -32602
            assert "'inproc'" in str(bad.value.data)
            assert "not supported" in str(bad.value.data)

            http = HttpMcpServer(type="http", name="web", url=url, headers=[HttpHeader(name="X-Test-Token", value=token)])
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[fixture_stdio("editor"), http])).session_id
            async with asyncio.timeout(60):
                result = await conn.prompt(session_id=sid, prompt=[text_block("add")])
            assert result.stop_reason == "end_turn"
    finally:
        http_proc.terminate()
        http_proc.wait(timeout=10)
    texts = {u.tool_call_id: u.raw_output["text"] for u in client.of(ToolCallProgress) if u.status == "completed"}
    assert sorted(texts.values()) == ["5", "fixture"], texts


async def test_slash_commands_mcp_prompts_and_resources_in_the_editor(tmp_path: Path) -> None:
    steps = [{"text": "first"}, {"text": "second"}]
    workspace, env = trusted_workspace(tmp_path, steps)
    (workspace / ".roder" / "commands").mkdir(parents=True)
    (workspace / ".roder" / "commands" / "explain.md").write_text("---\ndescription: explain a file\n---\nExplain $1 now")
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[fixture_stdio("editor")])).session_id

        def offered() -> set[str]:
            updates = client.of(AvailableCommandsUpdate)
            return {c.name for c in updates[-1].available_commands} if updates else set()

        await until(lambda: "mcp__editor__review" in offered())
        assert {"explain", "compact", "mode", "help"} <= offered()
        assert "new" not in offered()
        review = next(c for c in client.of(AvailableCommandsUpdate)[-1].available_commands if c.name == "mcp__editor__review")
        assert review.input.root.hint == "<path> [focus]"

        async with asyncio.timeout(60):
            expanded = await conn.prompt(session_id=sid, prompt=[text_block("/mcp__editor__review src/app.py speed")])
        async with asyncio.timeout(60):
            custom = await conn.prompt(session_id=sid, prompt=[text_block("/explain a.py")])
        assert expanded.stop_reason == custom.stop_reason == "end_turn"
        async with asyncio.timeout(60):
            mode = await conn.prompt(session_id=sid, prompt=[text_block("/mode")])
        assert mode.stop_reason == "end_turn"
        with pytest.raises(RequestError) as bad:
            await conn.prompt(session_id=sid, prompt=[text_block("read @editor:fixture://missing")])
        assert bad.value.code == -32602
        assert "fixture://missing" in str(bad.value)
    replies = "".join(u.content.text for u in client.of(AgentMessageChunk))
    assert "mode: ask" in replies
    stored = stored_thread(sid)
    assert "Please review src/app.py, focusing on speed." in stored
    assert "Explain a.py now" in stored
    assert "/mcp__editor__review" not in stored  # the model saw the expansion, not the command


async def test_a_mentioned_resource_is_attached_to_the_turn(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [{"text": "read it"}])
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[fixture_stdio("editor")])).session_id
        async with asyncio.timeout(60):
            await conn.prompt(session_id=sid, prompt=[text_block("summarize @editor:fixture://notes/readme please")])
    stored = stored_thread(sid)
    assert "summarize @editor:fixture://notes/readme please" in stored
    assert "The answer is 42." in stored
    assert "editor:fixture://notes/readme" in stored  # attached as a file


def stored_thread(thread_id: str) -> str:
    """The thread's JSONL file (under RODER_HOME, which the test's roder process shares)."""
    home = Path(os.environ["RODER_HOME"])
    files = [p for p in home.rglob(f"{thread_id}.jsonl")]
    assert files, f"no stored thread {thread_id} under {home}"
    return files[0].read_text()


async def test_an_editor_that_skips_initialize_still_gets_its_answer(tmp_path: Path) -> None:
    """Every session is opened after the agent forwards runtime events: a prompt sent without
    ``initialize`` used to run its turn and never return."""
    workspace, env = trusted_workspace(tmp_path, [{"text": "answered anyway"}])
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, _proc):
        session = await conn.new_session(cwd=str(workspace))
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        assert result.stop_reason == "end_turn"
        said = "".join(u.content.text for u in client.of(AgentMessageChunk))
        assert "answered anyway" in said


#: Seconds the editor's writes may stay stuck before the agent counts as having stopped reading.
#: Only an agent that keeps reading could unstick them, so load can make the test pass late,
#: never fail wrongly.
STALL = 5.0


def acp_command() -> list[str]:
    return [sys.executable, "-m", "roder_tui.cli", "acp", "--provider", "mock", "--trust"]


async def test_an_editor_that_never_reads_answers_stops_being_read(tmp_path: Path) -> None:
    """The SDK starts a task per request and queues every answer: an editor that sends without
    reading used to grow the agent without bound. Past a bounded backlog the agent stops reading
    it, so its writes stop going through long before the budget."""
    workspace, env = trusted_workspace(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        *acp_command(), cwd=workspace, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}\n')
    async with asyncio.timeout(60):
        assert json.loads(await proc.stdout.readline())["id"] == 0  # the agent is up and reading
    pad = "p" * 16 * 1024
    line = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "_roder/nope", "params": {"pad": pad}}) + "\n").encode()
    # What the agent may hold unread: a 64 MiB line's reader buffers two of them; the budget
    # is twice that, and an agent that keeps reading takes it all.
    budget, sent = 256 * 1024 * 1024, 0
    try:
        while sent < budget:
            proc.stdin.write(line * 64)
            try:
                async with asyncio.timeout(STALL):
                    await proc.stdin.drain()
            except TimeoutError:
                break
            sent += len(line) * 64
        assert sent < budget, "the agent kept reading an editor that never read an answer"
        assert proc.returncode is None
    finally:
        proc.kill()
        async with asyncio.timeout(60):
            await proc.stdout.read()  # to its end: the wait below also waits for the pipes to close
            await proc.wait()


async def test_many_pipelined_requests_are_all_answered(tmp_path: Path) -> None:
    """Far more requests than the agent holds at once, sent in one write: each is let through
    as an earlier one's answer is written, and every one is answered."""
    workspace, env = trusted_workspace(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        *acp_command(), cwd=workspace, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    count = 4 * MAX_IN_FLIGHT
    requests = [{"jsonrpc": "2.0", "id": i, "method": "session/list", "params": {}} for i in range(count)]
    requests[count // 2]["method"] = "_roder/nope"  # an error answer frees its slot too
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
    await proc.stdin.drain()
    answered: dict[int, dict[str, object]] = {}
    try:
        async with asyncio.timeout(120):
            while len(answered) < count:
                reply = json.loads(await proc.stdout.readline())
                answered[reply["id"]] = reply
        assert sorted(answered) == list(range(count))
        assert "error" in answered[count // 2] and "result" in answered[0]
    finally:
        proc.stdin.close()
        async with asyncio.timeout(60):
            await proc.wait()
