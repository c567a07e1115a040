"""Bytes the app writes to its terminal, and its CPU, while a 100 tokens/s answer streams and idle.

What a phone on a slow SSH link pays for: the real ``roder`` app runs in tmux (100x32) against the
loopback fake model server, which streams a Markdown prose answer in 4-character deltas (one
"token" each) with a pause before each, 100 deltas a second. ``tmux pipe-pane`` copies every byte
the app writes to the pane into a file; the app's CPU is read from ``/proc/PID/stat`` (user +
system ticks). Three phases: idle before the prompt, the streamed answer (from Enter to the answer's
last word on screen), idle after it. A short first turn comes before them (``--cold-turn`` skips
it), so the figures are those of streaming, not of setting up the session's model client.
``stream_cpu_pct`` is the CPU of the whole turn (Enter to idle: the prompt, the answer's
widgets, the final render); ``text_cpu_pct`` only that of the text streaming in (from the
answer's first line on screen to its last), the steady cost the issue's goal is about. The idle
phase after the turn starts 1 s after the status bar says idle (the sidebar's thread list is
refreshed just after a turn ends).
Installed packages are byte-compiled first, as pip does (this machine's uv venvs are not, and
``PYTHONDONTWRITEBYTECODE`` is set here, which would otherwise recompile every import).

    python bench/tui_ssh_bytes.py [--lines 40] [--idle 5] [--tokens-per-s 100] [--runs 3] [--ssh] [--baseline DIR]
        [--profile DIR]

`--baseline DIR` also runs another checkout (``git archive REV | tar -x -C DIR``), alternating
run by run. Peers (``claude``, ``codex``, ``pi``) are reported as not installed when they are not on PATH.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import checkout_env, compile_bytecode, load_average
from pty_timing import cpu_seconds
from tui_harness import prose

from roder_core.testing.fake_server import ThreadedFakeServer

ROOT = Path(__file__).resolve().parents[1]
END_MARK = "STREAM-END-MARK"
WARM_MARK = "WARM-MARK"
FIRST_MARK = "Section 1"  # the answer's first line (a heading)


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, timeout=20).stdout


def wait_for(socket: str, text: str, timeout: float, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in tmux(socket, "capture-pane", "-p", "-t", "roder"):
            return
        time.sleep(step)
    raise SystemExit(f"{text!r} never appeared:\n{tmux(socket, 'capture-pane', '-p', '-t', 'roder')}")


def app_pid(socket: str) -> int:
    """The python process under the pane's shell (``env`` execs it)."""
    shell = int(tmux(socket, "display", "-p", "-t", "roder", "#{pane_pid}").strip())
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    return int(children[0]) if children else shell


def one_run(
    home: Path,
    cwd: Path,
    extra_path: str | None,
    idle: float,
    deltas: int,
    ssh: bool,
    profile: Path | None = None,
    warm: bool = True,
) -> dict[str, float]:
    socket = f"roder-bytes-{uuid.uuid4().hex[:8]}"
    capture = home.parent / f"{socket}.bytes"
    env_vars = {"RODER_HOME": str(home), "LOCAL_API_KEY": "sk-local-test"}
    if ssh:  # what sshd sets: the app then tunes itself for a slow link (roder_tui.remote)
        env_vars["SSH_CONNECTION"] = "127.0.0.1_50000_127.0.0.1_22"
    if extra_path:
        env_vars["PYTHONPATH"] = extra_path
    command = " ".join(
        [
            "env",
            *[f"{k}={v}" for k, v in env_vars.items()],
            sys.executable,
            "-m",
            "roder_tui.cli",
            "--provider",
            "local",
            "--model",
            "my-model",
            "--sandbox",
            "off",
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env["TERM"] = "xterm-256color"
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "roder", "-x", "100", "-y", "32", "-c", str(cwd), command],
        env=env,
        check=True,
        timeout=20,
    )
    try:
        wait_for(socket, "idle", 60)
        if warm:  # a first short turn: the model client and its imports are then paid for
            tmux(socket, "send-keys", "-t", "roder", "-l", "warm up")
            tmux(socket, "send-keys", "-t", "roder", "Enter")
            wait_for(socket, WARM_MARK, 60)
            wait_for(socket, "idle", 60)
        time.sleep(1.0)  # let the first screen settle
        pid = app_pid(socket)
        tmux(socket, "pipe-pane", "-t", "roder", "-o", f"cat >> {capture}")
        time.sleep(0.2)
        size = lambda: capture.stat().st_size if capture.exists() else 0  # noqa: E731

        b0, c0, t0 = size(), cpu_seconds(pid), time.monotonic()
        time.sleep(idle)
        spy = start_profiler(pid, profile) if profile else None
        b1, c1, t1 = size(), cpu_seconds(pid), time.monotonic()
        tmux(socket, "send-keys", "-t", "roder", "-l", "write the notes")
        tmux(socket, "send-keys", "-t", "roder", "Enter")
        wait_for(socket, FIRST_MARK, 60, step=0.05)
        cf, tf = cpu_seconds(pid), time.monotonic()
        wait_for(socket, END_MARK, 300, step=0.05)
        ce, te = cpu_seconds(pid), time.monotonic()
        wait_for(socket, "idle", 60)
        b2, c2, t2 = size(), cpu_seconds(pid), time.monotonic()
        time.sleep(1.0)  # the turn's own last writes (the sidebar's thread list, refreshed after it)
        b2s, c2s, t2s = size(), cpu_seconds(pid), time.monotonic()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        time.sleep(idle)
        b3, c3, t3 = size(), cpu_seconds(pid), time.monotonic()
        tmux(socket, "send-keys", "-t", "roder", "C-q")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=20)
    capture.unlink(missing_ok=True)
    stream_s = t2 - t1
    return {
        "idle_before_bytes_s": (b1 - b0) / (t1 - t0),
        "stream_bytes": b2 - b1,
        "bytes_per_token": (b2 - b1) / deltas,
        "stream_s": stream_s,
        "tokens_s": deltas / stream_s,
        "stream_cpu_pct": 100 * (c2 - c1) / stream_s,
        "text_cpu_pct": 100 * (ce - cf) / (te - tf),
        "idle_after_bytes_s": (b3 - b2s) / (t3 - t2s),
        "idle_cpu_pct": 100 * ((c1 - c0) + (c3 - c2s)) / ((t1 - t0) + (t3 - t2s)),
    }


def start_profiler(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling the app (raw folded stacks, idle frames dropped) until interrupted."""
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    command = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=40, help="lines of prose in the answer (about 80 characters each)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of each idle phase")
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ssh", action="store_true", help="run the app as sshd would (SSH_CONNECTION set)")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, alternating")
    parser.add_argument(
        "--cold-turn",
        action="store_true",
        help="measure the session's first turn (model client set-up and its imports included) instead of a second one",
    )
    parser.add_argument("--profile", type=Path, help="py-spy folded stacks of the streaming phase: DIR/VARIANT-RUN.txt")
    opts = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    missing = [peer for peer in ("claude", "codex", "pi") if shutil.which(peer) is None]
    for peer in missing:
        print(f"{peer}: NOT INSTALLED on this machine; not measured")
    if missing:
        print("the only peer figure is the issue's: pi, about 384 bytes per token and 9.5% of a core")
    text = prose(opts.lines) + f"\n{END_MARK}\n"
    deltas = -(-len(text) // 4)
    answer = {"text": text, "chunk_size": 4, "delay_ms": 1000 / opts.tokens_per_s}
    per_run = [answer] if opts.cold_turn else [{"text": f"{WARM_MARK}\n"}, answer]
    runs_total = opts.runs * (2 if opts.baseline else 1)
    steps = per_run * runs_total + [answer] * 2
    variants: dict[str, str | None] = {"this": None}
    compile_bytecode(ROOT)
    compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1)
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline)["PYTHONPATH"], **variants}
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch, ThreadedFakeServer(steps, models=("my-model",)) as server:
        print(f"answer: {len(text)} characters, {deltas} deltas of 4 characters; load average before: {load_average()}")
        for run in range(opts.runs):
            for name, extra in variants.items():
                home, cwd = Path(scratch) / f"home-{name}-{run}", Path(scratch) / f"ws-{name}-{run}"
                home.mkdir()
                cwd.mkdir()
                (home / "config.toml").write_text(
                    f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\n'
                    'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
                )
                profile = opts.profile / f"{name}-{run}.txt" if opts.profile else None
                if profile is not None:
                    profile.parent.mkdir(parents=True, exist_ok=True)
                results.setdefault(name, []).append(
                    one_run(home, cwd, extra, opts.idle, deltas, opts.ssh, profile, not opts.cold_turn)
                )
        print(f"load average after: {load_average()}")
    keys = list(next(iter(results.values()))[0])
    print(f"{'variant':<9} " + " ".join(f"{k:>20}" for k in keys))
    for name, rows in results.items():
        print(f"{name:<9} " + " ".join(f"{statistics.median(r[k] for r in rows):>20.2f}" for k in keys))


if __name__ == "__main__":
    main()
