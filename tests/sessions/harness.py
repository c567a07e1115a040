"""A real Runtime with the JSONL store (and optionally more extensions) over the mock engine,
whose engine records every request it receives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from roder_ext_mock import MockEngine, MockProviderExtension

from roder_core import RoderExtension
from roder_core.ir import AgentInferenceRequest, InferenceEvent
from roder_core.kernel.services import InferenceTurnContext
from roder_core.runtime.runtime import Runtime
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from tests.builders import build_runtime


class RecordingEngine(MockEngine):
    """The mock engine, remembering each request (the summarizer's included)."""

    def __init__(self, script: list[dict[str, Any]] | None = None) -> None:
        super().__init__(script)
        self.requests: list[AgentInferenceRequest] = []

    async def stream_turn(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> AsyncIterator[InferenceEvent]:
        self.requests.append(request)
        async for event in super().stream_turn(ctx, request):
            yield event


def make_runtime(
    workspace: Path,
    script: list[dict[str, Any]] | None = None,
    *,
    extensions: list[RoderExtension] = (),  # type: ignore[assignment]
    config: RoderConfig | None = None,
    store: bool = True,
    mode: str = "bypass",
    engine: RecordingEngine | None = None,
) -> tuple[Runtime, RecordingEngine]:
    """``engine``: a recording engine of the test's own (it brings its script)."""
    mock = MockProviderExtension(script)
    engine = engine or RecordingEngine(script)
    mock.engine = engine
    runtime = build_runtime(workspace, engine=mock, extensions=extensions, store=store, config=config, mode=mode)
    return runtime, engine


def thread_file(thread_id: str) -> Path:
    return RoderPaths.from_env().threads_dir / f"{thread_id}.jsonl"
