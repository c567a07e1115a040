"""Control-plane benchmarks (offline, mock engine, temporary RODER_HOME).

1. Turn overhead: the same short turn driven directly on the Runtime, through the in-process
   LocalAppClient, through `roder app-server` over stdio pipes and over a WebSocket.
2. Concurrency: N threads each running one streamed turn at the same time through one stdio
   app server: wall time, turns per second, notifications per second.

    python bench/app_server.py [--turns 100] [--threads 1,8,32,64] [--deltas 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roder_core.runtime.bootstrap import StartSettings, start_runtime  # noqa: E402
from roder_core.server.client import LocalAppClient  # noqa: E402
from roder_core.server.protocol import THREAD_START, TURN_START, ThreadStartParams, TurnStartParams  # noqa: E402
from roder_core.threads.events import TurnCompleted  # noqa: E402
from tests.server.support import PipePeer, RemoteServer, WsPeer  # noqa: E402


def per_turn_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms (p90 {sorted(samples)[int(len(samples) * 0.9)] * 1000:.2f})"


async def direct(workspace: Path, turns: int) -> list[float]:
    """The runtime's own API and event bus: the floor every client path is compared with."""
    runtime = start_runtime(StartSettings(cwd=workspace, provider="mock", interactive=True)).runtime
    events = runtime.bus.subscribe()
    thread = await runtime.start_thread()
    samples = []
    for i in range(turns):
        start = time.perf_counter()
        turn = await runtime.start_turn(thread.id, f"question {i}")
        async for event in events:
            if isinstance(event, TurnCompleted) and event.turn.id == turn.id:
                break
        samples.append(time.perf_counter() - start)
    events.close()
    await runtime.close()
    return samples


async def in_process(workspace: Path, turns: int) -> list[float]:
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock"), persist_config=False)
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    samples = []
    for i in range(turns):
        start = time.perf_counter()
        turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt=f"question {i}"))).turn
        async for event in events:
            if isinstance(event, TurnCompleted) and event.turn.id == turn.id:
                break
        samples.append(time.perf_counter() - start)
    await client.close()
    return samples


async def over_peer(peer: Any, turns: int) -> list[float]:
    thread = (await peer.call("thread/start"))["thread"]
    samples = []
    for i in range(turns):
        start = time.perf_counter()
        turn = (await peer.call("turn/start", {"threadId": thread["id"], "prompt": f"question {i}"}))["turn"]
        while True:
            params = await peer.next_notification("turn/completed", threadId=thread["id"])
            if params["turn"]["id"] == turn["id"]:
                break
        samples.append(time.perf_counter() - start)
    return samples


async def stdio(workspace: Path, env: dict[str, str], turns: int) -> list[float]:
    peer = await PipePeer.start(workspace, env)
    await peer.call("initialize")
    samples = await over_peer(peer, turns)
    await peer.close()
    return samples


async def websocket(workspace: Path, env: dict[str, str], turns: int) -> list[float]:
    env = {**env, "BENCH_TOKEN": "bench-token-0123456789"}
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:BENCH_TOKEN", "--print-qr=false")
    peer = await WsPeer.connect(server.url, "bench-token-0123456789")
    await peer.call("initialize")
    samples = await over_peer(peer, turns)
    await peer.close()
    await server.stop()
    return samples


async def concurrent(workspace: Path, env: dict[str, str], threads: int, deltas: int) -> dict[str, float]:
    script = workspace.parent / f"script-{threads}.json"
    script.write_text(json.dumps({"steps": [{"text": "x" * (deltas * 10), "chunk_size": 10}]}))
    peer = await PipePeer.start(workspace, {**env, "RODER_MOCK_SCRIPT": str(script)})
    await peer.call("initialize")
    ids = [(await peer.call("thread/start"))["thread"]["id"] for _ in range(threads)]
    seen_before = len(peer.seen)
    start = time.perf_counter()
    await asyncio.gather(*(peer.call("turn/start", {"threadId": t, "prompt": "stream"}) for t in ids))
    pending = set(ids)
    while pending:
        params = await peer.next_notification("turn/completed", timeout=300)
        pending.discard(params["threadId"])
    wall = time.perf_counter() - start
    notifications = len(peer.seen) - seen_before
    await peer.close()
    return {
        "wall": wall,
        "turns_per_s": threads / wall,
        "notifications_per_s": notifications / wall,
        "notifications": notifications,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--threads", default="1,8,32,64")
    parser.add_argument("--deltas", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["RODER_HOME"] = str(root / "home")
        workspace = root / "ws"
        workspace.mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        print(f"turn overhead, {args.turns} turns each (median, p90):")
        for name, run in [
            ("runtime directly", lambda: direct(workspace, args.turns)),
            ("LocalAppClient (in process)", lambda: in_process(workspace, args.turns)),
            ("app-server over stdio", lambda: stdio(workspace, env, args.turns)),
            ("app-server over WebSocket", lambda: websocket(workspace, env, args.turns)),
        ]:
            samples = await run()
            print(f"  {name:30s} {per_turn_ms(samples[5:])}")
        print(f"concurrent threads over stdio, one turn each, {args.deltas} deltas per turn:")
        for count in (int(n) for n in args.threads.split(",")):
            result = await concurrent(workspace, env, count, args.deltas)
            print(
                f"  {count:3d} threads: {result['wall']:.2f} s wall, {result['turns_per_s']:.1f} turns/s, "
                f"{result['notifications_per_s']:.0f} notifications/s ({result['notifications']} total)"
            )


if __name__ == "__main__":
    asyncio.run(main())
