"""Time to first frame of `roder` versus a bare Textual app, measured in the same run.

    .venv/bin/python bench/tui_first_frame.py [--runs 7] [--baseline DIR]

Each program is started in a pseudo-terminal (120x40) exactly as a user would start it; the clock
runs from spawn until its first screen content arrives on the terminal ("Threads" for roder, the
bare app's only label for Textual). For roder it also reports when the runtime is ready (the
status bar says "idle"). Runs alternate between the two programs so machine load hits both alike.
Roder's bytecode is compiled first, as pip does when it installs the package. Each figure is given
as wall time and as the process's own CPU until then (under load the wall clock mostly measures
waiting for a core; the CPU does not).
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
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "frame": [], "ready": [], "base": [], "base_ready": []}
    base_env = {**env, **checkout_env(opts.baseline)} if opts.baseline else {}
    argv = [sys.executable, "-m", "roder_tui.cli", "--provider", "mock"]
    for _ in range(opts.runs):
        runs["bare"].append(timed_run([sys.executable, str(bare)], [b"bare-first-frame"], env, workspace)[0])
        frame, ready = timed_run(argv, [b"Threads", b"idle"], env, workspace)
        runs["frame"].append(frame)
        runs["ready"].append(ready)
        if base_env:
            frame, ready = timed_run(argv, [b"Threads", b"idle"], base_env, workspace)
            runs["base"].append(frame)
            runs["base_ready"].append(ready)
    print(f"runs: {opts.runs} each, alternating; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| program | first frame wall (median) | min | max | CPU (median) | wall / bare | CPU / bare |")
    print("|---|---|---|---|---|---|---|")
    bare_wall = statistics.median(w for w, _ in runs["bare"])
    bare_cpu = statistics.median(c for _, c in runs["bare"])
    labels = {
        "bare": "bare Textual app",
        "frame": "roder",
        "ready": "roder, runtime ready (status idle)",
        "base": "roder, baseline checkout",
        "base_ready": "roder, baseline, status idle",
    }
    for key, label in labels.items():
        if not runs[key]:
            continue
        walls, cpus = [w for w, _ in runs[key]], [c for _, c in runs[key]]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(
            f"| {label} | {wall:.3f} s | {min(walls):.3f} s | {max(walls):.3f} s | {cpu:.3f} s "
            f"| {wall / bare_wall:.2f}x | {cpu / bare_cpu:.2f}x |"
        )
    print("\ngoal: first frame <= 1.3x the bare app, status idle <= 1.6x")


if __name__ == "__main__":
    main()
