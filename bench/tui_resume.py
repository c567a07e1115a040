"""Time until the app shows a resumed long thread's last screen, whole process.

    python bench/tui_resume.py [--runs 5] [--events 10000] [--baseline DIR]

A thread of realistic 14-event coding turns (bench/sessions.py's writer) is written to a
temporary RODER_HOME and resumed once with `roder -p` (as a user's earlier session would have),
so its snapshots exist. Then `roder --provider mock -r ID` is started in a pseudo-terminal
(120x40), as a user starts it, and the clock runs from spawn until the last turn's prompt
(a marker sent by one more `roder -p MARKER -r ID`) is drawn and the status bar says "idle"; against `roder
--provider mock` on no thread until "idle". Interleaved run by run (with the baseline checkout
too when given: `git archive main | tar -x -C DIR`), with the load average before and after.
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
from pty_timing import timed_run

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, run interleaved")
    opts = parser.parse_args()
    compile_bytecode(ROOT)
    variants: dict[str, dict[str, str]] = {"this": {}}
    if opts.baseline:
        variants["baseline"] = checkout_env(opts.baseline)
    with tempfile.TemporaryDirectory(prefix="roder-tui-resume-") as tmp:
        ws, home = Path(tmp) / "ws", Path(tmp) / "home"
        ws.mkdir()
        home.mkdir()
        thread_id = write_big_thread(home, ws, opts.events)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTHONPATH"}
        env.update(RODER_HOME=str(home), RODER_NO_HOST="1", TERM="xterm-256color", COLUMNS="120", LINES="40")
        roder = [sys.executable, "-m", "roder_tui.cli", "--provider", "mock"]
        for variant in ("this", "this", *variants):  # earlier sessions: compaction, snapshots
            run_once([*roder, "-p", "hi", "-r", thread_id], {**env, **variants[variant]}, ws)
        marker = b"last-screen-marker"  # the last turn's prompt: on the last screen only
        run_once([*roder, "-p", marker.decode(), "-r", thread_id], env, ws)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        before = load_average()
        for _ in range(opts.runs):
            for variant, extra in variants.items():
                run_env = {**env, **extra}
                times.setdefault(("fresh idle", variant), []).append(timed_run(roder, [b"idle"], run_env, str(ws), limit=120)[0])
                shown, ready = timed_run([*roder, "-r", thread_id], [marker, b"idle"], run_env, str(ws), limit=120)
                times.setdefault(("last screen", variant), []).append(shown)
                times.setdefault(("resumed idle", variant), []).append(ready)
        after = load_average()
        print(f"{opts.events} events; load average before {before}, after {after}")
        print(f"{'variant':<9} {'case':<13} {'wall med':>9} {'CPU med':>8} {'CPU min':>8}")
        for (case, variant), values in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            walls, cpus = [w for w, _ in values], [c for _, c in values]
            print(f"{variant:<9} {case:<13} {statistics.median(walls):>9.3f} {statistics.median(cpus):>8.3f} {min(cpus):>8.3f}")
        for variant in variants:
            shown_cpu = statistics.median(c for _, c in times[("last screen", variant)])
            fresh_cpu = statistics.median(c for _, c in times[("fresh idle", variant)])
            print(f"{variant}: CPU until the last screen {shown_cpu:.3f} s, {shown_cpu - fresh_cpu:+.3f} s over a fresh app")


if __name__ == "__main__":
    main()
