"""Render throughput of long streamed answers in the real app (headless), with event-loop stalls.

    .venv/bin/python bench/tui_stream.py            # prose + 1,000-line code fence at 5,000 tok/s and flat out
    .venv/bin/python bench/tui_stream.py --quick    # smaller sizes

For each case a paced engine (bench/tui_harness.py) streams the answer through the real runtime
and client at a target rate (a token ~ 4 characters, 40-character deltas, catching up in bursts
like a network stream) or as fast as the loop allows (rate 0). Reported: the rate
actually produced, the end-to-end rate (first delta to final render), how far the screen lagged
behind the producer at the end, screen updates per second, and event-loop stall p50/p99/max.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_harness import PacedEngine, StallMonitor, code_fence, make_paced_app, prose, tokens_of, wait_for


async def run_case(name: str, text: str, rate: float) -> dict[str, object]:
    engine = PacedEngine()
    engine.text, engine.tokens_per_s = text, rate
    app = make_paced_app(engine)
    from roder_core.threads.events import AgentMessageDelta, TurnCompleted

    marks: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        client = app.client
        assert client is not None

        def on_event(event: object) -> None:
            if isinstance(event, AgentMessageDelta):
                marks.setdefault("first", time.perf_counter())
                marks["last"] = time.perf_counter()
            elif isinstance(event, TurnCompleted):
                marks["completed"] = time.perf_counter()

        client.runtime.bus.add_listener(on_event)
        monitor = StallMonitor()
        monitor.start()
        flushes_before = app.coalescer.flushes
        await app.send("go")

        def rendered() -> bool:
            answer = app.transcript.last_answer()
            return "completed" in marks and app.turn_id is None and answer is not None and not answer.live

        await wait_for(rendered)
        await pilot.pause()
        done = time.perf_counter()
        await monitor.stop()
        flushes = app.coalescer.flushes - flushes_before
        answer = app.transcript.last_answer()
        if answer is None or answer.items[0].text != text:
            got = answer.items[0].text if answer else ""
            i = next((k for k in range(min(len(got), len(text))) if got[k] != text[k]), min(len(got), len(text)))
            raise AssertionError(f"rendered text differs at {i}: {got[i - 20 : i + 20]!r} vs {text[i - 20 : i + 20]!r}")
    tokens = tokens_of(text)
    produce = marks["last"] - marks["first"]
    total = done - marks["first"]
    return {
        "case": name,
        "target_tok_s": rate or "max",
        "tokens": tokens,
        "produced_tok_s": round(tokens / produce) if produce else None,
        "rendered_tok_s": round(tokens / total),
        "lag_at_end_ms": round((done - marks["last"]) * 1000),
        "screen_updates_per_s": round(flushes / total, 1),
        **monitor.summary(),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    prose_lines, fence_lines = (300, 300) if opts.quick else (2000, 1000)
    cases = [
        (f"prose {prose_lines} lines", prose(prose_lines), 5000.0),
        (f"code fence {fence_lines} lines", code_fence(fence_lines), 5000.0),
        (f"prose {prose_lines} lines", prose(prose_lines), 0.0),
        (f"code fence {fence_lines} lines", code_fence(fence_lines), 0.0),
    ]
    rows = [await run_case(*case) for case in cases]
    if opts.json:
        print(json.dumps(rows, indent=2))
        return
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    asyncio.run(main())
