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
run by run. The peers' apps (``pi``, ``codex``; found as ``bench/oneshot.py`` finds them: ``--peer-bin``,
``$TMPDIR/roder-bench-peers``, PATH; ``python bench/oneshot.py --install-peers`` installs them)
stream the same answer from the same kind of server in the same tmux, interleaved run by run,
configured as in ``bench/oneshot_peers.py`` (loopback only, no approvals, no telemetry); their CPU
is that of the pane's whole process tree (codex's npm launcher and its native binary). A peer
that is not installed is printed as NOT INSTALLED. Each run has its own fake server (its own
process), so no program's extra requests shift another's script.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oneshot_peers
from oneshot import checkout_env, compile_bytecode, load_average, print_medians
from pty_timing import cpu_seconds
from tui_harness import prose

ROOT = Path(__file__).resolve().parents[1]
END_MARK = "STREAM-END-MARK"
WARM_MARK = "WARM-MARK"
FIRST_MARK = "Section 1"  # the answer's first line (a heading)
#: A pause between typing a prompt and Enter: codex reads keys that arrive together as a paste,
#: in which Enter is a new line, not "send".
TYPED_TO_ENTER = 1.0


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, timeout=20).stdout


def wait_for(socket: str, text: str, timeout: float, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in tmux(socket, "capture-pane", "-p", "-t", "roder"):
            return
        time.sleep(step)
    raise SystemExit(f"{text!r} never appeared:\n{tmux(socket, 'capture-pane', '-p', '-t', 'roder')}")


def pane_pid(socket: str) -> int:
    return int(tmux(socket, "display", "-p", "-t", "roder", "#{pane_pid}").strip())


def app_pid(socket: str) -> int:
    """The python process under the pane's shell (``env`` execs it)."""
    shell = pane_pid(socket)
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    return int(children[0]) if children else shell


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live process under it (a launcher and what it runs)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    family, total = {root}, 0.0
    for _ in range(8):  # a few levels: shell, launcher, binary
        family |= {pid for pid, parent in parents.items() if parent in family}
    for pid in family:
        try:
            total += cpu_seconds(pid)
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass(frozen=True)
class Contender:
    """One program of the comparison in the pane: how to start it against a server's URL, what
    its screen shows once it is ready for a prompt, and whose CPU counts."""

    name: str
    start: Callable[[str, Path], tuple[list[str], dict[str, str]]]
    ready: str
    tree: bool  # the pane's whole process tree (peers) or the app's process (roder)
    #: Model calls of its own after the first turn (codex asks for a thread title), answered in turn.
    after_first: tuple[dict[str, object], ...] = ()


def roder_contender(name: str, extra_path: str | None, ssh: bool) -> Contender:
    def start(url: str, home: Path) -> tuple[list[str], dict[str, str]]:
        (home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["m"]\n'
        )
        env = {"RODER_HOME": str(home), "LOCAL_API_KEY": "sk-local-test"}
        if ssh:  # what sshd sets: the app then tunes itself for a slow link (roder_tui.remote)
            env["SSH_CONNECTION"] = "127.0.0.1_50000_127.0.0.1_22"
        if extra_path:
            env["PYTHONPATH"] = extra_path
        argv = [sys.executable, "-m", "roder_tui.cli", "--provider", "local", "--model", "m", "--sandbox", "off"]
        return argv, env

    return Contender(name, start, "idle", tree=False)


def peer_contenders(peer_bin: Path | None) -> list[Contender]:
    """The peers' interactive apps, configured as their one-shot runs are (oneshot_peers)."""
    path = oneshot_peers.search_path(peer_bin)
    found: list[Contender] = []
    for peer in oneshot_peers.PEERS:
        binary = oneshot_peers.find(peer, path)
        if peer.binary not in TUI_PEERS:
            continue
        if binary is None:
            print(f"{peer.binary}: NOT INSTALLED (python bench/oneshot.py --install-peers); not measured")
            continue
        print(f"{peer.binary}: {binary} ({oneshot_peers.version(binary, path)})")
        found.append(TUI_PEERS[peer.binary](peer, binary, path))
    return found


def _pi(peer: oneshot_peers.Program, binary: Path, path: str) -> Contender:
    def start(url: str, home: Path) -> tuple[list[str], dict[str, str]]:
        _, env = peer.configure(binary, url, home)
        return [str(binary), "--provider", "loop", "--model", "m"], {**env, "HOME": str(home), "PATH": path}

    return Contender("pi", start, "pi v", tree=True)


def _codex(peer: oneshot_peers.Program, binary: Path, path: str) -> Contender:
    def start(url: str, home: Path) -> tuple[list[str], dict[str, str]]:
        _, env = peer.configure(binary, url, home)
        with (home / "config.toml").open("a") as config:  # the workspace trusted: no trust dialog first
            config.write(f'[projects."{home.parent / ("ws-" + home.name.removeprefix("home-"))}"]\ntrust_level = "trusted"\n')
        # --no-daemon: codex otherwise talks to a background app server of its own, which did not
        # come up in time under this machine's load (codex then exits, asking for this flag), and
        # which would keep running after the pane is closed.
        return [str(binary), "--no-daemon", "--dangerously-bypass-approvals-and-sandbox"], {
            **env,
            "HOME": str(home),
            "PATH": path,
        }

    return Contender("codex", start, "Ask Codex", tree=True, after_first=({"text": '{"title": "notes"}'},))


#: The peers whose interactive app this benchmark runs (claude's needs an account to start).
TUI_PEERS: dict[str, Callable[[oneshot_peers.Program, Path, str], Contender]] = {"pi": _pi, "codex": _codex}


def one_run(
    contender: Contender,
    home: Path,
    cwd: Path,
    server_url: str,
    idle: float,
    deltas: int,
    profile: Path | None = None,
    warm: bool = True,
) -> dict[str, float]:
    socket = f"roder-bytes-{uuid.uuid4().hex[:8]}"
    capture = home.parent / f"{socket}.bytes"
    argv, env_vars = contender.start(server_url, home)
    command = " ".join(["env", *[f"{k}={v}" for k, v in env_vars.items()], *argv])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    if contender.tree:  # a peer sees no credentials or provider settings of this environment
        env = {k: v for k, v in oneshot_peers.clean_env(env.get("PATH", ""), home).items() if not k.startswith("TMUX")}
    env["TERM"] = "xterm-256color"
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "roder", "-x", "100", "-y", "32", "-c", str(cwd), command],
        env=env,
        check=True,
        timeout=20,
    )
    try:
        wait_for(socket, contender.ready, 60)
        if warm:  # a first short turn: the model client and its imports are then paid for
            tmux(socket, "send-keys", "-t", "roder", "-l", "warm up")
            time.sleep(TYPED_TO_ENTER)
            tmux(socket, "send-keys", "-t", "roder", "Enter")
            wait_for(socket, WARM_MARK, 60)
            if not contender.tree:
                wait_for(socket, "idle", 60)
        time.sleep(1.0)  # let the first screen settle
        pid = pane_pid(socket) if contender.tree else app_pid(socket)
        cpu = (lambda: tree_cpu(pid)) if contender.tree else (lambda: cpu_seconds(pid))
        tmux(socket, "pipe-pane", "-t", "roder", "-o", f"cat >> {capture}")
        time.sleep(0.2)
        size = lambda: capture.stat().st_size if capture.exists() else 0  # noqa: E731

        b0, c0, t0 = size(), cpu(), time.monotonic()
        time.sleep(idle)
        b0e, c0e, t0e = size(), cpu(), time.monotonic()  # the idle phase ends: the prompt is typed
        tmux(socket, "send-keys", "-t", "roder", "-l", "write the notes")
        time.sleep(TYPED_TO_ENTER)
        spy = start_profiler(pid, profile) if profile else None
        b1, c1, t1 = size(), cpu(), time.monotonic()
        tmux(socket, "send-keys", "-t", "roder", "Enter")
        wait_for(socket, FIRST_MARK, 60, step=0.05)
        cf, tf = cpu(), time.monotonic()
        wait_for(socket, END_MARK, 300, step=0.05)
        ce, te = cpu(), time.monotonic()
        if not contender.tree:
            wait_for(socket, "idle", 60)
        b2, c2, t2 = size(), cpu(), time.monotonic()
        time.sleep(1.0)  # the turn's own last writes (the sidebar's thread list, refreshed after it)
        b2s, c2s, t2s = size(), cpu(), time.monotonic()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        time.sleep(idle)
        b3, c3, t3 = size(), cpu(), time.monotonic()
        tmux(socket, "send-keys", "-t", "roder", "C-q" if not contender.tree else "C-c")
        if contender.tree:
            tmux(socket, "send-keys", "-t", "roder", "C-c")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=20)
    capture.unlink(missing_ok=True)
    stream_s = t2 - t1
    return {
        "idle_before_bytes_s": (b0e - b0) / (t0e - t0),
        "stream_bytes": b2 - b1,
        "bytes_per_token": (b2 - b1) / deltas,
        "stream_s": stream_s,
        "tokens_s": deltas / stream_s,
        "stream_cpu_pct": 100 * (c2 - c1) / stream_s,
        "text_cpu_pct": 100 * (ce - cf) / (te - tf),
        "idle_after_bytes_s": (b3 - b2s) / (t3 - t2s),
        "idle_cpu_pct": 100 * ((c0e - c0) + (c3 - c2s)) / ((t0e - t0) + (t3 - t2s)),
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
    parser.add_argument("--peer-bin", type=Path, help="a folder with the peers' executables (an npm prefix's bin)")
    parser.add_argument("--no-peers", action="store_true", help="measure Roder only")
    opts = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    text = prose(opts.lines) + f"\n{END_MARK}\n"
    deltas = -(-len(text) // 4)
    answer = {"text": text, "chunk_size": 4, "delay_ms": 1000 / opts.tokens_per_s}
    steps = [answer] if opts.cold_turn else [{"text": f"{WARM_MARK}\n"}, answer]
    compile_bytecode(ROOT)
    compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1)
    contenders = [roder_contender("this", None, opts.ssh)]
    if opts.baseline:
        contenders.insert(0, roder_contender("baseline", checkout_env(opts.baseline)["PYTHONPATH"], opts.ssh))
    if not opts.no_peers:
        contenders += peer_contenders(opts.peer_bin)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch:
        print(f"answer: {len(text)} characters, {deltas} deltas of 4 characters; load average before: {load_average()}")
        for run in range(opts.runs):
            for contender in contenders:
                home, cwd = Path(scratch) / f"home-{contender.name}-{run}", Path(scratch) / f"ws-{contender.name}-{run}"
                home.mkdir()
                cwd.mkdir()
                profile = opts.profile / f"{contender.name}-{run}.txt" if opts.profile and not contender.tree else None
                if profile is not None:
                    profile.parent.mkdir(parents=True, exist_ok=True)
                script = [*steps[:1], *contender.after_first, *steps[1:]]
                with oneshot_peers.ScriptedServer(script, home / "server") as server:
                    row = one_run(contender, home, cwd, server.url, opts.idle, deltas, profile, not opts.cold_turn)
                results.setdefault(contender.name, []).append(row)
        print(f"load average after: {load_average()}")
    print_medians(results)


if __name__ == "__main__":
    main()
