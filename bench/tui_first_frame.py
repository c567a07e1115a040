"""Time to first frame of `roder` versus a bare Textual app, measured in the same run.

    .venv/bin/python bench/tui_first_frame.py [--runs 7] [--baseline DIR]

Each program is started in a pseudo-terminal (120x40) exactly as a user would start it; the clock
runs from spawn until its first screen content arrives on the terminal ("Threads" for roder, the
bare app's only label for Textual). For roder it also reports when the runtime is ready (the
status bar says "idle"). Runs alternate between the two programs so machine load hits both alike.
Roder's bytecode is compiled first, as pip does when it installs the package.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oneshot import checkout_env, compile_bytecode
from pty_timing import timed_run

BARE_APP = """
from textual.app import App
from textual.widgets import Static

class Bare(App):
    def compose(self):
        yield Static("bare-first-frame")

Bare().run()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, started in the same alternation")
    opts = parser.parse_args()
    compile_bytecode(Path(__file__).resolve().parents[1])  # as pip does at install time
    home = tempfile.mkdtemp(prefix="roder-tui-bench-home-")
    workspace = tempfile.mkdtemp(prefix="roder-tui-bench-ws-")
    bare = Path(home) / "bare_app.py"
    bare.write_text(BARE_APP)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RODER_HOME=home, TERM="xterm-256color", COLUMNS="120", LINES="40")
    bare_times, roder_frame, roder_ready, base_frame = [], [], [], []
    base_env = {**env, **checkout_env(opts.baseline)} if opts.baseline else {}
    for _ in range(opts.runs):
        bare_times.append(timed_run([sys.executable, str(bare)], [b"bare-first-frame"], env, workspace)[0][0])
        (frame, _), (ready, _) = timed_run(
            [sys.executable, "-m", "roder_tui.cli", "--provider", "mock"], [b"Threads", b"idle"], env, workspace
        )
        roder_frame.append(frame)
        roder_ready.append(ready)
        if base_env:
            argv = [sys.executable, "-m", "roder_tui.cli", "--provider", "mock"]
            base_frame.append(timed_run(argv, [b"Threads", b"idle"], base_env, workspace)[0][0])
    b, r, rd = statistics.median(bare_times), statistics.median(roder_frame), statistics.median(roder_ready)
    print(f"runs: {opts.runs} each, alternating; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| program | first frame (median) | min | max |")
    print("|---|---|---|---|")
    print(f"| bare Textual app | {b:.3f} s | {min(bare_times):.3f} s | {max(bare_times):.3f} s |")
    print(f"| roder | {r:.3f} s | {min(roder_frame):.3f} s | {max(roder_frame):.3f} s |")
    print(f"| roder, runtime ready (status idle) | {rd:.3f} s | {min(roder_ready):.3f} s | {max(roder_ready):.3f} s |")
    if base_frame:
        bf = statistics.median(base_frame)
        print(f"| roder, baseline checkout | {bf:.3f} s | {min(base_frame):.3f} s | {max(base_frame):.3f} s |")
        print(f"\nbaseline first frame / bare Textual: {bf / b:.2f}x")
    print(f"\nroder first frame / bare Textual: {r / b:.2f}x (goal <= 1.3x)")


if __name__ == "__main__":
    main()
