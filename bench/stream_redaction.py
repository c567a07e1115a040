"""What redacting live deltas as streams costs, with and without a configured secret.

Runs whole turns through ``Runtime.run_turn`` with the mock engine streaming 20,000 characters of
real markdown (the documentation page docs/security.md) in 4-character deltas (5,000 deltas, a token each), with
a bus subscriber reading every event like a transport, under four redactor setups: none at all,
token formats only (no secret known), two known secrets (an environment key and a stored
provider key) and twenty. Then, per delta: the stream redactor alone, the chunk-by-chunk event
redaction it replaced, and how often a delta is held back (latency) in each setup; command
output (bytes, 64 KB reads) through the byte stream redactor; and per item event, three ways of
making it an immutable snapshot.

Usage: python bench/stream_redaction.py [--turns 5] [--chars 20000] [--chunk 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KEY = "Zq9xTt4Lm2Pp8Rr1Vv6Nn3Ww5"
STORED = "sk-or-v1-" + "Hh4Jj" * 12


def setups() -> dict[str, Any]:
    from roder_core.brokers.secrets import SecretRedactor

    two = SecretRedactor({"MY_SERVICE_API_KEY": KEY})
    two.add("openrouter key", STORED)
    twenty = SecretRedactor({f"SECRET_{i}_TOKEN": f"{KEY[i:]}{i:04d}{KEY[:i]}" for i in range(18)})
    twenty.add("openrouter key", STORED)
    twenty.add("MY_SERVICE_API_KEY", KEY)
    return {"no redactor": None, "formats only (no secret)": SecretRedactor(), "2 secrets": two, "20 secrets": twenty}


async def turn_cpu(text: str, chunk: int, redactor: Any, turns: int, home: Path) -> tuple[float, float]:
    """Median CPU and wall time of one streamed turn (5,000 deltas) read by a subscriber."""
    from roder_ext_mock import MockProviderExtension

    from roder_core import ExtensionRegistryBuilder
    from roder_core.runtime.runtime import Runtime, RuntimeOptions
    from roder_core.settings.paths import RoderPaths
    from roder_core.threads.events import AgentMessageDelta

    builder = ExtensionRegistryBuilder()
    builder.install(MockProviderExtension([{"text": text, "chunk_size": chunk}] * (turns + 1)))
    paths = RoderPaths.from_env({"RODER_HOME": str(home)})
    runtime = Runtime(builder.build(), RuntimeOptions(cwd=home, paths=paths, provider="mock", mode="bypass", redactor=redactor))
    thread = await runtime.start_thread(ephemeral=True)
    cpu, wall = [], []
    for index in range(turns + 1):
        queue = runtime.bus.subscribe(maxsize=100_000)
        received: list[str] = []

        async def reader(queue: Any = queue, received: list[str] = received) -> None:
            async for event in queue:
                if isinstance(event, AgentMessageDelta):
                    received.append(event.delta)

        task = asyncio.create_task(reader())
        started_cpu, started = time.process_time(), time.perf_counter()
        await runtime.run_turn(thread.id, "go")
        queue.close()
        await task
        if index:  # the first turn warms up
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started)
        assert "".join(received) == (redactor(text) if redactor else text)
    return statistics.median(cpu), statistics.median(wall)


def per_delta(text: str, chunk: int, redactor: Any) -> dict[str, float]:
    """Stream redactor alone, per chunk; and how often a chunk is held back, by how much."""
    pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    stream = redactor.stream()
    started = time.perf_counter()
    held = 0
    held_chars = 0
    for piece in pieces:
        stream.feed(piece)
        if stream.held:
            held += 1
            held_chars += stream.held
    stream.flush()
    seconds = time.perf_counter() - started
    return {"us": seconds / len(pieces) * 1e6, "held": held / len(pieces), "held_chars": held_chars / max(held, 1)}


def old_chunk_redaction(redactor: Any) -> float:
    """The redaction each delta used to get: the event dumped, every string redacted, rebuilt."""
    from roder_core.brokers.secrets import redact_data
    from roder_core.threads.events import AgentMessageDelta, parse_event

    delta = AgentMessageDelta(thread_id="thr_1", turn_id="turn_1", item_id="item_1", delta=" the")

    def once() -> None:
        data, changed = redact_data(delta.model_dump(mode="json", by_alias=True), redactor)
        if changed:
            parse_event(data)

    return timeit.timeit(once, number=20_000) / 20_000 * 1e6


def command_output_rates(redactor: Any) -> str:
    """MB/s of the byte stream redactor over 10 MB of Python sources and of docs/security.md (which
    mentions token formats, so it takes the slow path more often), in 64 KB reads."""
    import asyncio as stdlib_asyncio

    sources = b"".join(p.read_bytes() for p in sorted(Path(stdlib_asyncio.__file__).parent.glob("*.py")))
    rates = []
    for sample in (sources, (REPO / "docs" / "security.md").read_bytes()):
        data = (sample * (10_000_000 // len(sample) + 1))[:10_000_000]
        stream = redactor.byte_stream()
        started = time.perf_counter()
        for offset in range(0, len(data), 65536):
            stream.feed(data[offset : offset + 65536])
        stream.flush()
        rates.append(f"{len(data) / (time.perf_counter() - started) / 1e6:.0f} MB/s")
    return " / ".join(rates)


def snapshot_costs() -> list[tuple[str, float, float, float]]:
    from roder_core.ir import AgentMessageItem, FileChange, FileChangeItem, ToolResultItem
    from roder_core.threads.events import ItemStarted, parse_event

    rows = []
    for label, item in (
        ("agent message, 60 chars", AgentMessageItem(text="hello " * 10)),
        ("tool result, 30 KB", ToolResultItem(call_id="c", name="bash", text="x" * 30_000, data={"a": [1, 2]})),
        ("file change, 5 diffs", FileChangeItem(changes=[FileChange(path="a", kind="add", diff="+x\n" * 500)] * 5)),
    ):
        event = ItemStarted(thread_id="t", turn_id="u", item=item)
        dumped = event.model_dump(mode="json", by_alias=True)

        def shallow(event: Any = event) -> Any:
            return event.model_copy(update={"item": event.item.model_copy()})

        def deep(event: Any = event) -> Any:
            return event.model_copy(update={"item": event.item.model_copy(deep=True)})

        def reparse(dumped: Any = dumped) -> Any:
            return parse_event(dumped)

        rows.append((label, *(timeit.timeit(f, number=3000) / 3000 * 1e6 for f in (shallow, deep, reparse))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=4)
    args = parser.parse_args()
    readme = (REPO / "docs" / "security.md").read_text()
    text = (readme * (args.chars // len(readme) + 1))[: args.chars]
    deltas = len(text) // args.chunk
    print(f"{deltas} deltas of {args.chunk} characters per turn, {args.turns} turns per setup (median)\n")
    print(
        "| redactor | CPU per turn | deltas/s (CPU) | wall per turn | stream redactor per delta | deltas held back | "
        "held, mean | old chunk-by-chunk redaction per delta |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as home:
        for label, redactor in setups().items():
            cpu, wall = asyncio.run(turn_cpu(text, args.chunk, redactor, args.turns, Path(home)))
            if redactor is None:
                detail = ["-", "-", "-", "-"]
            else:
                stats = per_delta(text, args.chunk, redactor)
                detail = [
                    f"{stats['us']:.1f} µs",
                    f"{stats['held']:.1%}",
                    f"{stats['held_chars']:.1f} chars",
                    f"{old_chunk_redaction(redactor):.1f} µs",
                ]
            print(f"| {label} | {cpu * 1000:.0f} ms | {deltas / cpu:,.0f} | {wall * 1000:.0f} ms | " + " | ".join(detail) + " |")
    print("\n| command output redaction (sources / docs page) | MB/s |")
    print("| --- | --- |")
    for label, redactor in list(setups().items())[1:]:
        print(f"| {label} | {command_output_rates(redactor)} |")
    print("\n| item event snapshot | shallow model_copy | deep model_copy | dump + parse_event |")
    print("| --- | --- | --- | --- |")
    for label, shallow, deep, reparse in snapshot_costs():
        print(f"| {label} | {shallow:.1f} µs | {deep:.1f} µs | {reparse:.1f} µs (+ the dump redaction already makes) |")


if __name__ == "__main__":
    main()
