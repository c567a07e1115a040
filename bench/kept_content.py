"""What noting a rollout's git-ignored content costs: one survey of a 100,000-file ignored tree
(the stamp manifest a score compares when the tree is too large to copy), against the two walks
the guard made before (state, then size) and against a small repository's whole record.

    python bench/kept_content.py [--files 100000] [--runs 5] [--baseline-ref 21583a6]

Measured in the same run: ``runner_guard.survey`` of ``node_modules`` (``--files`` empty files,
100 to a folder, like an installed tree), wall and CPU; the previous ``_state`` and ``_size`` of
the same tree, loaded from ``--baseline-ref`` (the commit before the survey); the system calls
each makes (``strace -c``, when installed: load-proof); and ``RunnerGuard.record`` plus ``keep``
of a ten-file repository with a small ignored folder (the per-rollout cost on small repos). The
trees live on tmpfs when /dev/shm is writable, so the figure is the walk and not the disk.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roder_core.batch.runner_guard import RunnerGuard, survey  # noqa: E402


def build(workspace: Path, files: int) -> None:
    """``files`` empty files, 100 to a folder, under an ignored ``node_modules``."""
    workspace.mkdir(parents=True)
    (workspace / ".gitignore").write_text("node_modules/\n")
    for index in range(files):
        if index % 100 == 0:
            folder = workspace / "node_modules" / f"pkg{index // 100:05}"
            folder.mkdir(parents=True)
        (folder / f"f{index % 100}.js").touch()


def baseline_module(ref: str, scratch: Path) -> ModuleType | None:
    """``runner_guard`` as it was at ``ref`` (None: git does not have it)."""
    done = subprocess.run(["git", "show", f"{ref}:roder_core/batch/runner_guard.py"], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:
        return None
    path = scratch / "runner_guard_before.py"
    path.write_bytes(done.stdout)
    spec = importlib.util.spec_from_file_location("runner_guard_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def timed(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``action`` over ``runs``."""
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        action()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def syscalls(code: str) -> dict[str, int] | None:
    """System calls of one run of ``code`` beyond an interpreter that imports the same modules
    (``strace -f -c``); None without strace."""
    if shutil.which("strace") is None:
        return None

    def count(snippet: str) -> dict[str, int]:
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as report:
            subprocess.run(
                ["strace", "-f", "-c", "-o", report.name, sys.executable, "-c", snippet],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            counts: dict[str, int] = {}
            for line in report.read().splitlines():
                parts = line.split()
                if len(parts) >= 5 and parts[-1].isidentifier() and parts[3].isdigit():
                    counts[parts[-1]] = int(parts[3])
            return counts

    setup = code.split("\n##\n")[0]
    empty, full = count(setup), count(code.replace("\n##\n", "\n"))
    return {name: full.get(name, 0) - empty.get(name, 0) for name in full if full.get(name, 0) - empty.get(name, 0) > 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-ref", default="21583a6", help="the commit whose runner_guard walked twice")
    args = parser.parse_args()
    shm = Path("/dev/shm")
    scratch = Path(tempfile.mkdtemp(prefix="roder-bench-kept-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        large = scratch / "large"
        build(large, args.files)
        tree = large / "node_modules"
        print(f"load average {os.getloadavg()[0]:.1f}; {args.files:,} files in {tree.parent.parent}")
        figures: dict[str, object] = {}
        wall, cpu = timed(lambda: survey(tree), args.runs)
        tracemalloc.start()
        found = survey(tree)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        figures["survey"] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "files": found.files, "held_bytes": held}
        print(
            f"survey (one walk, state and size): {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU, {found.files:,} files, "
            f"{held / 2**20:.1f} MiB held"
        )
        before = baseline_module(args.baseline_ref, scratch)
        if before is not None:
            wall, cpu = timed(lambda: (before._state(tree), before._size(tree)), args.runs)
            figures["before"] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
            print(f"before ({args.baseline_ref}: _state, then _size): {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU")
        header = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; import roder_core.batch.runner_guard"
        counted = syscalls(f"{header}\n##\nroder_core.batch.runner_guard.survey(Path({str(tree)!r}))")
        if counted is not None:
            figures["survey_syscalls"] = counted
            print(f"survey system calls: {json.dumps(counted)}")
        if before is not None and counted is not None:
            path = scratch / "runner_guard_before.py"
            old = (
                f"import importlib.util, sys; from pathlib import Path; sys.path.insert(0, {str(ROOT)!r}); "
                f"s = importlib.util.spec_from_file_location('b', {str(path)!r}); b = importlib.util.module_from_spec(s); "
                f"sys.modules['b'] = b; s.loader.exec_module(b)\n##\nb._state(Path({str(tree)!r})); b._size(Path({str(tree)!r}))"
            )
            figures["before_syscalls"] = syscalls(old)
            print(f"before system calls: {json.dumps(figures['before_syscalls'])}")

        small = scratch / "small"
        small.mkdir()
        for index in range(10):
            (small / f"m{index}.py").write_text("x = 1\n")
        (small / ".gitignore").write_text("build/\n")
        (small / "build").mkdir()
        (small / "build" / "out.txt").write_text("built\n")

        def record_small() -> None:
            store = scratch / f"store-{time.perf_counter_ns()}"
            guard = RunnerGuard(small, store, score="python -c pass")
            guard.record()
            guard.keep(["build/"])
            shutil.rmtree(store, ignore_errors=True)

        wall, cpu = timed(record_small, args.runs * 4)
        figures["small_record_and_keep"] = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}
        print(f"a ten-file repository's record and keep (one ignored folder): {wall * 1000:.2f} ms wall, {cpu * 1000:.2f} ms CPU")
        print(json.dumps(figures))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
