"""The one way tests build a Runtime or an in-process client, and wait for what they do.

``build_runtime`` installs real extensions (an engine: the scripted mock by default, or a
provider extension speaking to a loopback server) into a real registry and builds a real
``Runtime``; the area harnesses (``tests/core/harness.py``, ``tests/sessions/harness.py``, ...)
only choose what to install. ``build_client`` starts a ``LocalAppClient`` the way ``roder``
does. ``bus_event`` and ``next_event`` wait for an event: a slow machine makes a test slower,
never wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from roder_ext_mock import MockProviderExtension

from roder_core import ExtensionRegistryBuilder, RoderExtension
from roder_core.runtime.bootstrap import StartSettings
from roder_core.runtime.runtime import Runtime, RuntimeOptions
from roder_core.server.client import LocalAppClient
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
