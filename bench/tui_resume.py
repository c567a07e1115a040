"""Time until the app shows a resumed long thread's last screen, whole process.

    python bench/tui_resume.py [--runs 5] [--events 10000] [--baseline DIR]

A thread of realistic 14-event coding turns (bench/sessions.py's writer) is written to a
temporary RODER_HOME and resumed once with `roder -p` (as a user's earlier session would have),
so its snapshots exist. Then `roder --provider mock -r ID` is started in a pseudo-terminal
(120x40), as a user starts it, and the clock runs from spawn until the last turn's request
("Request N: please look at module_N.py") is drawn and the status bar says "idle"; against `roder
--provider mock` on no thread until "idle". Interleaved run by run (with the baseline checkout
too when given: `git archive main | tar -x -C DIR`), with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oneshot import compile_bytecode, load_average, run_once, write_big_thread
from tui_first_frame import timed_run

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
        base = opts.baseline.resolve()
        compile_bytecode(base)
        variants["baseline"] = {"PYTHONPATH": f"{base}:{base / 'extensions'}"}
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
        data = (home / "data" / "threads" / f"{thread_id}.jsonl").read_bytes()
        last = re.findall(rb"Request \d+: please look at module_\d+\.py", data)[-1]
        marker = last.split(b":")[0]
        times: dict[tuple[str, str], list[float]] = {}
        before = load_average()
        for _ in range(opts.runs):
            for variant, extra in variants.items():
                run_env = {**env, **extra}
                times.setdefault(("fresh", variant), []).append(timed_run(roder, [b"idle"], run_env, str(ws))[0])
                shown, ready = timed_run([*roder, "-r", thread_id], [marker, b"idle"], run_env, str(ws))
                times.setdefault(("last screen", variant), []).append(shown)
                times.setdefault(("resumed idle", variant), []).append(ready)
        after = load_average()
        print(f"{opts.events} events; last request shown: {marker.decode()}; load average before {before}, after {after}")
        print(f"{'variant':<9} {'case':<13} {'median':>8} {'min':>8} {'max':>8}")
        for (case, variant), values in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(f"{variant:<9} {case:<13} {statistics.median(values):>8.3f} {min(values):>8.3f} {max(values):>8.3f}")
        for variant in variants:
            extra_s = statistics.median(times[("last screen", variant)]) - statistics.median(times[("fresh", variant)])
            print(f"{variant}: last screen of the resumed thread {extra_s:+.3f} s after a fresh app is idle")


if __name__ == "__main__":
    main()
