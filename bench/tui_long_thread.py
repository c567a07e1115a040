"""Open time and memory of a 2,000-message thread in the app, and the cost of moving through it.

    .venv/bin/python bench/tui_long_thread.py [--messages 2000] [--runs 3] [--baseline DIR]

The thread (user questions and markdown answers with a code block each) is written through the
real runtime and JSONL store, then opened in a fresh process with ``-r ID`` (headless, 120x40).
Reported: time from app start to the transcript shown, peak RSS against the same app opening an
empty thread, and the time to jump to the start, back to the end, and to load older entries on
scroll-up. Each figure comes with the process's CPU time for the same span (from interpreter
start for the open), which a loaded machine inflates far less than wall time. Medians of
``--runs``; ``--baseline DIR`` (``git archive REV | tar -x -C DIR``) opens the same thread with
another checkout's app, alternating run by run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
if os.environ.get("RODER_BENCH_APP"):  # the app of another checkout (the tests' helpers stay ours)
    sys.path[0:0] = [os.environ["RODER_BENCH_APP"], os.path.join(os.environ["RODER_BENCH_APP"], "extensions")]


async def child(workspace: Path, thread_id: str | None) -> dict[str, float]:
    from tests.tui.helpers import make_app

    class Env:
        def setenv(self, key: str, value: str) -> None:
            os.environ[key] = value

    started = time.perf_counter()
    app = make_app(workspace, None, Env(), resume=thread_id)
    out: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        await pilot.pause()
        out["open_s"] = time.perf_counter() - started
        out["open_cpu_s"] = time.process_time()
        out["entries"] = len(app.transcript.model.entries)
        out["mounted"] = sum(1 for e in app.transcript.model.entries if e.widget is not None)
        if thread_id:
            t, c = time.perf_counter(), time.process_time()
            await app.transcript.action_jump_start()
            await pilot.pause()
            out["jump_start_ms"] = (time.perf_counter() - t) * 1000
            out["jump_start_cpu_ms"] = (time.process_time() - c) * 1000
            t = time.perf_counter()
            await app.transcript.action_jump_end()
            await pilot.pause()
            out["jump_end_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await app.transcript.load_earlier()
            await pilot.pause()
            out["load_20_earlier_ms"] = (time.perf_counter() - t) * 1000
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(home: str, workspace: Path, thread_id: str | None, app: Path | None) -> dict[str, float]:
    env = {**os.environ, "RODER_HOME": home}
    if app is not None:
        env["RODER_BENCH_APP"] = str(app)
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(workspace), thread_id or ""],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


ROWS = [
    ("open to transcript shown, empty thread (s)", "empty", "open_s"),
    ("CPU until then, empty thread (s, whole process)", "empty", "open_cpu_s"),
    ("open to transcript shown, 2,000 messages (s)", "long", "open_s"),
    ("CPU until then, 2,000 messages (s, whole process)", "long", "open_cpu_s"),
    ("peak RSS, empty thread (MB)", "empty", "peak_rss_mb"),
    ("peak RSS, 2,000 messages (MB)", "long", "peak_rss_mb"),
    ("mounted entries of 2,000", "long", "mounted"),
    ("jump to start, `home` (ms)", "long", "jump_start_ms"),
    ("CPU of the jump (ms)", "long", "jump_start_cpu_ms"),
    ("jump to end, `end` (ms)", "long", "jump_end_ms"),
    ("load 20 older entries on scroll-up (ms)", "long", "load_20_earlier_ms"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout whose app opens the same thread, alternating")
    parser.add_argument("--child", nargs=2)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(asyncio.run(child(Path(opts.child[0]), opts.child[1] or None))))
        return
    home = tempfile.mkdtemp(prefix="roder-tui-bench-home-")
    os.environ["RODER_HOME"] = home
    workspace = Path(tempfile.mkdtemp(prefix="roder-tui-bench-ws-"))
    from tests.tui.helpers import write_long_thread

    t = time.perf_counter()
    thread_id = asyncio.run(write_long_thread(workspace, opts.messages))
    written = time.perf_counter() - t
    variants: dict[str, Path | None] = {"this": None}
    if opts.baseline:
        variants = {"baseline": opts.baseline.resolve(), **variants}
    print(f"thread: {opts.messages} messages written in {written:.1f} s; load average before {_load()}")
    results: dict[str, dict[str, list[dict[str, float]]]] = {name: {"empty": [], "long": []} for name in variants}
    for _ in range(opts.runs):
        for name, app in variants.items():
            results[name]["empty"].append(run_child(home, workspace, None, app))
            results[name]["long"].append(run_child(home, workspace, thread_id, app))
    print(f"load average after {_load()}; medians of {opts.runs}")
    print("| | " + " | ".join(variants) + " |")
    print("|---|" + "---|" * len(variants))
    for label, kind, key in ROWS:
        cells = [statistics.median(r[key] for r in results[name][kind]) for name in variants]
        print(f"| {label} | " + " | ".join(f"{c:.2f}" if c < 10 else f"{c:.0f}" for c in cells) + " |")


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
