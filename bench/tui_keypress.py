"""Keypress-to-repaint latency while an answer streams (headless app, real runtime).

    .venv/bin/python bench/tui_keypress.py [--keys 40]

A paced engine streams a long answer at 5,000 tokens/s. Every 100 ms a key is sent to the
prompt the way the terminal driver sends it; the latency is the time from sending it until a
screen update that includes it has been composed. Reported with the idle latency (no stream).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_harness import PacedEngine, make_paced_app, prose, wait_for


async def measure(streaming: bool, keys: int) -> list[float]:
    from textual import events
    from textual._compositor import Compositor

    renders: list[float] = []
    original = Compositor.render_update

    def render_update(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, *args, **kwargs)
        renders.append(time.perf_counter())
        return result

    Compositor.render_update = render_update  # type: ignore[method-assign]
    from roder_tui.widgets.prompt import PromptInput

    applied: list[float] = []
    original_key = PromptInput._on_key

    async def on_key(self, event):  # type: ignore[no-untyped-def]
        await original_key(self, event)
        applied.append(time.perf_counter())

    PromptInput._on_key = on_key  # type: ignore[method-assign]
    engine = PacedEngine()
    engine.text, engine.tokens_per_s = prose(3000), 5000.0
    app = make_paced_app(engine)
    latencies: list[float] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await app.ready.wait()
            await pilot.pause(0.2)
            if streaming:
                await app.send("go")
                await wait_for(lambda: app.transcript.last_answer() is not None)
                await asyncio.sleep(0.5)
            driver = app._driver
            assert driver is not None
            for i in range(keys):
                char = "abcdefghij"[i % 10]
                count = len(applied)
                sent = time.perf_counter()
                key = events.Key(char, char)
                key.set_sender(app)
                driver.send_message(key)
                while len(applied) == count:
                    await asyncio.sleep(0.0005)
                done = applied[-1]
                while not renders or renders[-1] < done:
                    await asyncio.sleep(0.0005)
                latencies.append(next(r for r in renders if r >= done) - sent)
                await asyncio.sleep(0.1)
            if streaming:
                assert app.turn_id is not None, "the stream ended before the measurement did; make it longer"
    finally:
        Compositor.render_update = original  # type: ignore[method-assign]
        PromptInput._on_key = original_key  # type: ignore[method-assign]
    return latencies


def summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)]
    return (
        f"| {name} | {len(values)} | {statistics.median(values) * 1000:.0f} ms | {p99 * 1000:.0f} ms "
        f"| {max(values) * 1000:.0f} ms |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=40)
    opts = parser.parse_args()
    idle = await measure(False, opts.keys)
    busy = await measure(True, opts.keys)
    print("| condition | keys | median | p99 | max |")
    print("|---|---|---|---|---|")
    print(summary("idle", idle))
    print(summary("while streaming ~5,000 tok/s", busy))


if __name__ == "__main__":
    asyncio.run(main())
