"""Secrets never land in Roder's log files: a batch rollout's ``roder.log`` and an MCP stdio
server's stderr log hold the redaction marker where a known secret value was written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import roder_ext_mcp

from roder_core.ir import ToolResultItem
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.batch.conftest import run_cli, write_jsonl
from tests.core.harness import call
from tests.ecosystem.harness import FIXTURE_SERVER, host_for, items, runtime_with

PROVIDER_KEY = "sk-proj-LOGLEAK0123456789abcdefghij"


def _files_holding(folder: Path, value: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


def test_batch_roder_log_is_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider that echoes the key inside a malformed stream event makes the engine log a
    warning quoting that event: the rollout's roder.log keeps the warning, not the key."""
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    echoed = f"event: response.output_text.delta\ndata: {{not json, auth={PROVIDER_KEY}\n\n"
    steps = [{"raw": echoed}, {"text": "Done."}]
    out = tmp_path / "out"
    with ThreadedFakeServer(steps) as server:
        tasks = write_jsonl(
            tmp_path / "tasks.jsonl", [{"id": "echo", "prompt": "Say done.", "env": {"OPENAI_BASE_URL": server.base_url}}]
        )
        code, stdout, err = run_cli(
            capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "openai", "--model", "m"
        )
    assert code == 0, err
    logs = list(out.rglob("roder.log"))
    assert logs, f"the malformed event was not logged: {sorted(p.name for p in out.rglob('*'))}"
    text = logs[0].read_text()
    assert "skipped a malformed stream event" in text
    assert "[redacted:OPENAI_API_KEY]" in text
    assert _files_holding(out, PROVIDER_KEY) == []
    assert PROVIDER_KEY not in stdout + err


SERVER_TOKEN = "srv-only-token-9f8e7d6c5b4a3210"
FLOOD = 4 * 1024 * 1024  # far beyond a pipe's buffer: the server hangs unless Roder reads on


async def test_mcp_server_stderr_log_is_redacted_and_read_continuously(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real stdio server prints the run's provider key (passed to it under a plain name) and
    its own configured token to stderr, then floods it: it still connects, and its log in Roder's
    cache holds the markers, never the values."""
    (roder_home / "config.toml").write_text(
        f"""
[mcp]
startup_wait = 25

[mcp.servers.leaky]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FIXTURE_SERVER))}, "stdio"]

[mcp.servers.leaky.env]
PASSED_ALONG = "${{OPENAI_API_KEY}}"
SERVICE_TOKEN = "{SERVER_TOKEN}"
FIXTURE_STDERR_VARS = "PASSED_ALONG,SERVICE_TOKEN"
FIXTURE_STDERR_FLOOD = "{FLOOD}"
""",
        encoding="utf-8",
    )
    host = host_for(workspace, trusted=False, env={"OPENAI_API_KEY": PROVIDER_KEY})
    extension = roder_ext_mcp.create(host)
    runtime = runtime_with(host, [extension], [{"text": "hi"}])
    connection = extension.manager.connections["leaky"]
    try:
        await extension.manager.wait_ready(60)
        assert connection.status == "connected", connection.error
    finally:
        await runtime.close()
    assert connection.log.path.is_relative_to(roder_home)
    text = connection.log.path.read_text()
    assert "fixture server config: PASSED_ALONG=[redacted:OPENAI_API_KEY]" in text
    assert "fixture server config: SERVICE_TOKEN=[redacted:SERVICE_TOKEN]" in text
    assert "x" * FLOOD in text  # the flood was read and kept whole, after the redacted lines
    assert "fixture server: stdin closed, exiting" in text  # the last lines, read after the stop
    assert _files_holding(roder_home, PROVIDER_KEY) == []
    assert _files_holding(roder_home, SERVER_TOKEN) == [roder_home / "config.toml"]


async def test_mcp_server_log_messages_are_redacted(workspace: Path, roder_home: Path) -> None:
    """A server's ``notifications/message`` quoting its token reaches its log, and the call, redacted."""
    server = Path(__file__).with_name("mcp_log_server.py")
    (roder_home / "config.toml").write_text(
        f"""
[mcp]
startup_wait = 25

[mcp.servers.logger]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]
log_level = "debug"
env = {{ SERVICE_TOKEN = "{SERVER_TOKEN}" }}
""",
        encoding="utf-8",
    )
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    script = [{"tool_calls": [call("mcp__logger__report", variable="SERVICE_TOKEN")]}, {"text": "done"}]
    runtime = runtime_with(host, [extension], script)
    connection = extension.manager.connections["logger"]
    try:
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "report")
        assert turn.status == "completed"
        [result] = items(runtime, thread.id, ToolResultItem)
        assert result.text == "reported", result.text
    finally:
        await runtime.close()
    text = connection.log.path.read_text()
    assert "notifications/message [info] configured SERVICE_TOKEN=[redacted:SERVICE_TOKEN]" in text
    assert _files_holding(roder_home, SERVER_TOKEN) == [roder_home / "config.toml"]
