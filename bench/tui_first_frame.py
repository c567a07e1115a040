"""Time to first frame of `roder` versus a bare Textual app, measured in the same run.

    .venv/bin/python bench/tui_first_frame.py [--runs 7] [--baseline DIR]

Each program is started in a pseudo-terminal (120x40) exactly as a user would start it; the clock
runs from spawn until its first screen content arrives on the terminal ("Threads" for roder, the
bare app's only label for Textual). For roder it also reports when the runtime is ready (the
status bar says "idle"). Runs alternate between the two programs so machine load hits both alike.
Roder's bytecode is compiled first, as pip does when it installs the package. Each figure is given
as wall time and as the process's own CPU until then (under load the wall clock mostly measures
waiting for a core; the CPU does not).

    .venv/bin/python bench/tui_first_frame.py --instructions [--baseline DIR]

counts instructions instead, a figure machine load does not move: each program runs once under
``valgrind --tool=callgrind`` in the same pseudo-terminal and ends itself (``os._exit``) at the
point measured: the bare app after its first refresh, Roder when it starts its runtime (right after
the first frame: ``RoderApp._boot``) and, in a second run, when the status bar is told "idle".
Each program runs once without valgrind first, which writes its bytecode and compiled snippets.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
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

#: The bare app, ending itself after its first refresh (``--instructions``).
BARE_APP_STOPPING = BARE_APP.replace(
    '        yield Static("bare-first-frame")\n',
    '        yield Static("bare-first-frame")\n\n    def on_mount(self):\n'
    "        import os\n\n        self.call_after_refresh(lambda: os._exit(0))\n",
)

#: ``roder --provider mock`` as the console script starts it, ending itself at the first frame
#: (``frame``: when the app starts its runtime) or at "idle" (``idle``).
RODER_STOPPING = """
import gc, os, sys

gc.disable()  # as roder_tui.cli.run does first
from roder_core.settings import code_cache
import roder_tui.app
from roder_tui.widgets import status_bar


def stop(*_args):
    code_cache.save()
    os._exit(0)


if sys.argv[1] == "frame":
    roder_tui.app.RoderApp._boot = stop
else:
    update = status_bar.StatusBar.update_state

    def noting(self, **kwargs):
        if kwargs.get("activity") == "idle":
            stop()
        return update(self, **kwargs)

    status_bar.StatusBar.update_state = noting
from roder_tui.cli import run

sys.argv = ["roder", *sys.argv[2:]]
run()
"""


def run_to_end(argv: list[str], env: dict[str, str], cwd: str) -> None:
    """Run a program that ends itself in a 120x40 pseudo-terminal, reading what it writes."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 600)
            if not ready:
                process.kill()
                raise RuntimeError(f"{argv} did not end")
            try:
                if not os.read(master, 65536):
                    break
            except OSError:  # the terminal closed: the program ended
                break
    finally:
        os.close(master)
        process.wait()


def instructions(argv: list[str], env: dict[str, str], cwd: str, out: Path) -> int:
    """Instructions the program runs until it ends itself, counted by callgrind."""
    run_to_end(argv, env, cwd)  # bytecode and compiled snippets written, as after any first start
    run_to_end(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], env, cwd)
    found = re.search(r"^totals: (\d+)", out.read_text(), re.M)
    if found is None:
        raise RuntimeError(f"callgrind wrote no total for {argv}")
    return int(found.group(1))


def count_instructions(env: dict[str, str], base_env: dict[str, str], home: str, workspace: str) -> None:
    folder = Path(home)
    (folder / "bare_stopping.py").write_text(BARE_APP_STOPPING)
    (folder / "roder_stopping.py").write_text(RODER_STOPPING)
    bare = instructions([sys.executable, str(folder / "bare_stopping.py")], env, workspace, folder / "bare.cg")
    rows = [("bare Textual app, first frame", bare)]
    for label, variant in (("roder", env), ("roder, baseline checkout", base_env)):
        if not variant:
            continue
        for point, what in (("frame", "first frame"), ("idle", 'runtime ready (status "idle")')):
            argv = [sys.executable, str(folder / "roder_stopping.py"), point, "--provider", "mock"]
            rows.append((f"{label}, {what}", instructions(argv, variant, workspace, folder / f"{label}-{point}.cg")))
    print(f"instructions (callgrind, one run each; load average {os.getloadavg()[0]:.1f}, which does not move them)")
    print("| program | instructions | / bare |")
    print("|---|---|---|")
    for label, count in rows:
        print(f"| {label} | {count / 1e9:.3f} G | {count / bare:.2f}x |")
    print("\ngoal: first frame <= 1.3x the bare app, status idle <= 1.6x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, started in the same alternation")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead of timing")
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
    if opts.instructions:
        count_instructions(env, base_env, home, workspace)
        return
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
