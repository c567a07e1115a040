"""Crashes and reruns: a pool worker killed with SIGKILL loses only its own rollout, which is
tried again; its scratch copy is removed; --retry-failed, --redo, --filter, --slice, --shuffle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.batch.summary import pass_at_k
from roder_core.batch.tasks import TaskFileError, parse_tasks, select_tasks
from tests.batch.conftest import pool_workers, result, run_cli, scratch_of, write_jsonl, write_script
from tests.builders import wait_until


def test_a_killed_worker_loses_only_its_own_rollout(tmp_path: Path) -> None:
    slow = write_script(tmp_path / "slow.json", [{"text": "x" * 30, "chunk_size": 3, "delay_ms": 100}])
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [{"id": f"t{i}", "prompt": f"task {i}", "env": {"RODER_MOCK_SCRIPT": str(slow)}} for i in range(6)],
    )
    out = tmp_path / "out"
    batch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roder_tui.cli",
            "batch",
            str(tasks),
            "--out",
            str(out),
            "--workers",
            "2",
            "--provider",
            "mock",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def in_a_rollout() -> int | None:  # a worker whose scratch copy exists
        assert batch.poll() is None, batch.communicate()
        return next((pid for pid in pool_workers(batch.pid) if scratch_of(pid)), None)

    victim = wait_until(in_a_rollout, "a worker inside a rollout", timeout=120)
    os.kill(victim, signal.SIGKILL)  # no cleanup possible in the worker
    _out, err = batch.communicate(timeout=180)
    assert batch.returncode == 0, err
    assert f"worker process {victim} died (killed by SIGKILL)" in err
    assert "trying again" in err
    results = [result(out, f"t{i}") for i in range(6)]
    assert all(r["passed"] for r in results)
    retried = [r for r in results if r["attempts"] == 2]
    assert len(retried) == 1, [r["attempts"] for r in results]  # only the killed worker's rollout
    [discarded] = retried[0]["discarded_attempts"]
    assert discarded["cause"] == "infra_failure"
    assert "SIGKILL" in discarded["error"]
    assert not scratch_of(victim)  # the dead worker's workspace copy is gone
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] == 6
    assert summary["attempts"]["retried_rollouts"] == 1


def test_retry_failed_redo_filter_slice_and_shuffle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flag = tmp_path / "flag"
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a-pass", "prompt": "p"},
            {"id": "b-flaky", "prompt": "p", "score": f"test -f {flag}"},
            {"id": "c-pass", "prompt": "p"},
        ],
    )
    out = tmp_path / "out"

    def batch(*extra: str) -> str:
        code, _, err = run_cli(
            capsys,
            "batch",
            tasks,
            "--out",
            out,
            "--workers",
            "1",
            "--provider",
            "mock",
            "--no-progress",
            "--sandbox",
            "off",
            *extra,
        )
        assert code == 0, err
        return err

    assert "3 rollouts; 0 already recorded, 3 to run" in batch()
    assert not result(out, "b-flaky")["passed"]
    flag.write_text("now it passes")
    first_a = (out / "rollouts/a-pass/0/result.json").read_bytes()
    assert "2 already recorded, 1 to run" in batch("--retry-failed")
    assert result(out, "b-flaky")["passed"]
    assert (out / "rollouts/a-pass/0/result.json").read_bytes() == first_a
    assert "1 tasks x 1 = 1 rollouts; 0 already recorded, 1 to run" in batch("--redo", "--filter", "^a-")
    assert (out / "rollouts/a-pass/0/result.json").read_bytes() != first_a
    assert "2 tasks x 1" in batch("--slice", "1:")
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["per_task"]) == ["b-flaky", "c-pass"]  # the summary covers the selection
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--provider", "mock", "--filter", "nothing")
    assert code == 2
    assert "no task is selected" in err

    many = parse_tasks([json.dumps({"id": f"t{i}", "prompt": "p"}) for i in range(10)], "x", tmp_path)
    shuffled = [t.id for t in select_tasks(many, shuffle=True)]
    assert shuffled != [t.id for t in many]
    assert shuffled == [t.id for t in select_tasks(many, shuffle=True)]
    assert [t.id for t in select_tasks(many, pattern="t[0-4]", window=":2")] == ["t0", "t1"]
    with pytest.raises(TaskFileError, match="not A:B"):
        select_tasks(many, window="3")


def test_unbiased_pass_at_k() -> None:
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 1, 1) == pytest.approx(0.2)
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - (4 * 3) / (5 * 4))  # 1 - C(4,2)/C(5,2) = 0.4
    assert pass_at_k(4, 2, 3) == 1.0  # any 3 of 4 include a pass


def _pids_in(folder: Path) -> set[int]:
    """Host processes whose working folder is inside ``folder``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).is_relative_to(folder):
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
def test_a_score_dies_with_its_killed_worker(tmp_path: Path, sandbox: str) -> None:
    from roder_core.brokers.sandbox import probe_bubblewrap

    if sandbox != "off" and not probe_bubblewrap().works:
        pytest.skip("bubblewrap cannot run here")
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {"id": "hang", "prompt": "p", "score": "touch score-started; sleep 300", "score_timeout": 600},
        ],
    )
    batch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roder_tui.cli",
            "batch",
            str(tasks),
            "--out",
            str(tmp_path / "out"),
            "--workers",
            "1",
            "--provider",
            "mock",
            "--no-progress",
            "--attempts",
            "1",
            "--sandbox",
            sandbox,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def score_started() -> list[Path]:
        assert batch.poll() is None, batch.communicate()
        return [p for pid in pool_workers(batch.pid) for s in scratch_of(pid) for p in s.glob("workspace/score-started")]

    started = wait_until(score_started, "the score to start", timeout=120)
    scratch = started[0].parent.parent
    score_processes = _pids_in(scratch)
    assert score_processes, "the score's processes run in the scratch copy"
    victim = int(scratch.name.split("-")[2])
    os.kill(victim, signal.SIGKILL)
    _out, err = batch.communicate(timeout=120)
    wait_until(lambda: not _pids_in(scratch), "the score to end with its worker")
    assert not scratch.exists()
    assert batch.returncode == 1
    assert "lost" in err  # one attempt allowed: recorded as infra_failure
    lost = result(tmp_path / "out", "hang")
    assert lost["failure_cause"] == "infra_failure"
    assert lost["attempts"] == 1


def test_a_lost_attempt_is_on_disk_before_its_retry_and_survives_a_killed_driver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = write_script(tmp_path / "slow.json", [{"text": "x" * 30, "chunk_size": 3, "delay_ms": 100}])
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"id": "t", "prompt": "p", "env": {"RODER_MOCK_SCRIPT": str(slow)}}])
    out = tmp_path / "out"
    command = [sys.executable, "-m", "roder_tui.cli", "batch", str(tasks), "--out", str(out), "--workers", "1"]
    batch = subprocess.Popen(
        [*command, "--provider", "mock", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def in_a_rollout() -> int | None:
        assert batch.poll() is None, batch.communicate()
        return next((pid for pid in pool_workers(batch.pid) if scratch_of(pid)), None)

    first = wait_until(in_a_rollout, "a worker inside a rollout", timeout=120)
    os.kill(first, signal.SIGKILL)
    attempts = out / "rollouts" / "t" / "0.attempts.json"
    wait_until(attempts.exists, "the lost attempt on disk")
    recorded = json.loads(attempts.read_text())["discarded"]
    assert [a["attempt"] for a in recorded] == [1] and "SIGKILL" in recorded[0]["error"]
    wait_until(lambda: (pid := in_a_rollout()) is not None and pid != first, "the retry inside a rollout", timeout=120)
    os.kill(batch.pid, signal.SIGKILL)  # the driver dies while the retry runs
    batch.communicate()
    assert not (out / "rollouts" / "t" / "0" / "result.json").exists()

    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--provider", "mock", "--no-progress")
    assert code == 0, err
    finished = result(out, "t")
    assert finished["passed"]
    assert finished["attempts"] == 2
    assert [a["attempt"] for a in finished["discarded_attempts"]] == [1]
    assert "SIGKILL" in finished["discarded_attempts"][0]["error"]
    assert not attempts.exists()
