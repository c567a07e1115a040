"""The first resume of a long thread: `roder -p hi -r ID` on a thread no process has loaded yet.

    python bench/first_resume.py [--runs 2] [--events 100000] [--compact-every 50] --baseline DIR

Each run writes a fresh thread of ``--events`` events (bench/sessions.py's 14-event coding
turns; every ``--compact-every`` turns one opens with a compaction, as the runtime's automatic
compaction leaves a thread that outgrew the model's window) with the JSONL store of each
checkout, in a process of its own, then resumes it once with that same checkout: the first
resume, which is the one that used to fold the whole file. Interleaved run by run with the
baseline (`git archive main | tar -x -C DIR`), so both see the same load. Reported per
variant: the writer's CPU and peak RSS (where the snapshot is now built) and the first
resume's wall, CPU and peak RSS, with a fresh `roder -p hi` for reference and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oneshot import load_average, measure, run_once, variants_with

ROOT = Path(__file__).resolve().parents[1]

WRITER = """
import asyncio, sys
sys.path.insert(0, {bench!r})
from roder_ext_jsonl_store import JsonlThreadStore
from sessions import write_thread
from roder_core.settings.paths import RoderPaths
store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
thread_id = asyncio.run(write_thread(store, {cwd!r}, {events}, "long", compact_every={every}))
open({out!r}, "w").write(thread_id)
"""


def write(env: dict[str, str], ws: Path, events: int, every: int) -> tuple[str, float, float]:
    """Write a thread in a process of its own with the variant's store: id, CPU s, peak MiB."""
    out = Path(env["RODER_HOME"]) / "thread-id"
    code = WRITER.format(bench=str(ROOT / "bench"), cwd=str(ws), events=events, every=every, out=str(out))
    result = measure([sys.executable, "-c", code], env, ws)
    if result["rc"] != 0:
        raise SystemExit(f"writing the thread failed: {result['err']}")
    return out.read_text(), float(result["cpu"]), float(result["peak"])  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--compact-every", type=int, default=50, help="turns between compactions (0: never)")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, run interleaved")
    opts = parser.parse_args()
    variants = variants_with(opts.baseline)
    rows: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roder-first-resume-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        base = {k: v for k, v in os.environ.items() if k not in ("RODER_MOCK_SCRIPT", "PYTHONPATH")}
        roder = [sys.executable, "-m", "roder_tui.cli"]
        before = load_average()
        for run in range(opts.runs):
            order = list(variants) if run % 2 == 0 else list(reversed(variants))
            for variant in order:
                home = Path(tmp) / f"home-{variant}-{run}"
                home.mkdir()
                env = {**base, "RODER_HOME": str(home), "RODER_NO_HOST": "1", **variants[variant]}
                thread_id, write_cpu, write_peak = write(env, ws, opts.events, opts.compact_every)
                wall, cpu, peak = run_once([*roder, "-p", "hi", "-r", thread_id, "--provider", "mock"], env, ws)
                fresh = run_once([*roder, "-p", "hi", "--provider", "mock"], env, ws)
                row = rows.setdefault(variant, {})
                for key, value in (
                    ("write CPU", write_cpu),
                    ("write MiB", write_peak),
                    ("resume wall", wall),
                    ("resume CPU", cpu),
                    ("resume MiB", peak),
                    ("fresh CPU", fresh[1]),
                ):
                    row.setdefault(key, []).append(value)
                print(f"run {run + 1} {variant}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in row.items()), flush=True)
        after = load_average()
    every = f"a compaction every {opts.compact_every} turns" if opts.compact_every else "never compacted"
    print(f"\n{opts.events} events ({every}), {opts.runs} runs each; load average before {before}, after {after}")
    keys = list(next(iter(rows.values())))
    print(f"{'variant':<9}" + "".join(f"{k:>13}" for k in keys) + "   (medians; MiB: peak)")
    for variant, row in rows.items():
        print(f"{variant:<9}" + "".join(f"{statistics.median(row[k]):>13.2f}" for k in keys))


if __name__ == "__main__":
    main()
