"""What attaching costs: streamed-delta latency over the host's unix socket against in process,
and keypress-to-repaint in the browser (`roder web`).

    python bench/attach.py deltas [--runs 3] [--chars 2000] [--delay-ms 5]
    python bench/attach.py browser [--keys 40]

deltas: the loopback model server streams an answer of --chars characters in 4-character deltas,
one every --delay-ms (a realistic pace: a flood would measure queueing, not transport).
Each delta's latency is the time from the runtime creating the event (its ``ts``) to a client
holding it as a typed event: a ``LocalAppClient`` in the runtime's process, and a
``RemoteAppClient`` of a ``roder serve`` host (JSON over the unix socket, decoded back into the
event class). Runs alternate between the two so both see the same machine load.

browser: a ``roder serve`` host, ``roder web``, and headless chromium (Debian's, through
chromium-driver). A script in the page notes when each key leaves for the app
(``performance.now()`` at the WebSocket send), when the first frame after it arrives, and when the
browser has painted it (the next animation frame). One key at a time, each after the last one
was painted. Needs the test extra (selenium) and chromium + chromium-driver.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY_PROBE = """
(() => {
  const Real = window.WebSocket;
  window.__roderKeys = [];
  let pending = null;
  function Probed(url, protocols) {
    const socket = protocols === undefined ? new Real(url) : new Real(url, protocols);
    socket.addEventListener("message", (event) => {
      if (typeof event.data === "string" || pending === null) return;
      const sample = pending;
      pending = null;
      sample.arrived = performance.now();
      requestAnimationFrame(() => { sample.painted = performance.now(); window.__roderKeys.push(sample); });
    });
    const send = socket.send.bind(socket);
    socket.send = (data) => {
      try { if (JSON.parse(data)[0] === "stdin") pending = { sent: performance.now() }; } catch (e) {}
      return send(data);
    };
    return socket;
  }
  Probed.prototype = Real.prototype;
  Object.assign(Probed, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  window.WebSocket = Probed;
})();
"""


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def setup_home(scratch: Path, url: str) -> tuple[Path, Path, dict[str, str]]:
    home, ws = scratch / "home", scratch / "ws"
    home.mkdir()
    ws.mkdir()
    (home / "config.toml").write_text(f'[providers.loop]\ndialect = "chat-completions"\nbase_url = "{url}"\nmodels = ["m"]\n')
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["RODER_HOME"] = str(home)
    return home, ws, env


def start_host(ws: Path, env: dict[str, str], *flags: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", "serve", "--foreground", "--provider", "loop", "--model", "m", *flags],
        cwd=ws,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if "host listening on" in line:
            return process
    raise SystemExit("the host did not start")


def stop_host(ws: Path, env: dict[str, str], process: subprocess.Popen[str]) -> None:
    subprocess.run([sys.executable, "-m", "roder_tui.cli", "serve", "--stop"], cwd=ws, env=env, capture_output=True)
    process.wait(timeout=60)


async def one_turn(client: Any) -> list[float]:
    """Latency (ms) of every streamed delta of one turn, as this client received it."""
    from roder_core.threads.events import AgentMessageDelta, TurnCompleted

    events = client.subscribe()
    from roder_core.server.protocol import THREAD_START, TURN_START, ThreadStartParams, TurnStartParams

    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="stream"))
    latencies: list[float] = []
    async for event in events:
        if isinstance(event, AgentMessageDelta):
            latencies.append((time.time() - event.ts) * 1000)
        elif isinstance(event, TurnCompleted) and event.thread_id == thread.id:
            break
    events.close()
    return latencies


async def measure_deltas(runs: int, chars: int, delay_ms: float) -> None:
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient
    from roder_core.server.host_paths import HostPaths
    from roder_core.server.protocol import INITIALIZE, InitializeParams
    from roder_core.server.remote_client import RemoteAppClient
    from roder_core.testing.fake_server import FakeModelServer

    text = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    steps = [{"text": text, "chunk_size": 4, "delay_ms": delay_ms}] * (2 * runs)
    with tempfile.TemporaryDirectory(prefix="roder-attach-bench-") as tmp:
        async with FakeModelServer(steps, models=("m",)) as server:
            _home, ws, env = setup_home(Path(tmp), server.base_url)
            os.environ.update(RODER_HOME=env["RODER_HOME"])
            host = await asyncio.to_thread(start_host, ws, env)
            samples: dict[str, list[float]] = {"in process": [], "unix socket": []}
            print(f"load average before: {load_average()}")
            try:
                for _ in range(runs):
                    local = LocalAppClient.start(StartSettings(provider="loop", model="m", cwd=ws), persist_config=False)
                    async with local:
                        await local.call(INITIALIZE, InitializeParams())
                        samples["in process"] += await one_turn(local)
                    remote = await RemoteAppClient.connect_unix(HostPaths.from_env(env).socket)
                    async with remote:
                        await remote.call(INITIALIZE, InitializeParams())
                        samples["unix socket"] += await one_turn(remote)
            finally:
                print(f"load average after: {load_average()}")
                await asyncio.to_thread(stop_host, ws, env, host)
    print(f"{'client':<12} {'deltas':>7} {'median ms':>10} {'p90 ms':>8} {'p99 ms':>8}")
    for name, values in samples.items():
        print(
            f"{name:<12} {len(values):>7} {statistics.median(values):>10.3f} "
            f"{percentile(values, 0.9):>8.3f} {percentile(values, 0.99):>8.3f}"
        )
    added = statistics.median(samples["unix socket"]) - statistics.median(samples["in process"])
    print(f"added by attaching over the unix socket: {added:.3f} ms per delta (median)")


def measure_browser(keys: int) -> None:
    from roder_core.testing.fake_server import ThreadedFakeServer
    from tests.e2e.browser import Browser
    from tests.e2e.test_web_browser import WebProcess

    with tempfile.TemporaryDirectory(prefix="roder-web-bench-") as tmp, ThreadedFakeServer([], models=("m",)) as server:
        _home, ws, env = setup_home(Path(tmp), server.base_url)
        host = start_host(ws, env)
        web = WebProcess(env, ws)
        browser = Browser(1280, 800)
        try:
            browser.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": KEY_PROBE})
            browser.open(web.url)
            browser.wait_for("idle")
            print(f"load average before: {load_average()}")
            for n in range(keys):
                browser.type("abcdefghij"[n % 10])
                deadline = time.monotonic() + 30
                while browser.driver.execute_script("return window.__roderKeys.length") <= n:
                    if time.monotonic() > deadline:
                        raise SystemExit("a key was never painted")
                    time.sleep(0.01)
            print(f"load average after: {load_average()}")
            rows = browser.driver.execute_script("return window.__roderKeys")
        finally:
            browser.close()
            web.stop()
            stop_host(ws, env, host)
    arrived = [r["arrived"] - r["sent"] for r in rows]
    painted = [r["painted"] - r["sent"] for r in rows]
    print(f"{'keypress to':<22} {'keys':>5} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
    for name, values in (("first frame back", arrived), ("repaint", painted)):
        print(
            f"{name:<22} {len(values):>5} {statistics.median(values):>10.1f} {percentile(values, 0.9):>8.1f} {max(values):>8.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    deltas = sub.add_parser("deltas")
    deltas.add_argument("--runs", type=int, default=3)
    deltas.add_argument("--chars", type=int, default=2000)
    deltas.add_argument("--delay-ms", type=float, default=5.0)
    browser = sub.add_parser("browser")
    browser.add_argument("--keys", type=int, default=40)
    opts = parser.parse_args()
    if opts.what == "deltas":
        asyncio.run(measure_deltas(opts.runs, opts.chars, opts.delay_ms))
    else:
        measure_browser(opts.keys)


if __name__ == "__main__":
    main()
