"""Helpers for batch tests: task files, mock scripts, running the CLI, normalizing outputs."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from roder_tui.cli import main

#: Values that differ between two runs of the same rollout (ids, clocks, scratch paths).
VOLATILE_KEYS = {
    "id",
    "threadId",
    "thread_id",
    "turnId",
    "itemId",
    "callId",
    "call_id",
    "approvalId",
    "ts",
    "createdAt",
    "startedAt",
    "completedAt",
    "updatedAt",
    "durationMs",
    "duration_ms",
    "timings",
    "cwd",
    "at",
    "host",
    "timestamp",
}
# Rollout scratch folders live under the temp dir, which TMPDIR may move away from /tmp.
_VOLATILE_TEXT = re.compile(
    r"(thr|turn|item|call|appr)_[0-9a-f]{6,}|" + re.escape(tempfile.gettempdir()) + r"/roder-rollout-[A-Za-z0-9_-]+"
)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_script(path: Path, steps: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"steps": steps}))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, str):
        return _VOLATILE_TEXT.sub("<id>", value)
    return value


def normalized_outputs(out: Path, skip_tasks: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every rollout file of a batch folder with run-specific values removed."""
    files: dict[str, Any] = {}
    for path in sorted((out / "rollouts").rglob("*")):
        if not path.is_file() or path.relative_to(out / "rollouts").parts[0] in skip_tasks:
            continue
        key = str(path.relative_to(out))
        text = path.read_text()
        if path.suffix == ".json":
            files[key] = normalize(json.loads(text))
        elif path.suffix == ".jsonl":
            files[key] = [normalize(json.loads(line)) for line in text.splitlines()]
        else:
            files[key] = normalize(text)
    return files


def result(out: Path, task: str, index: int = 0) -> dict[str, Any]:
    return json.loads((out / "rollouts" / task / str(index) / "result.json").read_text())


def steps(out: Path, task: str, index: int = 0) -> list[dict[str, Any]]:
    """The trajectory steps of a rollout (every turn's, in order)."""
    trajectory = json.loads((out / "rollouts" / task / str(index) / "trajectory.json").read_text())
    return [step for turn in trajectory["turns"] for step in turn["steps"]]


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (all its threads')."""
    found: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.update(int(child) for child in handle.read().split())
    except OSError:
        pass
    return found


def pool_workers(pid: int) -> set[int]:
    """The batch driver's pool worker processes (not multiprocessing's resource tracker)."""
    found = set()
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                if b"spawn_main" in handle.read():
                    found.add(child)
        except OSError:
            pass
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] not in "ZX"
    except OSError:
        return False


def scratch_of(pid: int) -> list[Path]:
    """The scratch copies of a worker's rollout: there while it is inside one."""
    return list(Path(tempfile.gettempdir()).glob(f"roder-rollout-{pid}-*"))
