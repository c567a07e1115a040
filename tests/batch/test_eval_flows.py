"""An eval team's everyday flows through the real ``roder batch`` (its own process where the flow
is about processes): a task file that is not text, a setup that fails or hangs, and a second batch
started on an output folder another one is writing to."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch.conftest import result, run_cli, write_jsonl, write_script
from tests.builders import wait_until

#: A key in a known token format: no output file may hold it, wherever it appears.
KEY = "sk-proj-" + "T3stOnlyKey0123456789abcdefXYZ"


def _batch(tasks: Path, out: Path, *extra: str) -> list[str]:
    command = [sys.executable, "-m", "roder_tui.cli", "batch", str(tasks), "--out", str(out)]
    return [*command, "--provider", "mock", "--no-progress", *extra]


def test_a_task_file_that_is_not_text_is_a_one_line_error(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (a file saved in another encoding) name the file and the line,
    for a task file and for a Harbor task folder; no traceback, nothing run."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b'{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "caf\xe9"}\n')
    done = subprocess.run(_batch(tasks, tmp_path / "out"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"roder batch: {tasks}:2: not UTF-8 text (byte 0xe9)", done.stderr
    assert not (tmp_path / "out").exists()

    folder = tmp_path / "harbor" / "hello"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text('version = "1.0"\n')
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    (folder / "instruction.md").write_bytes(b"Write caf\xe9 to a file.\n")
    done = subprocess.run(_batch(folder.parent, tmp_path / "out"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"{folder / 'instruction.md'}: not UTF-8 text (byte 0xe9)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_setup_that_fails_or_hangs_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rollout's error says whether setup exited non-zero (with its status) or ran past its
    timeout; its output is in setup.log; the agent never ran and the batch goes on."""
    script = write_script(tmp_path / "done.json", [{"text": "Done."}])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    base = {"prompt": "p", "workspace": str(workspace), "score": "true", "env": {"RODER_MOCK_SCRIPT": str(script)}}
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {**base, "id": "fails", "setup": f"echo broken >&2; exit 3 # {KEY}"},
            {**base, "id": "hangs", "setup": "echo waiting; exec sleep 600", "setup_timeout": 1},
            {**base, "id": "fine"},
        ],
    )
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "2", "--no-progress", "--provider", "mock")
    assert code == 0, err
    fails, hangs = result(out, "fails"), result(out, "hangs")
    assert (fails["failure_cause"], fails["exit_reason"]) == ("setup_failure", "setup_failed")
    assert fails["error"]["message"].startswith("setup command failed (exit 3): echo broken >&2; exit 3 # ")
    assert hangs["error"]["message"] == "setup command timed out after 1 s: echo waiting; exec sleep 600"
    assert "broken\n[exit 3]" in (out / "rollouts" / "fails" / "0" / "setup.log").read_text()
    assert "waiting\n[timed out]" in (out / "rollouts" / "hangs" / "0" / "setup.log").read_text()
    assert not (out / "rollouts" / "fails" / "0" / "thread.jsonl").exists()
    assert result(out, "fine")["passed"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures_by_cause"]["setup_failure"] == 2
    # The same rollouts as a table, one row each, redacted as result.json is.
    with open(out / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["task_id"], r["rollout"], r["passed"], r["failure_cause"]) for r in rows] == [
        ("fails", "0", "False", "setup_failure"),
        ("fine", "0", "True", ""),
        ("hangs", "0", "False", "setup_failure"),
    ]
    assert rows[2]["error"] == hangs["error"]["message"]
    assert rows[1]["reward"] == "1.0" and rows[1]["score_exit_code"] == "0"
    assert not [p for p in out.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def test_a_second_batch_on_a_folder_in_use_is_refused_and_the_first_finishes(tmp_path: Path) -> None:
    """Two runs writing to one output folder would record each rollout twice and sweep each
    other's half-written rollouts: the second is refused in one line, touching nothing, and the
    first records every rollout once."""
    script = write_script(tmp_path / "done.json", [{"text": "Done."}])
    gate, began = tmp_path / "gate", tmp_path / "began"
    os.mkfifo(gate)
    # The first rollout's setup waits at the gate until the second batch has been turned away.
    setup = f"touch {began} && cat {gate} > /dev/null"
    rows = [{"id": f"t{i}", "prompt": f"task {i}", "env": {"RODER_MOCK_SCRIPT": str(script)}} for i in range(3)]
    rows[0]["setup"] = setup
    tasks = write_jsonl(tmp_path / "tasks.jsonl", rows)
    out = tmp_path / "out"
    first = subprocess.Popen(_batch(tasks, out, "--workers", "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def waiting() -> bool:
            assert first.poll() is None, first.communicate()
            return began.exists()

        wait_until(waiting, "the first batch's rollout to wait at the gate", timeout=120)
        second = subprocess.run(_batch(tasks, out, "--workers", "1"), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert second.stderr.strip() == f"roder batch: another roder batch is writing to {out}", second.stderr
        with open(gate, "w"):
            pass  # the gate opens
        _, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rollouts"], summary["passed"], summary["ran_now"]) == (3, 3, 3)
    assert sorted(p.parent.parent.name for p in out.glob("rollouts/*/*/result.json")) == ["t0", "t1", "t2"]
    assert not list(out.glob("rollouts/*/*.tmp-*"))
