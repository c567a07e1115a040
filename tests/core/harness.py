"""Builds a real Runtime from real extensions (mock engine + test tools) for core tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from roder_core import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    ExtensionRegistryBuilder,
    ProvidedService,
    RoderExtension,
    Tool,
    ToolRegistry,
    ToolResult,
)
from roder_core.runtime.runtime import Runtime
from roder_core.settings.config import RoderConfig
from tests.builders import build_runtime, bus_event


class SleepTool(Tool):
    """Sleeps, records when it ran, optionally 'writes' a path (for the mutation queue).

    Tests wait on its events, never on the clock: ``wait_started(n)`` returns once ``n`` calls
    are running; a call with ``hold`` waits for ``release()``; calls with ``meet: n`` each wait
    until ``n`` calls are running at once (so they only succeed when they really overlap)."""

    name = "sleep"
    description = "Sleep for a while."
    parameters = {
        "type": "object",
        "properties": {
            "seconds": {"type": "number"},
            "path": {"type": "string"},
            "label": {"type": "string"},
            "hold": {"type": "boolean"},
            "meet": {"type": "integer"},
        },
    }
    kind = "edit"

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self.cancelled: list[str] = []
        self.started: list[str] = []
        self.running = 0
        self._changed = asyncio.Event()
        self._released = asyncio.Event()

    async def _until(self, done: Any, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    async def wait_started(self, count: int = 1) -> None:
        await self._until(lambda: len(self.started) >= count)

    def release(self) -> None:
        self._released.set()

    def mutated_paths(self, arguments: dict[str, Any], workspace: Path) -> list[str]:
        return [arguments["path"]] if arguments.get("path") else []

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        start = time.monotonic()
        self.started.append(call.arguments.get("label", call.id))
        self.running += 1
        self._changed.set()
        try:
            if call.arguments.get("meet"):
                await self._until(lambda: self.running >= int(call.arguments["meet"]), timeout=20)
            if call.arguments.get("hold"):
                async with asyncio.timeout(30):
                    await self._released.wait()
            await asyncio.sleep(float(call.arguments.get("seconds", 0.05)))
        except asyncio.CancelledError:
            self.cancelled.append(call.arguments.get("label", call.id))
            raise
        finally:
            self.running -= 1
            self._changed.set()
        self.spans.append((call.arguments.get("label", call.id), start, time.monotonic()))
        return ToolResult(id=call.id, name=call.name, text=f"slept {call.arguments.get('label', '')}")


class ReadTool(Tool):
    name = "peek"
    description = "A read-only tool."
    parameters = {"type": "object", "properties": {"x": {"type": "string"}}}
    read_only = True
    kind = "read"

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text=f"peeked {call.arguments.get('x', '')}")


class Tools:
    def __init__(self, tools: list[Tool]) -> None:
        self.items = tools

    def id(self) -> str:
        return "test-tools"

    def contribute(self, registry: ToolRegistry) -> None:
        for tool in self.items:
            registry.register(tool)


class TestExtension(RoderExtension):
    __test__ = False

    def __init__(self, tools: list[Tool], hooks: list[Any] | None = None) -> None:
        self.tools = tools
        self.hooks = hooks or []

    def manifest(self) -> ExtensionManifest:
        provides = [ProvidedService.ToolProvider("test-tools")]
        provides += [ProvidedService.Hook(h.id()) for h in self.hooks]
        return ExtensionManifest(
            id="test-ext",
            name="Test",
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description="tools for tests",
            provides=provides,
        )

    def install(self, registry: ExtensionRegistryBuilder) -> None:
        registry.tool_contributor(Tools(self.tools))
        for hook in self.hooks:
            registry.hook(hook)


def make_runtime(
    workspace: Path,
    script: list[dict[str, Any]] | None = None,
    tools: list[Tool] | None = None,
    hooks: list[Any] | None = None,
    mode: str = "bypass",
    interactive: bool = True,
    config: RoderConfig | None = None,
    **options: Any,
) -> Runtime:
    """The mock engine playing ``script`` and the test tools (``SleepTool``, ``ReadTool`` by default)."""
    tools = tools if tools is not None else [SleepTool(), ReadTool()]
    extension = TestExtension(tools, hooks)
    return build_runtime(
        workspace, script=script, extensions=[extension], mode=mode, interactive=interactive, config=config, **options
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def first_event(runtime: Runtime, kind: type, start: Any) -> None:
    """Run ``start()`` (which begins a turn) and return once the runtime published an event of ``kind``."""
    await bus_event(runtime, lambda event: isinstance(event, kind), start)
