"""Harness overhead per model call: Roder's engines vs a bare httpx stream of the same bytes.

The loopback fake server (roder_core/testing/fake_server.py) runs in its own process and answers
every call with the same streamed response: reasoning plus text in small deltas (a few hundred SSE
events). For each dialect, in the same run and interleaved so drift hits all alike:

- bare:    httpx streams the response body and discards it (the floor: HTTP + bytes);
- engine:  the dialect engine's ``stream_turn`` (request encoding, SSE framing, JSON decoding,
           canonical events, replay guard);
- runtime: a whole one-call turn through ``Runtime.run_turn`` (context assembly, the turn loop,
           items and events on the bus), no thread store.

Usage: python bench/provider_overhead.py [--calls 60] [--warmup 5] [--text 4000] [--chunk 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DIALECT_MODELS = {"chat-completions": "gpt-4.1", "responses": "gpt-5", "anthropic-messages": "claude-sonnet-4-6"}


def start_server(step: dict, copies: int, workdir: Path) -> tuple[subprocess.Popen[str], str]:
    script = workdir / "script.json"
    script.write_text(json.dumps({"steps": [step] * copies}))
    process = subprocess.Popen(
        [sys.executable, "-m", "roder_core.testing.fake_server", "--script", str(script), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def measure_dialect(args: argparse.Namespace, base_url: str, dialect: str, bare: Any) -> dict[str, list[float]]:
    from roder_core import ExtensionRegistryBuilder
    from roder_core.kernel.services import InferenceTurnContext
    from roder_core.providers.extension import ProviderExtension
    from roder_core.runtime.runtime import Runtime, RuntimeOptions
    from roder_core.settings.config import RoderConfig
    from roder_core.settings.paths import RoderPaths
    from tests.providers.helpers import make_engine, make_request

    model = DIALECT_MODELS[dialect]
    engine = make_engine(dialect, base_url)
    request = make_request("Summarise the repository.", model=model, tools=False)
    payload = json.dumps(engine.encode(request, engine.model_profile(model)), separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "accept": "text/event-stream", **engine.auth_headers()}
    url = engine.transport.url(engine.path)
    builder = ExtensionRegistryBuilder()
    builder.install(ProviderExtension(make_engine(dialect, base_url)))
    runtime = Runtime(
        builder.build(),
        RuntimeOptions(
            cwd=Path(tempfile.mkdtemp(prefix="roder-bench-ws-")),
            paths=RoderPaths.from_env(),
            config=RoderConfig(),
            mode="bypass",
            provider="fake",
            model=model,
        ),
    )
    thread = await runtime.start_thread(ephemeral=True)

    async def run_bare() -> None:
        async with bare.stream("POST", url, content=payload, headers=headers) as response:
            async for _chunk in response.aiter_bytes():
                pass

    async def run_engine() -> None:
        text = 0
        async for event in engine.stream_turn(InferenceTurnContext("t", "u"), request):
            text += len(getattr(event, "text", "")) if event.type == "message_delta" else 0
        assert text == args.text, f"got {text} characters, expected {args.text}: is the script long enough?"

    async def run_runtime() -> None:
        turn = await runtime.run_turn(thread.id, "Summarise the repository.")
        assert turn.status == "completed", turn.error
        runtime.thread(thread.id).turns.clear()  # keep every call the same size

    runners = {"bare": run_bare, "engine": run_engine, "runtime": run_runtime}
    timings: dict[str, list[float]] = {key: [] for name in runners for key in (name, f"{name}_cpu")}
    for index in range(args.warmup + args.calls):
        for name, runner in runners.items():
            started, cpu = time.perf_counter(), time.process_time()
            await runner()
            if index >= args.warmup:
                timings[name].append((time.perf_counter() - started) * 1000)
                timings[f"{name}_cpu"].append((time.process_time() - cpu) * 1000)
    await engine.aclose()
    await runtime.close()
    return timings


async def measure(args: argparse.Namespace, base_url: str) -> dict[str, dict[str, list[float]]]:
    import httpx

    bare = httpx.AsyncClient(timeout=60)
    try:
        return {dialect: await measure_dialect(args, base_url, dialect, bare) for dialect in DIALECT_MODELS}
    finally:
        await bare.aclose()


def events_per_call(step: dict) -> int:
    from roder_core.testing.fake_server import RENDERERS

    return {d: len(RENDERERS[d](step, {"stream_options": {"include_usage": True}}, 1)) for d in DIALECT_MODELS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--text", type=int, default=4000, help="characters of answer text per call")
    parser.add_argument("--chunk", type=int, default=16, help="characters per delta")
    args = parser.parse_args()
    os.environ.setdefault("RODER_HOME", tempfile.mkdtemp(prefix="roder-bench-home-"))
    words = ("the quick brown fox jumps over the lazy dog " * (args.text // 44 + 1))[: args.text]
    step = {"reasoning": words[: args.text // 4], "text": words, "chunk_size": args.chunk}
    counts = events_per_call(step)
    copies = (args.calls + args.warmup) * 3 * len(DIALECT_MODELS) + 10  # three paths per round
    with tempfile.TemporaryDirectory() as tmp:
        server, base_url = start_server(step, copies, Path(tmp))
        try:
            results = asyncio.run(measure(args, base_url))
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(
        f"{args.calls} calls per path, {args.text} chars of text + {args.text // 4} of reasoning, "
        f"{args.chunk}-char deltas; load average {os.getloadavg()[0]:.1f}\n"
    )
    print("Wall time per call, median (p90); CPU time of the client process per call, median.\n")
    print(
        "| dialect | SSE events | bare httpx | engine | runtime turn | CPU bare | CPU engine | CPU runtime "
        "| engine CPU - bare CPU | per event |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dialect, timings in results.items():
        med = {name: statistics.median(values) for name, values in timings.items()}
        p90 = {name: statistics.quantiles(values, n=10)[-1] for name, values in timings.items()}
        extra = med["engine_cpu"] - med["bare_cpu"]
        walls = " | ".join(f"{med[n]:.1f} ms ({p90[n]:.1f})" for n in ("bare", "engine", "runtime"))
        cpus = " | ".join(f"{med[n + '_cpu']:.1f} ms" for n in ("bare", "engine", "runtime"))
        print(f"| {dialect} | {counts[dialect]} | {walls} | {cpus} | {extra:.1f} ms | {extra * 1000 / counts[dialect]:.0f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
