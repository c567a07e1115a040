"""One-shot ask mode, run as the real `roder` program in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from roder_ext_jsonl_store import JsonlThreadStore

from roder_core.settings.paths import RoderPaths


def roder(*args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "steps": [
                    {"reasoning": "thinking", "text": "Checking.", "tool_calls": [{"name": "nope", "arguments": {}}]},
                    {"text": "All good."},
                ]
            }
        )
    )
    return path


def test_text_output_prints_answer(workspace: Path) -> None:
    proc = roder("-p", "hello", "--provider", "mock", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('Mock reply: I received 1 word, starting with "hello"')


def test_stdin_is_attached_to_the_prompt(workspace: Path) -> None:
    proc = roder(
        "-p", "what is wrong?", "--provider", "mock", "--output-format", "json", cwd=workspace, stdin="Traceback: KeyError 'x'\n"
    )
    result = json.loads(proc.stdout)
    # the mock counts every word it received: 3 of the prompt plus the attached block
    assert result["text"].startswith("Mock reply: I received")
    assert "what is wrong?" in result["text"]
    assert int(result["text"].split("received ")[1].split()[0]) > 3


def test_stdin_alone_is_the_prompt(workspace: Path) -> None:
    proc = roder("-p", "--provider", "mock", cwd=workspace, stdin="explain this\n")
    assert proc.returncode == 0
    assert '"explain this"' in proc.stdout


def test_json_output_is_one_result_object(workspace: Path, script: Path) -> None:
    proc = roder(
        "-p", "go", "--provider", "mock", "--output-format", "json", cwd=workspace, env={"RODER_MOCK_SCRIPT": str(script)}
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["type"] == "result"
    assert result["status"] == "completed"
    assert not result["is_error"]
    assert result["text"] == "All good."
    assert result["turns"] == 2
    assert result["thread_id"].startswith("thr_")
    assert result["usage"]["outputTokens"] > 0


def test_stream_json_emits_events_then_result(workspace: Path, script: Path) -> None:
    proc = roder(
        "-p", "go", "--provider", "mock", "--output-format", "stream-json", cwd=workspace, env={"RODER_MOCK_SCRIPT": str(script)}
    )
    events = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "thread/started"
    assert types[-1] == "result"
    assert "item/agentMessage/delta" in types
    assert "turn/completed" in types
    deltas = [e for e in events if e["type"] == "item/agentMessage/delta"]
    assert {d["kind"] for d in deltas} == {"text", "reasoning"}
    tool_result = next(e["item"] for e in events if e["type"] == "item/completed" and e["item"]["type"] == "toolResult")
    assert tool_result["isError"]
    assert "unknown tool" in tool_result["text"]


def test_failed_turn_exits_1_with_one_readable_line(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "fail.json"
    path.write_text(json.dumps([{"error": {"message": "rate limited by provider", "kind": "rate_limit"}}]))
    proc = roder("-p", "go", "--provider", "mock", cwd=workspace, env={"RODER_MOCK_SCRIPT": str(path)})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == "roder: turn failed: rate limited by provider"


def test_usage_errors_exit_2(workspace: Path) -> None:
    assert roder("-p", cwd=workspace).returncode == 2
    proc = roder("-p", "x", "--provider", "nosuch", cwd=workspace)
    assert proc.returncode == 2
    assert "unknown provider 'nosuch'" in proc.stderr
    assert roder("-p", "x", "--mode", "yolo", cwd=workspace).returncode == 2
    assert roder("-p", "x", "--output-format", "xml", cwd=workspace).returncode == 2


def test_mock_fallback_prints_hint(workspace: Path) -> None:
    proc = roder("-p", "hi", cwd=workspace)
    assert proc.returncode == 0
    assert "no provider configured" in proc.stderr
    assert "roder providers login PROVIDER" in proc.stderr
    # where to read more is something every install has, not the repository's docs/ folder
    assert "https://github.com/roder-agent/roder/tree/main/docs/providers.md" in proc.stderr
    assert "see docs/" not in proc.stderr


def test_one_shot_never_imports_textual(workspace: Path) -> None:
    code = (
        "import sys; from roder_tui.cli import main; rc = main(['-p', 'hi', '--provider', 'mock']); "
        "assert 'textual' not in sys.modules, sorted(m for m in sys.modules if m.startswith('textual')); "
        "sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_headless_run_ignores_untrusted_project_extensions(workspace: Path) -> None:
    ext_dir = workspace / ".roder" / "extensions"
    ext_dir.mkdir(parents=True)
    marker = workspace / "ran.txt"
    (ext_dir / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\ndef create(host):\n    return None\n")
    assert roder("-p", "hi", "--provider", "mock", cwd=workspace).returncode == 0
    assert not marker.exists(), "an untrusted project's extension code must never run"
    assert roder("-p", "hi", "--provider", "mock", "--trust", cwd=workspace).returncode == 0
    assert marker.exists(), "--trust loads the project's extensions"


def test_losing_a_race_for_the_thread_is_a_json_result_and_exit_1(workspace: Path, roder_home: Path) -> None:
    first = roder("-p", "hello", "--provider", "mock", "--output-format", "json", cwd=workspace)
    thread_id = json.loads(first.stdout)["thread_id"]
    holder = JsonlThreadStore(RoderPaths.from_env().threads_dir)  # the winner: holds the thread's write lock
    asyncio.run(holder.claim(thread_id))
    try:
        for fmt in ("json", "stream-json"):
            lost = roder("-p", "again", "-r", thread_id, "--provider", "mock", "--output-format", fmt, cwd=workspace)
            assert lost.returncode == 1, lost.stderr
            result = json.loads(lost.stdout.strip().splitlines()[-1])
            assert result["type"] == "result"
            assert result["status"] == "failed"
            assert result["is_error"]
            assert "open in another Roder process" in result["error"]
    finally:
        asyncio.run(holder.close())
    unknown = roder("-p", "again", "-r", "thr_nope", "--provider", "mock", "--output-format", "json", cwd=workspace)
    assert unknown.returncode == 2  # a wrong id stays a usage error
