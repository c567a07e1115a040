"""How fast a modal screen opens compared with a typed character's echo, in a pseudo-terminal.

    .venv/bin/python bench/tui_modal_open.py [--runs 5] [--burn 2]

The app (mock model, 120x40) is started as a user starts it; once idle, a character is typed and
timed until it shows, then the command palette (ctrl+p) and the help screen (F1) are opened and
timed until their text shows, each closed with esc before the next. ``--burn N`` runs N
CPU-burning processes beside it (the load under which a user saw 1.0-1.3 s). The goal: the
palette opens within 2x a keystroke's echo (the first open of a run included).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oneshot import compile_bytecode
from pty_timing import PtySession, cpu_seconds

PALETTE = b"\x10"  # ctrl+p
#: The palette's placeholder without its first letter: the cursor sits on that letter, drawn in
#: another style, so "Search..." appears as one run of bytes only once the cursor blinks off
#: (which timed the blink, 0.5 s, not the opening).
PALETTE_SHOWN = b"earch for commands"
F1 = b"\x1bOP"
#: The sidebar's title, drawn again when a modal closes. Waiting for it (not for a quiet moment)
#: keeps the next key from reaching a busy app together with the esc, which reads as alt+key.
CLOSED = b"Threads"


def burn() -> None:
    while True:
        pass


def one_run() -> tuple[dict[str, float], dict[str, float]]:
    """(wall seconds, the app's CPU seconds) from each key until its screen shows."""
    home = tempfile.mkdtemp(prefix="roder-modal-bench-home-")
    workspace = tempfile.mkdtemp(prefix="roder-modal-bench-ws-")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RODER_HOME=home, TERM="xterm-256color", COLUMNS="120", LINES="40")
    session = PtySession([sys.executable, "-m", "roder_tui.cli", "--provider", "mock"], env, workspace)
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def timed(name: str, keys: bytes, marker: bytes) -> None:
        session.drain()
        before = cpu_seconds(session.process.pid)
        times[name] = session.press(keys, marker)
        cpu[name] = cpu_seconds(session.process.pid) - before

    try:
        session.wait(b"idle")
        timed("echo", b"q", b"q")
        session.send(b"\x7f")  # backspace
        timed("palette (first)", PALETTE, PALETTE_SHOWN)
        session.press(b"\x1b", CLOSED)
        timed("palette (again)", PALETTE, PALETTE_SHOWN)
        session.press(b"\x1b", CLOSED)
        timed("help (F1)", F1, b"this help")
        return times, cpu
    finally:
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burn", type=int, default=0, help="CPU-burning processes beside the app")
    opts = parser.parse_args()
    compile_bytecode(Path(__file__).resolve().parents[1])
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(opts.burn)]
    for process in burners:
        process.start()
    try:
        results = [one_run() for _ in range(opts.runs)]
    finally:
        for process in burners:
            process.terminate()
    runs = [wall for wall, _cpu in results]
    print(f"runs: {opts.runs}; burners: {opts.burn}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| what | median | min | max | app CPU (median) |")
    print("|---|---|---|---|---|")
    for key in runs[0]:
        ms = [r[key] * 1000 for r in runs]
        cpu_ms = statistics.median([c[key] * 1000 for _wall, c in results])
        print(f"| {key} | {statistics.median(ms):.0f} ms | {min(ms):.0f} ms | {max(ms):.0f} ms | {cpu_ms:.0f} ms |")
    echo = statistics.median([r["echo"] for r in runs])
    first = statistics.median([r["palette (first)"] for r in runs])
    print(f"\nfirst palette open / keystroke echo: {first / echo:.1f}x (goal <= 2x)")


if __name__ == "__main__":
    main()
