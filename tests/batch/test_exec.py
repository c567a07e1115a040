"""`roder exec`: one task from the command line, JSON Lines events on stdout, a result line last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.batch.conftest import write_script


def _exec(cwd: Path, *args: str, stdin: str | None = None) -> tuple[int, list[dict[str, Any]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "exec", "--provider", "mock", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, lines, done.stderr


def test_exec_streams_events_and_ends_with_the_rollout_record(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "data.txt").write_text("payload\n")
    code, lines, err = _exec(
        folder,
        "summarize",
        "the",
        "data",
        "--score",
        "test -f data.txt",
        "--id",
        "one",
        "--setup",
        "echo set > setup.txt",
        "--out",
        str(tmp_path / "rollout"),
    )
    assert code == 0, err
    types = [line["type"] for line in lines]
    assert types[0] == "thread/started"
    assert types[-1] == "result"
    assert "turn/started" in types
    assert "item/agentMessage/delta" in types
    assert "turn/completed" in types
    # The same projection as `roder -p --output-format stream-json`: the method, then its params.
    started = lines[0]
    assert set(started) >= {"type", "threadId", "thread"}
    final = lines[-1]
    assert final["task_id"] == "one"
    assert final["passed"]
    assert final["score"]["exit_code"] == 0
    assert final["thread_id"] == started["threadId"]
    assert sorted(p.name for p in (tmp_path / "rollout").iterdir()) == [
        "atif.json",
        "model.patch",
        "result.json",
        "score.log",
        "setup.log",
        "thread.jsonl",
        "trajectory.json",
        "workspace.diff",
    ]  # nothing logged
    assert not (folder / "setup.txt").exists()  # the run worked on a copy


def test_exec_failures_exit_1_and_in_place_changes_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    code, lines, err = _exec(folder, "hello", "--score", "false")
    assert code == 1
    assert lines[-1]["failure_cause"] == "score_failure"
    assert "failed: score_failure" in err
    code, lines, _ = _exec(folder, "--in-place", "--setup", "echo here > marker.txt", stdin="prompt from stdin\n")
    assert code == 0
    assert (folder / "marker.txt").read_text() == "here\n"
    user = next(line for line in lines if line["type"] == "item/completed" and line["item"]["type"] == "userMessage")
    assert user["item"]["text"] == "prompt from stdin"


def test_exec_times_out_at_its_deadline(tmp_path: Path) -> None:
    slow = write_script(tmp_path / "slow.json", [{"text": "z" * 400, "chunk_size": 2, "delay_ms": 50}])
    done = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "exec", "--provider", "mock", "--deadline", "1", "go slow"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RODER_MOCK_SCRIPT": str(slow)},
    )
    final = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 1
    assert final["exit_reason"] == "timeout"
    assert final["failure_cause"] == "timeout"
    assert final["reserve_s"] == 0.5  # at most half the deadline


def test_exec_usage_errors(tmp_path: Path) -> None:
    code, lines, err = _exec(tmp_path, stdin="")
    assert code == 2
    assert lines == []
    assert "needs a prompt" in err
    code, _, err = _exec(tmp_path, "p", "--ref", "main")
    assert code == 2
    assert "--ref needs --git" in err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    code, _, err = _exec(tmp_path, "p", "--out", str(tmp_path / "busy"))
    assert code == 2
    assert "non-empty folder" in err
    assert (tmp_path / "busy" / "keep.txt").exists()
