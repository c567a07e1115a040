"""`roder acp` driven by the agent-client-protocol package's own client side over real pipes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    CurrentModeUpdate,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from tests.builders import until
from tests.server.support import call, trusted_workspace

pytestmark = pytest.mark.e2e
BIG = 64 * 1024 * 1024


class EditorClient:
    """A minimal editor: records updates, answers permissions, offers fs writes and terminals."""

    def __init__(self, decisions: list[str] | None = None) -> None:
        self.decisions = list(decisions or [])
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[Any] = []
        self.writes: dict[str, str] = {}
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.outputs: dict[str, bytes] = {}
        #: open editor buffers (path -> unsaved text) served by fs/read_text_file; paths asked.
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.permissions.append((tool_call, [o.kind for o in options]))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=self.decisions.pop(0), outcome="selected"))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        self.writes[path] = content
        return WriteTextFileResponse()

    async def read_text_file(
        self, session_id: str, path: str, limit: int | None = None, line: int | None = None, **kwargs: Any
    ) -> Any:
        self.reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = proc
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        proc = self.terminals[terminal_id]
        out, _ = await proc.communicate()
        self.outputs[terminal_id] = out
        return WaitForTerminalExitResponse(exit_code=proc.returncode)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        proc = self.terminals[terminal_id]
        status = TerminalExitStatus(exit_code=proc.returncode) if proc.returncode is not None else None
        return TerminalOutputResponse(output=self.outputs.get(terminal_id, b"").decode(), truncated=False, exit_status=status)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.terminals[terminal_id].kill()
        return KillTerminalResponse()

    def of(self, kind: type) -> list[Any]:
        return [u for _s, u in self.updates if isinstance(u, kind)]


def agent(workspace: Path, env: dict[str, str], client: EditorClient, *args: str) -> Any:
    return spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "roder_tui.cli",
        "acp",
        "--provider",
        "mock",
        "--trust",
        *args,
        cwd=workspace,
        env=env,
        # The agent exits on its own once stdin closes; under load that can take longer than the
        # library's 2 s default, after which it signals a process that may just have exited.
        transport_kwargs={"limit": BIG, "shutdown_timeout": 120.0},
        use_unstable_protocol=True,
    )


async def test_prompt_streams_messages_far_larger_than_64k(tmp_path: Path) -> None:
    answer = "y" * 300_000
    workspace, env = trusted_workspace(tmp_path, [{"reasoning": "thinking hard", "text": answer, "chunk_size": 100_000}])
    client = EditorClient()
    async with agent(workspace, env, client) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1
        assert init.agent_capabilities.load_session
        assert init.agent_capabilities.session_capabilities.list is not None
        session = await conn.new_session(cwd=str(workspace))
        assert session.modes.current_mode_id == "ask"
        assert [m.id for m in session.modes.available_modes] == ["plan", "ask", "auto-edit", "bypass"]
        assert session.config_options[0].id == "model"
        big_prompt = "z" * 200_000
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block(big_prompt)])
        assert result.stop_reason == "end_turn"
    text = "".join(u.content.text for u in client.of(AgentMessageChunk))
    assert text == answer
    assert "".join(u.content.text for u in client.of(AgentThoughtChunk)) == "thinking hard"


async def test_permissions_editor_writes_and_terminal(tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [call("write_note", path="note.txt", text="hello editor")]},
        {"tool_calls": [call("shell", command="echo from-the-terminal")]},
        {"text": "all done"},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    client = EditorClient(["allow_once", "allow_always"])
    async with agent(workspace, env, client, "--client-terminal", "always") as (conn, _proc):
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=str(workspace))
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        assert result.stop_reason == "end_turn"
    assert (workspace / "note.txt").read_text() == "hello editor"
    assert client.writes == {str(workspace / "note.txt"): "hello editor"}
    assert [p[1] for p in client.permissions] == [["allow_once", "allow_always", "reject_once", "reject_always"]] * 2
    edit_request = client.permissions[0][0]
    assert edit_request.kind == "edit"
    assert edit_request.content[0].new_text == "hello editor"
    starts = client.of(ToolCallStart)
    assert [(s.kind, s.status) for s in starts] == [("edit", "pending"), ("execute", "pending")]
    progress = client.of(ToolCallProgress)
    assert any(p.content and getattr(p.content[0], "terminal_id", None) == "term-1" for p in progress)
    finished = [p for p in progress if p.status == "completed"]
    assert len(finished) == 2
    assert "from-the-terminal" in finished[1].raw_output["text"]
    assert any(p.content and getattr(p.content[0], "type", "") == "diff" for p in progress)
    assert "all done" in "".join(u.content.text for u in client.of(AgentMessageChunk))


async def test_rejection_cancel_load_list_fork_mode_and_model(tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [call("write_note", path="no.txt", text="x")]},
        {"text": "understood"},
        {"text": "slow " * 400, "chunk_size": 5, "delay_ms": 20},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    client = EditorClient(["reject_once"])
    async with agent(workspace, env, client) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(workspace))
        sid = session.session_id
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=sid, prompt=[text_block("write it")])
        assert result.stop_reason == "end_turn"
        assert not (workspace / "no.txt").exists()
        failed = [p for p in client.of(ToolCallProgress) if p.status == "failed"]
        assert failed
        assert "denied" in failed[0].raw_output["text"]

        chunks = len(client.of(AgentMessageChunk))
        slow = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("talk slowly")]))
        await until(lambda: len(client.of(AgentMessageChunk)) > chunks)  # the slow answer is streaming
        await conn.cancel(session_id=sid)
        async with asyncio.timeout(30):
            assert (await slow).stop_reason == "cancelled"

        await conn.set_session_mode(session_id=sid, mode_id="auto-edit")
        await until(lambda: any(u.current_mode_id == "auto-edit" for u in client.of(CurrentModeUpdate)))
        changed = await conn.set_config_option(config_id="model", session_id=sid, value="mock/mock-large")
        assert changed.config_options[0].current_value == "mock/mock-large"
        assert await conn._conn.send_request("session/set_model", {"sessionId": sid, "modelId": "mock/mock"}) == {}

        listed = await conn.list_sessions(cwd=str(workspace))
        assert sid in [s.session_id for s in listed.sessions]
        forked = await conn.fork_session(session_id=sid, cwd=str(workspace))
        assert forked.session_id != sid

    replay = EditorClient()
    async with agent(workspace, env, replay) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(workspace), session_id=sid)
        assert [u.content.text for u in replay.of(UserMessageChunk)][:2] == ["write it", "talk slowly"]
        assert replay.of(ToolCallStart)[0].status == "completed"


async def test_read_tool_uses_the_editor_buffer_after_the_broker_scope_check(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside on disk\n")
    steps = [
        {"tool_calls": [call("read", path="a.txt")]},
        {"tool_calls": [call("read", path=str(outside))]},
        {"tool_calls": [call("read", path="b.txt")]},
        {"text": "read them"},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    (workspace / "a.txt").write_text("a on disk\n")
    (workspace / "b.txt").write_text("b on disk\n")
    client = EditorClient()
    client.buffers = {str(workspace / "a.txt"): "unsaved line one\nunsaved line two\n", str(outside): "leak\n"}

    async def read_all(client: EditorClient, fs: FileSystemCapabilities) -> list[str]:
        async with agent(workspace, env, client) as (conn, _proc):
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(fs=fs))
            session = await conn.new_session(cwd=str(workspace))
            async with asyncio.timeout(60):
                result = await conn.prompt(session_id=session.session_id, prompt=[text_block("r")])
            assert result.stop_reason == "end_turn"
        return [p.raw_output["text"] for p in client.of(ToolCallProgress) if p.status in ("completed", "failed")]

    texts = await read_all(client, FileSystemCapabilities(read_text_file=True, write_text_file=True))
    assert texts[0] == "     1\tunsaved line one\n     2\tunsaved line two"
    assert texts[1].startswith("refused:")
    assert "outside the workspace" in texts[1]
    assert texts[2] == "     1\tb on disk"  # the editor failed to answer: the disk is read
    assert client.reads == [str(workspace / "a.txt"), str(workspace / "b.txt")]

    disk_only = EditorClient()
    disk_only.buffers = dict(client.buffers)
    texts = await read_all(disk_only, FileSystemCapabilities(read_text_file=False, write_text_file=True))
    assert texts[0] == "     1\ta on disk"
    assert texts[1].startswith("refused:")
    assert disk_only.reads == []


async def test_an_always_reject_that_cannot_be_saved_is_said_in_the_editor(tmp_path: Path) -> None:
    """config.toml links into a path whose folder is a file (no write succeeds, as root too): the
    call is still rejected, and the editor is told the rule was not saved."""
    import os

    steps = [{"tool_calls": [call("write_note", path="no.txt", text="x")]}, {"text": "understood"}]
    workspace, env = trusted_workspace(tmp_path, steps)
    config = Path(os.environ["RODER_HOME"]) / "config.toml"
    client = EditorClient(["reject_always"])
    async with agent(workspace, env, client) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(workspace))
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        config.unlink(missing_ok=True)
        config.symlink_to(blocker / "config.toml")  # after start-up read the config
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("write it")])
        assert result.stop_reason == "end_turn"
    assert not (workspace / "no.txt").exists()
    said = "".join(u.content.text for u in client.of(AgentMessageChunk))
    assert "applies to this session but was not saved to" in said
