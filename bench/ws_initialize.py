"""`initialize` over a WebSocket against stdio, the same server binary, interleaved.

    python bench/ws_initialize.py [--runs 15]

Starts `roder app-server` over stdio pipes and `roder app-server --remote` on loopback (mock
engine, temporary RODER_HOME, a token from the environment), then per run: one `initialize` on
the running stdio connection, and a new WebSocket connection (handshake with the bearer token)
followed by its first `initialize`. Reported: medians of the client-side times, with the load
average. The issue's goal: WebSocket within 2x of stdio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server.support import PipePeer, RemoteServer, WsPeer  # noqa: E402

PARAMS = {"clientInfo": {"name": "bench"}}


async def measure(runs: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="roder-ws-init-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(RODER_HOME=str(Path(tmp) / "home"), RODER_NO_HOST="1", RODER_BENCH_TOKEN=secrets.token_urlsafe(24))
        pipe = await PipePeer.start(ws, env)
        remote = await RemoteServer.start(ws, env, "--auth-token", "env:RODER_BENCH_TOKEN", "--print-qr=false")
        try:
            await pipe.call("initialize", PARAMS)
            names = ("stdio initialize", "WebSocket initialize", "WebSocket connect + initialize")
            times: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(runs):
                start = time.perf_counter()
                await pipe.call("initialize", PARAMS)
                times["stdio initialize"].append(time.perf_counter() - start)
                start = time.perf_counter()
                peer = await WsPeer.connect(remote.url, env["RODER_BENCH_TOKEN"])
                connected = time.perf_counter()
                await peer.call("initialize", PARAMS)
                done = time.perf_counter()
                await peer.socket.close()
                times["WebSocket initialize"].append(done - connected)
                times["WebSocket connect + initialize"].append(done - start)
            return times
        finally:
            for process in (pipe.proc, remote.proc):
                process.kill()
                await process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args()
    before = " ".join(f"{v:.1f}" for v in os.getloadavg())
    times = asyncio.run(measure(opts.runs))
    after = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"{opts.runs} runs; load average before {before}, after {after}")
    floor = statistics.median(times["stdio initialize"])
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:<32} {median * 1000:8.2f} ms  ({median / floor:.2f}x stdio)")


if __name__ == "__main__":
    main()
