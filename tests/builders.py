"""The one way tests build a Runtime or an in-process client, and wait for what they do.

``build_runtime`` installs real extensions (an engine: the scripted mock by default, or a
provider extension speaking to a loopback server) into a real registry and builds a real
``Runtime``; the area harnesses (``tests/core/harness.py``, ``tests/sessions/harness.py``, ...)
only choose what to install. ``build_client`` starts a ``LocalAppClient`` the way ``roder``
does; ``scripted_client`` does that with the mock engine playing a script of steps, and
``turn_tool_results`` runs one turn on it and collects the tool results the turn produced.
``bus_event`` and ``next_event`` wait for an event: a slow machine makes a test slower, never
wrong.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from roder_ext_mock import MockProviderExtension

from roder_core import ExtensionRegistryBuilder, RoderExtension
from roder_core.runtime.bootstrap import StartSettings
from roder_core.runtime.runtime import Runtime, RuntimeOptions
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import (
    THREAD_READ,
    THREAD_START,
    TURN_START,
    ThreadReadParams,
    ThreadStartParams,
    TurnStartParams,
)
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from roder_core.threads.events import RuntimeEvent

T = TypeVar("T")

#: How long an event wait may take before the test fails (generous: the suite runs under load).
EVENT_TIMEOUT = 30.0


def build_runtime(
    workspace: Path,
    *,
    script: list[dict[str, Any]] | None = None,
    engine: RoderExtension | None = None,
    extensions: Iterable[RoderExtension] = (),
    store: bool = False,
    provider: str = "mock",
    model: str | None = None,
    mode: str = "bypass",
    interactive: bool = False,
    config: RoderConfig | None = None,
    paths: RoderPaths | None = None,
    **options: Any,
) -> Runtime:
    """A Runtime over ``engine`` (default: the mock engine playing ``script``) and
    ``extensions``; ``store`` adds the JSONL thread store under the test's RODER_HOME."""
    paths = paths or RoderPaths.from_env()
    builder = ExtensionRegistryBuilder()
    builder.install(engine or MockProviderExtension(script))
    if store:
        from roder_ext_jsonl_store import JsonlThreadStoreExtension

        builder.install(JsonlThreadStoreExtension(paths.threads_dir))
    for extension in extensions:
        builder.install(extension)
    return Runtime(
        builder.build(),
        RuntimeOptions(
            cwd=workspace,
            paths=paths,
            config=config or RoderConfig(),
            mode=mode,
            provider=provider,
            model=model,
            interactive=interactive,
            **options,
        ),
    )


def build_client(workspace: Path, **settings: Any) -> LocalAppClient:
    """An in-process control-plane client over a runtime built like ``roder`` builds it
    (``provider`` defaults to the mock engine)."""
    settings.setdefault("provider", "mock")
    return LocalAppClient.start(StartSettings(cwd=workspace, **settings))


def scripted_client(
    workspace: Path,
    tmp_path: Path,
    steps: list[dict[str, Any]],
    *,
    provider: str = "mock",
    env: dict[str, str] | None = None,
) -> LocalAppClient:
    """An in-process client (bypass mode, headless) whose mock engine plays ``steps`` (each a
    step of the mock's script: ``{"tool_calls": [...]}`` or ``{"text": ...}``); ``env`` is
    added to the test's own environment."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    full_env = {**os.environ, **(env or {}), "RODER_MOCK_SCRIPT": str(script)}
    settings = StartSettings(cwd=workspace, provider=provider, mode="bypass", interactive=False, env=full_env)
    return LocalAppClient.start(settings)


def tool_steps(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A script that makes each call in its own model step, then answers "done"."""
    return [{"tool_calls": [call]} for call in calls] + [{"text": "done"}]


async def turn_tool_results(app: LocalAppClient, prompt: str = "go", timeout: float = 120.0) -> list[Any]:
    """Run one turn in a new thread until ``turn/completed``; the tool results it produced, in order."""
    thread = (await app.call(THREAD_START, ThreadStartParams())).thread
    events = app.subscribe(thread.id)
    await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt=prompt))
    async with asyncio.timeout(timeout):
        async for note in events:
            if note.method == "turn/completed":
                break
    read = (await app.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
    return [item for turn in read.turns for item in turn.items if item.type == "toolResult"]


async def bus_event(
    runtime: Runtime, matches: Callable[[RuntimeEvent], bool], start: Callable[[], Awaitable[Any]]
) -> RuntimeEvent:
    """Run ``start()`` and return the first event the runtime publishes that ``matches``."""
    seen: asyncio.Future[RuntimeEvent] = asyncio.get_running_loop().create_future()

    def listen(event: RuntimeEvent) -> None:
        if not seen.done() and matches(event):
            seen.set_result(event)

    remove = runtime.bus.add_listener(listen)
    try:
        await start()
        async with asyncio.timeout(EVENT_TIMEOUT):
            return await seen
    finally:
        remove()


async def next_event(events: AsyncIterator[Any], method: str, **match: Any) -> Any:
    """The next notification named ``method`` (with these field values) on a client's stream."""

    async def find() -> Any:
        async for event in events:
            if event.method == method and all(getattr(event, k) == v for k, v in match.items()):
                return event
        raise AssertionError(f"the event stream ended before {method}")

    async with asyncio.timeout(EVENT_TIMEOUT):
        return await find()


async def until(condition: Callable[[], bool], timeout: float = EVENT_TIMEOUT) -> None:
    """Wait for a condition that another process or a socket changes (an editor's updates, a
    server noticing a disconnect), where there is no event to wait on: checked every 20 ms,
    failing only after ``timeout``."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def wait_until(condition: Callable[[], T], what: str, timeout: float = EVENT_TIMEOUT) -> T:
    """``until`` for synchronous tests watching another process (a batch driver's workers, a
    file it writes): checked every 20 ms until it returns something true, which it returns;
    fails with ``what`` only after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.02)
    return value
