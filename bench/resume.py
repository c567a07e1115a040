"""What resuming a long thread costs, whole process: `roder -p hi -r ID` minus `roder -p hi`.

    python bench/resume.py [--runs 7] [--events 10000,100000] [--baseline DIR]

For each size a thread of realistic 14-event coding turns is written through the JSONL store
(bench/sessions.py's writer), then warmed: resumed twice with this checkout (and once with the
baseline), as a user's first resumes would. The first resume of a thread that outgrew the
mock model's window compacts it, as it would for a user; the second leaves the recent
snapshot. Then, run by run and interleaved with the baseline (`git archive main | tar -x -C
DIR`) so both see the same load: a fresh `roder -p hi` and `roder -p hi -r ID`, each a new
process on the mock engine. Reported: medians of wall and CPU (user + system) time, peak RSS,
and the resume overhead (resume minus fresh), with the load average before and after. Every
resume appends a turn, as a user's would.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oneshot import checkout_env, compile_bytecode, load_average, run_once, write_big_thread

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--events", default="10000,100000", help="comma-separated thread sizes")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, run interleaved")
    opts = parser.parse_args()
    compile_bytecode(ROOT)
    variants: dict[str, dict[str, str]] = {"this": {}}
    if opts.baseline:
        variants["baseline"] = checkout_env(opts.baseline)
    with tempfile.TemporaryDirectory(prefix="roder-resume-") as tmp:
        ws, home = Path(tmp) / "ws", Path(tmp) / "home"
        ws.mkdir()
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("RODER_MOCK_SCRIPT", "PYTHONPATH")}
        env.update(RODER_HOME=str(home), RODER_NO_HOST="1")
        roder = [sys.executable, "-m", "roder_tui.cli"]
        fresh = [*roder, "-p", "hi", "--provider", "mock"]
        for size in [int(s) for s in opts.events.split(",") if s.strip()]:
            thread_id = write_big_thread(home, ws, size)
            resume = [*roder, "-p", "hi", "-r", thread_id, "--provider", "mock"]
            for variant in ("this", "this", *variants.keys()):
                run_once(resume, {**env, **variants[variant]}, ws)  # warm-up, not timed
            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            before = load_average()
            for _ in range(opts.runs):
                for variant, extra in variants.items():
                    for case, cmd in (("fresh", fresh), ("resume", resume)):
                        results.setdefault((case, variant), []).append(run_once(cmd, {**env, **extra}, ws))
            after = load_average()
            print(f"\n{size} events, {opts.runs} runs each; load average before {before}, after {after}")
            print(f"{'variant':<9} {'case':<7} {'wall med':>9} {'CPU med':>8} {'CPU min':>8} {'peak MiB':>9}")
            for (case, variant), rows in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                walls, cpus = [w for w, _, _ in rows], [c for _, c, _ in rows]
                print(
                    f"{variant:<9} {case:<7} {statistics.median(walls):>9.3f} {statistics.median(cpus):>8.3f} "
                    f"{min(cpus):>8.3f} {max(p for _, _, p in rows):>9.1f}"
                )
            for variant in variants:
                res, fr = results[("resume", variant)], results[("fresh", variant)]
                cpu = statistics.median(c for _, c, _ in res) - statistics.median(c for _, c, _ in fr)
                wall = statistics.median(w for w, _, _ in res) - statistics.median(w for w, _, _ in fr)
                pairs = sorted(r[1] - f[1] for r, f in zip(res, fr, strict=True))
                paired = statistics.median(pairs)
                print(f"{variant}: resume overhead CPU {cpu:+.3f} s (paired median {paired:+.3f}), wall {wall:+.3f} s")


if __name__ == "__main__":
    main()
