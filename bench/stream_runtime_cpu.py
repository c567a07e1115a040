"""What a 100 tokens/s answer costs the runtime alone: the CPU of a process running a turn
through the in-process app server against the loopback fake model server, no app.

The answer is ``tui_ssh_bytes.py``'s (Markdown prose in 4-character deltas, a pause of
``1000 / tokens_per_s`` ms before each, chat-completions over HTTP); a client subscribes to the
notifications and reads every delta, as the app's pump does. A short first turn comes first, so
the figure is a streamed turn's, not the model client's set-up. The process's CPU (all threads)
from ``turn/start`` to ``turn/completed`` over the wall time between them is ``runtime_cpu_pct``;
the figure the app's streaming CPU cannot go below. Each run is a fresh process and a fresh
server.

    python bench/stream_runtime_cpu.py [--runs 5] [--lines 40] [--tokens-per-s 100] [--baseline DIR]

``--baseline DIR`` runs another checkout (``git archive REV | tar -x -C DIR``) too, alternating
run by run, and prints both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oneshot_peers
from oneshot import checkout_env, compile_bytecode, load_average, print_medians
from tui_harness import prose

ROOT = Path(__file__).resolve().parents[1]


async def one_turn(workspace: Path) -> dict[str, float]:
    """The streamed turn, in this process (the child's side)."""
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient
    from roder_core.server.protocol import (
        INITIALIZE,
        THREAD_START,
        TURN_START,
        ClientInfo,
        InitializeParams,
        ThreadStartParams,
        TurnStartParams,
    )
    from roder_core.threads import events as ev

    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="local", model="m", sandbox="off", trust=False))
    await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="bench", version="0")))
    queue = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    deltas: list[str] = []
    completed = asyncio.Event()

    async def pump() -> None:
        async for event in queue:
            if isinstance(event, ev.AgentMessageDelta):
                deltas.append(event.delta)
            elif isinstance(event, ev.TurnCompleted):
                completed.set()

    reader = asyncio.create_task(pump())
    row: dict[str, float] = {}
    for prompt in ("warm up", "write the notes"):
        completed.clear()
        deltas.clear()
        cpu, wall = time.process_time(), time.perf_counter()
        await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt=prompt))
        await completed.wait()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        row = {"runtime_cpu_pct": 100 * cpu / wall, "cpu_s": cpu, "wall_s": wall, "notifications": len(deltas)}
    reader.cancel()
    return row


def run(extra_path: str | None, lines: int, tokens_per_s: float) -> dict[str, float]:
    """One fresh process and server; the child prints its row as JSON."""
    text = prose(lines) + "\nEND\n"
    steps = [{"text": "warm\n"}, {"text": text, "chunk_size": 4, "delay_ms": 1000 / tokens_per_s}]
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch:
        home, workspace = Path(scratch) / "home", Path(scratch) / "ws"
        home.mkdir()
        workspace.mkdir()
        with oneshot_peers.ScriptedServer(steps, Path(scratch) / "server") as server:
            (home / "config.toml").write_text(
                f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.url}"\n'
                'api_key_env = "LOCAL_API_KEY"\nmodels = ["m"]\n'
            )
            env = {**os.environ, "RODER_HOME": str(home), "LOCAL_API_KEY": "sk-local-test"}
            if extra_path:
                env["PYTHONPATH"] = extra_path
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(workspace)], env=env, capture_output=True, text=True, timeout=300
            )
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    row: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    row["deltas_sent"] = -(-len(text) // 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, alternating")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(asyncio.run(one_turn(opts.child))))
        return
    compile_bytecode(ROOT)
    variants: dict[str, str | None] = {"this": None}
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline)["PYTHONPATH"], **variants}
    print(f"the runtime alone, a {opts.tokens_per_s:g} tokens/s answer over loopback HTTP; load average before: {load_average()}")
    rows: dict[str, list[dict[str, float]]] = {}
    for _ in range(opts.runs):
        for name, extra in variants.items():
            rows.setdefault(name, []).append(run(extra, opts.lines, opts.tokens_per_s))
    print(f"load average after: {load_average()}")
    print_medians(rows, 16)


if __name__ == "__main__":
    main()
