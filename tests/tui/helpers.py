"""Helpers for the app tests: a RoderApp on the mock engine driven by a script, and polling."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import THREAD_START, ThreadStartParams
from roder_tui.app import RoderApp
from tests.builders import EVENT_TIMEOUT


def make_app(workspace: Path, steps: list[dict[str, Any]] | None = None, monkeypatch: Any = None, **args: Any) -> RoderApp:
    """The real app on the real runtime and client, with the mock engine playing ``steps``."""
    if steps is not None:
        script = workspace.parent / "mock-script.json"
        script.write_text(json.dumps({"steps": steps}))
        monkeypatch.setenv("RODER_MOCK_SCRIPT", str(script))
    namespace = argparse.Namespace(
        prompt=[], provider=args.pop("provider", "mock"), resume=None, continue_last=False, mode=None, model=None, sandbox="off"
    )
    for key, value in args.items():
        setattr(namespace, key, value)

    def factory() -> LocalAppClient:
        return LocalAppClient.start(StartSettings(cwd=workspace, provider=namespace.provider, mode=namespace.mode, sandbox="off"))

    app = RoderApp(namespace, client_factory=factory, cwd=workspace)
    app.animation_level = "none"  # as over SSH: scrolling jumps instead of animating (fast, deterministic)
    return app


async def until(pilot: Any, predicate: Callable[[], object], timeout: float = EVENT_TIMEOUT, what: str = "") -> None:
    """Let the app run until ``predicate()`` holds; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.02)


def shown(app: Any, kind: type) -> Any:
    """The app's screen if it is a ``kind`` and mounted (its children composed), else None: a
    pushed screen is ``app.screen`` a moment before its widgets exist, longer on a loaded machine."""
    screen = app.screen
    return screen if isinstance(screen, kind) and screen.is_mounted else None


async def ready(pilot: Any) -> RoderApp:
    app: RoderApp = pilot.app
    async with asyncio.timeout(20):
        await app.ready.wait()
    await pilot.pause()
    return app


def entries_of(app: RoderApp, kind: str) -> list[Any]:
    return [e for e in app.transcript.model.entries if e.kind == kind]


async def turn_done(pilot: Any, count: int = 1) -> None:
    """Wait until ``count`` assistant answers are final and no turn runs."""
    app: RoderApp = pilot.app
    await until(
        pilot,
        lambda: app.turn_id is None and len([e for e in entries_of(app, "assistant") if not e.live]) >= count,
        what=f"{count} finished answers",
    )


async def write_long_thread(workspace: Path, messages: int) -> str:
    """Persist a thread of ``messages`` messages (user/assistant pairs) through the real runtime
    and thread store; returns its id."""
    from roder_core.ir import AgentMessageItem, Turn, UserMessageItem, new_id
    from roder_core.threads.events import ItemCompleted, TurnCompleted, TurnStarted

    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock"))
    try:
        thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace), title="a very long session"))).thread
        runtime = client.runtime  # an embedding host writing history, as a resumed session would have
        for i in range(messages // 2):
            turn_id = new_id("turn")
            await runtime.emit(TurnStarted(thread_id=thread.id, turn_id=turn_id))
            await runtime.emit(
                ItemCompleted(
                    thread_id=thread.id, turn_id=turn_id, item=UserMessageItem(text=f"question {i}: what does step {i} do?")
                )
            )
            answer = (
                f"Answer {i}. Step {i} folds the event into **thread state** and calls `apply_event`.\n\n"
                f"- it is idempotent\n- it keeps order\n\n```python\nstate = apply_event(state, event_{i})\n```\n"
            )
            await runtime.emit(ItemCompleted(thread_id=thread.id, turn_id=turn_id, item=AgentMessageItem(text=answer)))
            await runtime.emit(TurnCompleted(thread_id=thread.id, turn=Turn(id=turn_id, status="completed")))
        return thread.id
    finally:
        await client.close()


def palette_searched(app: Any) -> bool:
    """The command palette is open and takes the keys, and its rows are loaded (it fetches them in
    a worker of its own group on each open; a search filters them at once)."""
    from textual.worker import WorkerState

    if app.panels is None:
        return False  # not mounted yet
    palette = app.panels[0]
    if not palette.is_open or app.screen.key_owner is not palette:
        return False
    searching = (WorkerState.PENDING, WorkerState.RUNNING)
    return bool(palette.rows) and not any(w.group == "palette-rows" and w.state in searching for w in palette.workers)


def help_shown(app: Any) -> bool:
    """The help panel is open and takes the keys."""
    return app.panels is not None and app.panels[1].is_open and app.screen.key_owner is app.panels[1]


async def open_palette(pilot: Any, query: str) -> None:
    """Open the command palette and type ``query``; returns once its hits are listed."""
    await pilot.press("ctrl+p")
    await until(pilot, lambda: palette_searched(pilot.app), what="the command palette")
    await pilot.press(*query)
    await until(pilot, lambda: palette_searched(pilot.app), what=f"the palette's hits for {query!r}")


async def palette(pilot: Any, query: str) -> None:
    """Open the command palette, type ``query`` and run the best match."""
    await open_palette(pilot, query)
    await pilot.press("enter")


async def ask(pilot: Any, text: str, answers: int = 1) -> None:
    """Type ``text``, send it, and wait until ``answers`` answers are final."""
    await pilot.press(*text, "enter")
    await turn_done(pilot, answers)
