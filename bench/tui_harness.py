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

WORDS = [
    "the",
    "runtime",
    "folds",
    "every",
    "event",
    "into",
    "thread",
    "state",
    "and",
    "the",
    "transcript",
    "renders",
    "only",
    "what",
    "is",
    "near",
    "the",
    "viewport",
    "so",
    "long",
    "sessions",
    "stay",
    "fast",
    "while",
    "`code spans`",
    "and",
    "**bold words**",
    "stream",
    "in",
]


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


class PacedEngine:
    """An inference engine that streams ``text`` at ``tokens_per_s`` (0: as fast as the loop
    allows), in ``chunk``-character deltas (40 unless told), catching up in bursts when the loop was busy, as a network
    stream does. The mock engine's fixed per-delta sleeps cannot hold a rate under load."""

    def __init__(self, chunk: int = 40) -> None:
        self.text = ""
        self.tokens_per_s = 0.0
        self.chunk = chunk

    def id(self) -> str:
        return "paced"

    def metadata(self) -> Any:
        from roder_core.kernel.services import InferenceProviderMetadata

        return InferenceProviderMetadata(name="Paced (bench)", auth_type="none", auth_configured=True)

    def default_model(self) -> str:
        return "paced"

    def model_profile(self, model: str) -> Any:
        from roder_core.ir import ModelProfile

        return ModelProfile(id=model, provider="paced")

    async def list_models(self) -> list[Any]:
        return [self.model_profile("paced")]

    async def stream_turn(self, ctx: Any, request: Any) -> Any:
        from roder_core.ir import CompletedEvent, MessageDelta, Usage, UsageEvent

        text, rate = self.text, self.tokens_per_s * 4
        start, sent = time.perf_counter(), 0
        while sent < len(text):
            await asyncio.sleep(0.005 if rate else 0)
            due = min(len(text), int((time.perf_counter() - start) * rate)) if rate else min(len(text), sent + 400)
            while sent < due:
                piece = text[sent : sent + self.chunk]
                sent += len(piece)
                yield MessageDelta(text=piece)
        yield UsageEvent(usage=Usage(input_tokens=100, output_tokens=tokens_of(text)))
        yield CompletedEvent()


def make_paced_app(engine: PacedEngine) -> Any:
    """A RoderApp whose runtime has the paced engine besides the installed extensions."""
    home = Path(tempfile.mkdtemp(prefix="roder-tui-bench-"))
    os.environ["RODER_HOME"] = str(home)
    ws = Path(tempfile.mkdtemp(prefix="roder-tui-bench-ws-"))
    from roder_core import EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension
    from roder_core.kernel.distribution import build_distribution, discovered_factories, make_host
    from roder_core.runtime.runtime import Runtime, RuntimeOptions
    from roder_core.server.client import LocalAppClient
    from roder_tui.app import RoderApp

    class PacedExtension(RoderExtension):
        def manifest(self) -> ExtensionManifest:
            return ExtensionManifest(
                id="bench-paced",
                name="Paced engine",
                version="0.1.0",
                api_version=EXTENSION_API_VERSION,
                description="benchmark stream",
                provides=[ProvidedService.InferenceEngine("paced")],
                required_capabilities=[],
            )

        def install(self, registry: Any) -> None:
            registry.inference_engine(engine)

    def factory() -> LocalAppClient:
        host = make_host(ws)
        dist = build_distribution(host, [*discovered_factories(), ("bench", lambda _host: PacedExtension())])
        options = RuntimeOptions(
            cwd=host.cwd, paths=host.paths, config=host.config, provider="paced", model="paced", trusted=False
        )
        return LocalAppClient.for_runtime(Runtime(dist.registry, options))

    args = argparse.Namespace(prompt=[], provider="paced", resume=None, continue_last=False)
    return RoderApp(args, client_factory=factory, cwd=ws)


def make_app(steps: list[dict[str, Any]], workspace: Path | None = None) -> Any:
    """A RoderApp on the mock engine playing ``steps``, with its own RODER_HOME."""
    home = Path(tempfile.mkdtemp(prefix="roder-tui-bench-"))
    os.environ["RODER_HOME"] = str(home)
    script = home / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    os.environ["RODER_MOCK_SCRIPT"] = str(script)
    ws = workspace or Path(tempfile.mkdtemp(prefix="roder-tui-bench-ws-"))
    from roder_core.runtime.bootstrap import StartSettings
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
