"""Shared pieces of the TUI benchmarks: a headless RoderApp on the mock engine, an event-loop
stall monitor and synthetic answers (prose, a long code fence).

The app runs exactly as a user gets it (runtime -> in-process client -> notification pump ->
coalescer -> transcript); only the terminal is headless.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ["the", "runtime", "folds", "every", "event", "into", "thread", "state", "and", "the", "transcript",
         "renders", "only", "what", "is", "near", "the", "viewport", "so", "long", "sessions", "stay", "fast",
         "while", "`code spans`", "and", "**bold words**", "stream", "in"]


def prose(lines: int) -> str:
    """Markdown prose: headings, paragraphs and bullet lists, about 80 characters a line."""
    out: list[str] = []
    for i in range(lines):
        if i % 12 == 0:
            out.append(f"## Section {i // 12 + 1}")
        elif i % 6 in (1, 5):
            out.append("")
        elif i % 6 == 4:
            out.append(f"- item {i}: " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(9)))
        else:
            out.append(" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(13)))
    return "\n".join(out) + "\n"


def code_fence(lines: int) -> str:
    body = [f"    value_{i} = compute(value_{max(i - 1, 0)}, factor={i % 7})  # step {i}" for i in range(lines)]
    return "Here is the module:\n\n```python\ndef generated():\n" + "\n".join(body) + "\n```\n\nDone.\n"


def tokens_of(text: str) -> int:
    return max(len(text) // 4, 1)


class StallMonitor:
    """Measures event-loop stalls: how late a 5 ms sleep wakes up, sampled continuously."""

    def __init__(self, period: float = 0.005) -> None:
        self.period = period
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.period)
            self.lags.append(max(time.perf_counter() - start - self.period, 0.0))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def p(self, q: float) -> float:
        if not self.lags:
            return 0.0
        ordered = sorted(self.lags)
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]

    def summary(self) -> dict[str, float]:
        return {
            "stall_p50_ms": round(self.p(0.50) * 1000, 1),
            "stall_p99_ms": round(self.p(0.99) * 1000, 1),
            "stall_max_ms": round(max(self.lags, default=0.0) * 1000, 1),
            "samples": len(self.lags),
        }


def make_app(steps: list[dict[str, Any]], workspace: Path | None = None) -> Any:
    """A RoderApp on the mock engine playing ``steps``, with its own RODER_HOME."""
    home = Path(tempfile.mkdtemp(prefix="roder-bench-"))
    os.environ["RODER_HOME"] = str(home)
    script = home / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    os.environ["RODER_MOCK_SCRIPT"] = str(script)
    ws = workspace or Path(tempfile.mkdtemp(prefix="roder-bench-ws-"))
    from roder_core.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient
    from roder_tui.app import RoderApp

    args = argparse.Namespace(prompt=[], provider="mock", resume=None, continue_last=False)
    return RoderApp(args, client_factory=lambda: LocalAppClient.start(StartSettings(cwd=ws, provider="mock")), cwd=ws)


async def wait_for(predicate: Any, timeout: float = 600.0, step: float = 0.01) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("benchmark condition not reached")
        await asyncio.sleep(step)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0
