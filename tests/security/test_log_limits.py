"""Logs Roder keeps of what others say are bounded, and say what they dropped: an MCP server
flooding its stderr (or its log messages) never fills the disk, a batch rollout logging without
end never fills the worker's memory (``roder_core/bounded_log.py``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import roder_ext_mcp

import roder_core.bounded_log as bounded_log
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.batch.conftest import run_cli, write_jsonl
from tests.ecosystem.harness import FIXTURE_SERVER, host_for, runtime_with

PROVIDER_KEY = "sk-proj-LOGLIMIT0123456789abcdefghij"
SERVER_TOKEN = "srv-only-token-limit-0123456789ab"
CAP = 1024 * 1024


async def test_a_flooding_mcp_server_log_is_rotated_with_a_note(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real stdio server prints its token, then 5 MiB on stderr, with the log's limit at
    1 MiB: the log and its one older part stay within the limit each, the new part begins with a
    line naming what moved where and what was deleted, the server's last words are kept and its
    token is redacted."""
    monkeypatch.setattr(bounded_log, "FILE_CAP_BYTES", CAP)
    (roder_home / "config.toml").write_text(
        f"""
[mcp]
startup_wait = 25

[mcp.servers.flood]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FIXTURE_SERVER))}, "stdio"]

[mcp.servers.flood.env]
SERVICE_TOKEN = "{SERVER_TOKEN}"
FIXTURE_STDERR_VARS = "SERVICE_TOKEN"
FIXTURE_STDERR_FLOOD = "{5 * CAP}"
""",
        encoding="utf-8",
    )
    host = host_for(workspace, trusted=False, env={"OPENAI_API_KEY": PROVIDER_KEY})
    extension = roder_ext_mcp.create(host)
    runtime = runtime_with(host, [extension], [{"text": "hi"}])
    connection = extension.manager.connections["flood"]
    try:
        await extension.manager.wait_ready(60)
        assert connection.status == "connected", connection.error
    finally:
        await runtime.close()
    log = connection.log.path
    older = log.with_name(log.name + ".1")
    assert log.stat().st_size <= CAP
    assert older.stat().st_size <= CAP
    assert sorted(p.name for p in log.parent.iterdir()) == ["flood.log", "flood.log.1"]
    text = log.read_text()
    note = re.search(
        r"\[roder: this log reached its limit of 1\.0 MiB: the .* before this line are in flood\.log\.1; "
        r".* older than that were deleted\]",
        text,
    )
    assert note, text[:300]
    assert text.rstrip().endswith("fixture server: stdin closed, exiting")
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    for path in (log, older):
        assert SERVER_TOKEN.encode() not in path.read_bytes()


def test_a_flooding_mcp_log_message_is_cut_and_the_log_rotated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Log messages a server sends go through the same writer: one message longer than half the
    limit keeps its beginning with a note, and many of them rotate the file."""
    from roder_ext_mcp.server_log import ServerLog

    from roder_core.brokers.secrets import SecretRedactor

    monkeypatch.setattr(bounded_log, "FILE_CAP_BYTES", CAP)
    redactor = SecretRedactor()
    log = ServerLog(tmp_path / "mcp-logs" / "chatty.log", redactor, [("SERVICE_TOKEN", SERVER_TOKEN)])
    log.begin()
    log.write(f"notifications/message [info] {SERVER_TOKEN} " + "y" * (3 * CAP) + "\n")
    text = log.path.read_text()
    assert "[redacted:SERVICE_TOKEN]" in text and SERVER_TOKEN not in text
    assert re.search(r"\[roder: \d+ more characters of this record dropped\]\n$", text)
    for _ in range(40):
        log.write("notifications/message [info] " + "z" * (CAP // 8) + "\n")
    assert log.path.stat().st_size <= CAP
    assert log.path.with_name("chatty.log.1").stat().st_size <= CAP
    assert "this log reached its limit" in log.path.read_text()


def test_a_batch_rollout_logging_without_end_keeps_its_first_and_latest_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider answering with 60,000 malformed stream events (each logged as a warning quoting
    the API key) gives a roder.log within the in-memory limit: its first and last warnings, a line
    saying how many lines were dropped between them, and never the key."""
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    events = 60_000
    body = "".join(f"event: response.output_text.delta\ndata: {{not json #{n} auth={PROVIDER_KEY}\n\n" for n in range(events))
    out = tmp_path / "out"
    with ThreadedFakeServer([{"raw": body}, {"text": "Done."}]) as server:
        tasks = write_jsonl(
            tmp_path / "tasks.jsonl", [{"id": "chatty", "prompt": "Say done.", "env": {"OPENAI_BASE_URL": server.base_url}}]
        )
        code, _, err = run_cli(
            capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "openai", "--model", "m"
        )
    assert code == 0, err
    [log] = list(out.rglob("roder.log"))
    text = log.read_text()
    assert len(text.encode()) <= bounded_log.MEMORY_CAP_BYTES + 1024
    lines = text.splitlines()
    assert "#0 " in lines[0]
    assert f"#{events - 1} " in text
    dropped = [line for line in lines if line.startswith("[roder: ")]
    assert len(dropped) == 1 and re.fullmatch(
        r"\[roder: \d+ lines \(.* MiB\) of this log dropped here: it keeps its first and latest 2\.0 MiB\]", dropped[0]
    ), dropped
    assert PROVIDER_KEY not in text and "[redacted:OPENAI_API_KEY]" in text
