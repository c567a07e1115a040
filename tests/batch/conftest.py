"""Helpers for batch tests: task files, mock scripts, running the CLI, normalizing outputs."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
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


def batch_of_scripts(
    capsys: pytest.CaptureFixture[str],
    folder: Path,
    cases: dict[str, list[dict[str, Any]]],
    task: dict[str, Any],
    workers: int = 1,
) -> Path:
    """Run ``roder batch`` with the mock provider over one task per case (``task`` with the id
    and the script of the case: one answer making the case's tool calls, then "Done."); returns
    the batch's output folder."""
    rows = []
    for name, calls in cases.items():
        script = write_script(folder / f"{name}.json", [{"text": "Working.", "tool_calls": calls}, {"text": "Done."}])
        rows.append({"prompt": "Make add add.", **task, "id": name, "env": {"RODER_MOCK_SCRIPT": str(script)}})
    tasks = write_jsonl(folder / "tasks.jsonl", rows)
    out = folder / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", str(workers), "--no-progress", "--provider", "mock")
    assert code == 0, err
    return out


def normalize(value: Any) -> Any:
    if isinstance(value, dict):
        # keys too: a thread's file ledger keys its digests by the rollout's absolute paths
        return {_VOLATILE_TEXT.sub("<id>", k): normalize(v) for k, v in value.items() if k not in VOLATILE_KEYS}
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
    """The batch driver's pool worker processes: its fork server's children (spawned workers
    are its own children running ``spawn_main``), never multiprocessing's resource tracker."""
    found = set()
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        if b"multiprocessing.forkserver" in command:
            found |= children(child)
        elif b"spawn_main" in command:
            found.add(child)
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


#: What pytest needs to run (its own packages and their dependencies), nothing else: a score
#: that imports the whole test environment's plugins starts many times slower.
LEAN_PACKAGES = ("pytest", "_pytest", "py.py", "pluggy", "iniconfig", "packaging", "pygments")


@pytest.fixture(scope="session")
def lean_pytest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python environment with pytest alone (its packages copied from this one), its
    ``pytest`` entry point included: ``bin/python``, ``bin/pytest``."""
    import shutil
    import subprocess
    import sys
    import sysconfig

    env = tmp_path_factory.mktemp("lean") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    packages = env / "lean-packages"  # inside the environment: a score shown it sees them
    packages.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.split("-", 1)[0] if entry.name.endswith(".dist-info") else entry.name
        # Copied, not linked: a link into a checkout under /tmp dangles in the score's private /tmp.
        if name in LEAN_PACKAGES and entry.is_dir():
            shutil.copytree(entry, packages / entry.name)
        elif name in LEAN_PACKAGES:
            shutil.copy2(entry, packages / entry.name)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (env / "lib" / version / "site-packages" / "lean.pth").write_text(f"{packages}\n")
    script = env / "bin" / "pytest"
    script.write_text(f"#!{env / 'bin' / 'python'}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    script.chmod(0o755)
    return env


@pytest.fixture(scope="session")
def ray_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One local Ray instance for every Ray test (it takes seconds to start), started with
    no provider keys and a throwaway RODER_HOME in its environment. Ray is the optional ``ray``
    extra, not part of ``test``: without it the Ray tests skip, saying so (.ci/run installs it)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' runs the Ray backend tests")

    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.endswith("_API_KEY") or key.startswith("RODER_") or key.endswith("_BASE_URL"):
                patch.delenv(key)
        patch.setenv("RODER_HOME", str(tmp_path_factory.mktemp("ray-home")))
        _start_ray(ray)
    yield
    ray.shutdown()


def _start_ray(ray: Any, attempts: int = 5) -> None:
    """``ray.init`` gives its raylet a fixed 30 s to register, which a loaded machine (the suite
    beside two CPU burners) can exceed; a second start finds its files cached and is quicker."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            return
        except Exception as exc:  # Ray raises a bare Exception for this timeout
            ray.shutdown()
            if attempt == attempts or "timed out during startup" not in str(exc):
                raise
