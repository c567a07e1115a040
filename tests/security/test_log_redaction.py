"""Secrets never land in Roder's log files: a batch rollout's ``roder.log`` and an MCP stdio
server's stderr log hold the redaction marker where a known secret value was written."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.batch.conftest import run_cli, write_jsonl

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
