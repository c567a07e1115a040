"""End to end through `roder -p` (every installed extension, the thread store included): a
provider key in the environment never reaches a child process, stdout, a stored thread or the
audit log, and the audit chain verifies afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "sk-ant-" + "K3y" * 12

pytestmark = pytest.mark.e2e


def test_secret_never_lands_on_disk_or_stdout(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    (workspace / "notes.txt").write_text(f"copied key: {SECRET}\n")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {
                        "tool_calls": [
                            {"name": "bash", "arguments": {"command": "echo env=$ANTHROPIC_API_KEY; cat notes.txt"}},
                            {"name": "read", "arguments": {"path": "notes.txt"}},
                        ]
                    },
                    {"text": "done"},
                ]
            }
        )
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": SECRET, "RODER_MOCK_SCRIPT": str(script), "RODER_HOME": str(roder_home)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roder_tui.cli",
            "-p",
            "go",
            "--provider",
            "mock",
            "--mode",
            "bypass",
            "--output-format",
            "stream-json",
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout
    assert SECRET not in done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if '"toolResult"' in line]
    texts = [r["item"]["text"] for r in results if r.get("type") == "item/completed"]
    assert any(t.startswith("env=\ncopied key: [redacted:ANTHROPIC_API_KEY]") for t in texts)  # scrubbed, redacted
    assert any("[redacted:ANTHROPIC_API_KEY]" in t for t in texts)
    stored = [p for p in roder_home.rglob("*") if p.is_file()]
    assert any(p.name == "audit.jsonl" for p in stored)
    for path in stored:
        assert SECRET.encode() not in path.read_bytes(), path
    verify = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "audit", "verify"], env=env, capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0, verify.stdout
