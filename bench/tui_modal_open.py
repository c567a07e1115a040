"""How fast a modal screen opens compared with a typed character's echo, in a pseudo-terminal.

    .venv/bin/python bench/tui_modal_open.py [--runs 5] [--burn 2] [--baseline DIR]

The app (mock model, 120x40) is started as a user starts it. The moment it says "idle" a
character is typed and timed until it shows ("first echo": what a user typing at once gets,
while the app still finishes starting). Once the app has settled (nothing written for a while),
``ECHOES`` more characters are typed one at a time and timed; their median is the yardstick
("echo"). Then the command palette (ctrl+p) and the help screen (F1) are opened and timed until
their text shows, each closed with esc before the next. ``--burn N`` runs N CPU-burning processes
beside it (the load under which a user saw 1.0-1.3 s); ``--baseline DIR`` also runs another
checkout (``git archive REV | tar -x -C DIR``), alternating run by run. The goal: the palette
(its first open of a run included) and help open within 2x a keystroke's echo.

Beside the wall time and the process's CPU (in clock ticks), each key's main-thread CPU from the
key event to the end of writing the frame that answers it (``modal_probe.py``, which runs the app
with a probe): the steadiest figure on a loaded machine, in the same ratio to the echo's.
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
from oneshot import variants_with
from pty_timing import PtySession, cpu_seconds

PALETTE = b"\x10"  # ctrl+p
#: The palette's placeholder without its first letter: the cursor sits on that letter, drawn in
#: another style, so "Search..." appears as one run of bytes only once the cursor blinks off
#: (which timed the blink, 0.5 s, not the opening).
PALETTE_SHOWN = b"earch for commands"
F1 = b"\x1bOP"
#: The sidebar's right edge, drawn again in every row a modal covered when it closes (the sidebar's
#: title is not: the palette, a panel now, leaves the rows above it alone). Waiting for it (not
#: for a quiet moment) keeps the next key from reaching a busy app together with the esc, which
#: reads as alt+key.
CLOSED = "\u2595".encode()
#: Characters typed once the app has settled, one at a time: the median of their echoes is the
#: yardstick. Letters that appear nowhere else on the start screen.
ECHOES = b"qzxjv"
#: Seconds without output after which the app counts as settled (its start-up work done: the
#: first thread opened, the palette's rows loaded, the answer renderers imported).
SETTLED = 1.0


def burn() -> None:
    while True:
        pass


Run = tuple[dict[str, float], dict[str, float], dict[str, float]]
#: The figures of a run, in the order the probe sees their keys.
NAMES = ("first echo", *["echo"] * len(ECHOES), "palette (first)", "palette (again)", "help (F1)")
#: The key of each figure (a typed character: any).
KEYS = {"first echo": None, "echo": None, "palette (first)": "ctrl+p", "palette (again)": "ctrl+p", "help (F1)": "f1"}


def one_run(variant_env: dict[str, str]) -> Run:
    """(wall seconds, the app's CPU seconds, its main thread's CPU seconds) from each key until
    its screen shows."""
    home = tempfile.mkdtemp(prefix="roder-modal-bench-home-")
    workspace = tempfile.mkdtemp(prefix="roder-modal-bench-ws-")
    probe = Path(home) / "probe.tsv"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RODER_HOME=home, TERM="xterm-256color", COLUMNS="120", LINES="40", RODER_MODAL_PROBE=str(probe), **variant_env)
    argv = [sys.executable, str(Path(__file__).resolve().parent / "modal_probe.py"), "--provider", "mock"]
    session = PtySession(argv, env, workspace)
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def timed(name: str, keys: bytes, marker: bytes) -> None:
        session.drain()
        before = cpu_seconds(session.process.pid)
        times[name] = session.press(keys, marker)
        cpu[name] = cpu_seconds(session.process.pid) - before

    try:
        session.wait(b"idle")
        timed("first echo", b"q", b"q")
        session.drain(SETTLED)
        session.send(b"\x7f")  # backspace
        echoes: list[tuple[float, float]] = []
        for key in ECHOES:
            timed("echo", bytes([key]), bytes([key]))
            echoes.append((times["echo"], cpu["echo"]))
        times["echo"] = statistics.median(wall for wall, _cpu in echoes)
        cpu["echo"] = statistics.median(used for _wall, used in echoes)
        session.send(b"\x7f" * len(ECHOES))
        timed("palette (first)", PALETTE, PALETTE_SHOWN)
        session.press(b"\x1b", CLOSED)
        timed("palette (again)", PALETTE, PALETTE_SHOWN)
        session.press(b"\x1b", CLOSED)
        timed("help (F1)", F1, b"this help")
    finally:
        session.close()
    seen = [line.split("\t") for line in probe.read_text().splitlines()] if probe.exists() else []
    if [key for key, _spent in seen] != [KEYS[name] or key for name, (key, _spent) in zip(NAMES, seen, strict=False)]:
        print(f"the probe's keys were not the ones typed, this run's main-thread CPU is left out: {seen}")
        return times, cpu, {}
    if len(seen) != len(NAMES):
        print(f"the probe saw {len(seen)} keys, not {len(NAMES)}; this run's main-thread CPU is left out")
        return times, cpu, {}
    spent = [float(seconds) for _key, seconds in seen]
    main_cpu = {name: statistics.median(s for n, s in zip(NAMES, spent, strict=True) if n == name) for name in NAMES}
    return times, cpu, main_cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burn", type=int, default=0, help="CPU-burning processes beside the app")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder, run alternately with this one")
    opts = parser.parse_args()
    variants = variants_with(opts.baseline)
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(opts.burn)]
    for process in burners:
        process.start()
    before = os.getloadavg()[0]
    results: dict[str, list[Run]] = {name: [] for name in variants}
    try:
        for _ in range(opts.runs):
            for name, variant_env in variants.items():
                results[name].append(one_run(variant_env))
    finally:
        for process in burners:
            process.terminate()
    after = os.getloadavg()[0]
    print(f"runs: {opts.runs}; burners: {opts.burn}; load average {before:.1f} before, {after:.1f} after, {os.cpu_count()} cores")
    for name, runs in results.items():
        walls = [wall for wall, _cpu, _main in runs]
        mains = [main for _wall, _cpu, main in runs if main] or [dict.fromkeys(walls[0], float("nan"))]
        print(f"\n{name}\n| what | median | min | max | app CPU (median, ticks) | main thread CPU (median, min-max) |")
        print("|---|---|---|---|---|---|")
        for key in walls[0]:
            ms = [r[key] * 1000 for r in walls]
            cpu_ms = statistics.median([c[key] * 1000 for _wall, c, _main in runs])
            main_ms = [m[key] * 1000 for m in mains]
            print(
                f"| {key} | {statistics.median(ms):.0f} ms | {min(ms):.0f} ms | {max(ms):.0f} ms | {cpu_ms:.0f} ms "
                f"| {statistics.median(main_ms):.1f} ms ({min(main_ms):.1f}-{max(main_ms):.1f}) |"
            )
        echo = statistics.median([r["echo"] for r in walls])
        echo_main = statistics.median([m["echo"] for m in mains])
        for key in ("palette (first)", "palette (again)", "help (F1)"):
            wall_ratio = statistics.median([r[key] for r in walls]) / echo
            main_ratio = statistics.median([m[key] for m in mains]) / echo_main
            print(f"{key} / keystroke echo: {wall_ratio:.1f}x wall, {main_ratio:.1f}x main-thread CPU (goal <= 2x)")


if __name__ == "__main__":
    main()
