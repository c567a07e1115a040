"""A worker process runs rollout after rollout and reuses what does not depend on the rollout
(the installed extensions' factories): nothing one rollout did may reach the next one in the
same worker: not its files, its saved memories or its thread."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.batch.conftest import result, run_cli, steps, write_jsonl, write_script


def test_two_rollouts_in_one_worker_see_independent_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "readme.txt").write_text("base\n")
    first: list[dict[str, Any]] = [
        {
            "text": "Leaving traces.",
            "tool_calls": [
                {"name": "write", "arguments": {"path": "leak.txt", "content": "from the first rollout\n"}},
                {"name": "memory_save", "arguments": {"text": "leaked-note-7341", "scope": "project"}},
                {"name": "bash", "arguments": {"command": "echo first > shell-note.txt"}},
            ],
        },
        {"text": "Done."},
    ]
    second: list[dict[str, Any]] = [
        {
            "text": "Looking around.",
            "tool_calls": [
                {"name": "memory_search", "arguments": {"query": "leaked-note-7341"}},
                {
                    "name": "bash",
                    "arguments": {"command": "ls -a"},
                },
            ],
        },
        {"text": "Done."},
    ]
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "first",
                "prompt": "Leave traces.",
                "workspace": str(source),
                "score": "test -e leak.txt",
                "env": {"RODER_MOCK_SCRIPT": str(write_script(tmp_path / "first.json", first))},
            },
            {
                "id": "second",
                "prompt": "Look around.",
                "workspace": str(source),
                "score": "test ! -e leak.txt",
                "env": {"RODER_MOCK_SCRIPT": str(write_script(tmp_path / "second.json", second))},
            },
        ],
    )
    out = tmp_path / "out"
    code, _stdout, stderr = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--provider", "mock", "--no-progress")
    assert code == 0, stderr
    one, two = result(out, "first"), result(out, "second")
    assert one["passed"] and two["passed"], (one, two)
    assert one["host"]["pid"] == two["host"]["pid"]  # the same worker ran both, one after the other
    assert one["thread_id"] != two["thread_id"]
    left = {s["name"]: s["result"] for s in steps(out, "first") if s["type"] == "tool_call"}
    assert sorted(left) == ["bash", "memory_save", "write"]
    assert not any(r["isError"] for r in left.values()), left  # the traces were really left
    results = {s["name"]: s["result"] for s in steps(out, "second") if s["type"] == "tool_call"}
    assert results["memory_search"]["isError"] is False
    assert "leaked-note-7341" not in json.dumps(results["memory_search"])
    listing = results["bash"]["output"] if "output" in results["bash"] else json.dumps(results["bash"])
    assert "readme.txt" in listing and "leak.txt" not in listing and "shell-note.txt" not in listing
    thread = (out / "rollouts/second/0/thread.jsonl").read_text()
    assert one["thread_id"] not in thread and "Leave traces." not in thread
    assert "leak.txt" not in (out / "rollouts/second/0/workspace.diff").read_text()


def test_a_finished_rollouts_folder_leaves_its_name_at_once_and_a_dead_workers_is_swept(tmp_path: Path) -> None:
    """The removal runs in the background, so the folder is renamed first: a rollout in progress
    is never mistaken for it; one a killed worker had not finished removing is swept like the
    folders of its rollouts in progress."""
    import subprocess
    import sys
    import tempfile
    import threading

    from roder_core.batch.worker import DISCARDED_PREFIX, SCRATCH_PREFIX, discard_scratch, sweep_orphaned_scratch

    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    (scratch / "workspace").mkdir()
    (scratch / "workspace" / "file.txt").write_text("x\n")
    discard_scratch(scratch)
    assert not scratch.exists()
    for thread in [t for t in threading.enumerate() if t.name == "roder-discard"]:
        thread.join()
    assert not list(Path(tempfile.gettempdir()).glob(f"{DISCARDED_PREFIX}{os.getpid()}-*"))

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    left = Path(tempfile.gettempdir()) / f"{DISCARDED_PREFIX}{dead.stdout.strip()}-left"
    (left / "workspace").mkdir(parents=True)
    sweep_orphaned_scratch()
    assert not left.exists()
