"""Resumption: a batch killed mid-run records nothing half-written and the next run finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.batch.outputs import BatchFolder, BatchFolderError
from roder_core.batch.tasks import parse_tasks
from roder_core.batch.worker import RunSettings
from tests.batch.conftest import alive, pool_workers, result, run_cli, scratch_of, write_jsonl, write_script
from tests.builders import wait_until


def _batch(tasks: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "roder_tui.cli",
        "batch",
        str(tasks),
        "--out",
        str(out),
        "--workers",
        "1",
        "--provider",
        "mock",
        "--no-progress",
    ]


def test_a_killed_batch_resumes_where_it_stopped(tmp_path: Path) -> None:
    # Each rollout streams for about a second, so the kill lands while later ones are pending.
    slow = write_script(tmp_path / "slow.json", [{"text": "x" * 40, "chunk_size": 4, "delay_ms": 100}])
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [{"id": f"t{i}", "prompt": f"task {i}", "env": {"RODER_MOCK_SCRIPT": str(slow)}} for i in range(4)],
    )
    out = tmp_path / "out"
    first = subprocess.Popen(_batch(tasks, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def finished() -> list[Path]:
        assert first.poll() is None, first.communicate()
        return list(out.glob("rollouts/*/0/result.json"))

    wait_until(finished, "a finished rollout", timeout=60)
    workers = pool_workers(first.pid)
    assert workers, "the local backend runs rollouts in worker processes"
    first.send_signal(signal.SIGKILL)
    first.wait()
    first.stdout.close()  # type: ignore[union-attr]
    first.stderr.close()  # type: ignore[union-attr]
    # Workers die with the driver (no orphans keep burning CPU).
    wait_until(lambda: not any(alive(pid) for pid in workers), "the workers to end with their driver")
    recorded = {p.parent.parent.name: p.read_bytes() for p in out.glob("rollouts/*/0/result.json")}
    assert 1 <= len(recorded) < 4

    second = subprocess.run(_batch(tasks, out), capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"{len(recorded)} already recorded, {4 - len(recorded)} to run" in second.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"] == 4
    assert summary["passed"] == 4
    assert summary["skipped_finished"] == len(recorded)
    assert summary["ran_now"] == 4 - len(recorded)
    for task, before in recorded.items():  # finished rollouts were not run again
        assert (out / "rollouts" / task / "0" / "result.json").read_bytes() == before
    assert not list(out.glob("rollouts/*/*.tmp-*"))

    third = subprocess.run(_batch(tasks, out), capture_output=True, text=True, timeout=120)
    assert third.returncode == 0
    assert "4 already recorded, 0 to run" in third.stderr


def test_plan_sweeps_half_written_rollouts_and_reruns_changed_tasks(tmp_path: Path) -> None:
    folder = BatchFolder(tmp_path / "out")
    settings = RunSettings(provider="mock", model="mock")
    folder.claim(settings, "tasks.jsonl")
    [task] = parse_tasks(['{"id": "t", "prompt": "one"}'], "x", tmp_path)
    done_dir = folder.rollout_dir("t", 0)
    done_dir.mkdir(parents=True)
    (done_dir / "result.json").write_text(json.dumps({"task_id": "t", "rollout": 0, "task_digest": task.digest()}))
    staging = done_dir.parent / "1.tmp-4242"
    staging.mkdir()
    todo, done = folder.plan([task], 2, settings, {})
    assert [s.key for s in todo] == [("t", 1)]
    assert len(done) == 1
    assert not staging.exists()
    [changed] = parse_tasks(['{"id": "t", "prompt": "two"}'], "x", tmp_path)
    todo, done = folder.plan([changed], 1, settings, {})
    assert [s.key for s in todo] == [("t", 0)]
    assert done == []
    assert result(tmp_path / "out", "t")["task_digest"] == task.digest()  # replaced only when re-recorded


def test_an_output_folder_of_other_settings_is_refused(tmp_path: Path) -> None:
    folder = BatchFolder(tmp_path / "out")
    folder.claim(RunSettings(provider="mock", model="mock"), "tasks.jsonl")
    with pytest.raises(BatchFolderError, match="model: 'mock' before, 'mock-large' now"):
        BatchFolder(tmp_path / "out").claim(RunSettings(provider="mock", model="mock-large"), "tasks.jsonl")


def test_ctrl_c_stops_the_batch_promptly(tmp_path: Path) -> None:
    slow = write_script(tmp_path / "slow.json", [{"text": "y" * 200, "chunk_size": 2, "delay_ms": 100}])
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl", [{"id": f"t{i}", "prompt": "p", "env": {"RODER_MOCK_SCRIPT": str(slow)}} for i in range(4)]
    )
    out = tmp_path / "out"
    command = _batch(tasks, out)
    command[command.index("--workers") + 1] = "2"
    batch = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def both_in_a_rollout() -> bool:
        workers = pool_workers(batch.pid)
        return len(workers) == 2 and all(scratch_of(pid) for pid in workers)

    wait_until(both_in_a_rollout, "two workers inside a rollout", timeout=60)
    workers = pool_workers(batch.pid)
    os.killpg(batch.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    _out, err = batch.communicate(timeout=60)
    assert batch.returncode == 130
    assert "interrupted; run the same command again to resume" in err
    assert not [pid for pid in workers if alive(pid)]
    assert not list(out.glob("rollouts/*/*/result.json"))  # the running 20-second rollouts were stopped, not waited for
    assert json.loads((out / "summary.json").read_text())["rollouts"] == 0


def test_a_batch_folder_from_before_the_newer_settings_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Settings a folder predates (the carried provider, model and runner tables) count as their
    defaults, so an older batch resumes; a setting that really changed is still refused."""
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"id": "t", "prompt": "p"}])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "mock")
    assert code == 0, err
    recorded = json.loads((out / "batch.json").read_text())
    for newer in ("provider_table", "model_tables", "runner_table"):
        del recorded["settings"][newer]
    (out / "batch.json").write_text(json.dumps(recorded))
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "mock")
    assert code == 0, err
    assert "1 already recorded, 0 to run" in err
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--no-progress", "--provider", "mock", "--deadline", "30")
    assert code == 2 and "deadline: None before, 30.0 now" in err
