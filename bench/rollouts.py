"""Batch throughput: rollouts per second of `roder batch` with the mock engine, local vs Ray.

Every rollout is a full one: copy a small workspace, record the baseline, start a runtime, run a
scripted two-call turn (the model writes a file with the `write` tool, then answers), take the
diff, run the score command sandboxed (bubblewrap, as every batch score runs when the machine
allows it; the table says which) with a protected file reverted first, and record everything.
Runs the real `roder batch` in a subprocess, offline, with a fresh RODER_HOME and output folder
per run. "Wall" includes everything a user
waits for (interpreter and worker start, and for Ray the local instance's start); the marginal
rate, (n_large - n_small) / (t_large - t_small), is the steady-state throughput without start-up.

    python bench/rollouts.py [--workers 2] [--small 40] [--large 160] [--backends local,ray]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = {
    "steps": [
        {
            "text": "Writing the answer.",
            "tool_calls": [{"name": "write", "arguments": {"path": "answer.txt", "content": "42\n"}}],
        },
        {"text": "The answer is in answer.txt."},
    ]
}


def make_tasks(root: Path, count: int) -> Path:
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    for i in range(20):
        (workspace / f"module_{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    tasks = root / f"tasks-{count}.jsonl"
    with tasks.open("w") as handle:
        for i in range(count):
            handle.write(
                json.dumps(
                    {
                        "id": f"task-{i:04d}",
                        "prompt": f"Write the answer for case {i}.",
                        "workspace": str(workspace),
                        "score": "grep -q 42 answer.txt",
                        "protect": ["module_0.py"],
                        "env": {"RODER_MOCK_SCRIPT": str(script)},
                    }
                )
                + "\n"
            )
    return tasks


def run_batch(root: Path, tasks: Path, backend: str, workers: int) -> tuple[float, dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("RODER_")}
    env["RODER_HOME"] = str(Path(tempfile.mkdtemp(prefix="home-", dir=root)))
    out = Path(tempfile.mkdtemp(prefix=f"out-{backend}-", dir=root))
    cmd = [
        sys.executable,
        "-m",
        "roder_tui.cli",
        "batch",
        str(tasks),
        "--out",
        str(out),
        "--provider",
        "mock",
        "--workers",
        str(workers),
        "--backend",
        backend,
        "--no-progress",
    ]
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"roder batch failed ({backend}): {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    if summary["passed"] != summary["rollouts"]:
        raise SystemExit(f"{backend}: {summary['failed']} rollouts failed: {summary['failures'][:3]}")
    first = json.loads(next((out / "rollouts").glob("*/0/result.json")).read_text())
    summary["score_sandbox"] = first.get("score_sandbox")
    return wall, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--small", type=int, default=40)
    parser.add_argument("--large", type=int, default=160)
    parser.add_argument("--backends", default="local,ray")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, workers={args.workers}")
    print(f"{'backend':8} {'rollouts':>8} {'wall s':>8} {'rollouts/s':>11}   marginal rollouts/s")
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as tmp:
        root = Path(tmp)
        small, large = make_tasks(root, args.small), make_tasks(root, args.large)
        for backend in args.backends.split(","):
            t_small, _ = run_batch(root, small, backend, args.workers)
            t_large, summary = run_batch(root, large, backend, args.workers)
            marginal = (args.large - args.small) / (t_large - t_small) if t_large > t_small else float("nan")
            print(f"{backend:8} {args.small:>8} {t_small:>8.2f} {args.small / t_small:>11.1f}")
            print(
                f"{backend:8} {args.large:>8} {t_large:>8.2f} {args.large / t_large:>11.1f}   {marginal:.1f}"
                f"   (mean agent time {summary['agent_time_s']['mean']:.3f} s, score sandbox "
                f"{summary['score_sandbox']})"
            )


if __name__ == "__main__":
    main()
