"""`roder -p` ends with ``os._exit`` after flushing; nothing the user is owed may be lost.

The answer must reach a pipe whole, the thread file must be complete (its last turn ended and
fsynced before exit), the exit code must be kept, and a long answer written to a slow reader
must not be cut off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.settings.paths import RoderPaths

pytestmark = pytest.mark.e2e


def _roder(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args],
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )


def test_answer_and_thread_file_are_whole_after_fast_exit(tmp_path: Path) -> None:
    answer = "".join(f"line {i} of a long answer\n" for i in range(20_000))  # ~500 KB through a pipe
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": answer}]}))
    env = {**os.environ, "RODER_MOCK_SCRIPT": str(script)}
    done = _roder(tmp_path, env, "-p", "go", "--provider", "mock")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == answer
    files = list(RoderPaths.from_env().threads_dir.glob("*.jsonl"))
    assert len(files) == 1
    data = files[0].read_bytes()
    assert data.endswith(b"\n")
    methods = [json.loads(line).get("method") for line in data.splitlines()[1:]]
    assert "turn/completed" in methods
    completed = [json.loads(line) for line in data.splitlines()[1:] if b'"item/completed"' in line]
    assert any(e["item"].get("text") == answer for e in completed)


def test_failed_turn_keeps_its_exit_code(tmp_path: Path) -> None:
    done = _roder(tmp_path, dict(os.environ), "-p", "-c", "--provider", "mock")
    assert done.returncode == 2
    assert b"-p needs a prompt" in done.stderr or b"no earlier thread" in done.stderr


def test_a_profiler_still_gets_to_write_its_data(tmp_path: Path) -> None:
    profile = tmp_path / "roder.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "roder_tui.cli", "-p", "hi", "--provider", "mock"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert b"Mock reply" in done.stdout
    assert profile.stat().st_size > 0
