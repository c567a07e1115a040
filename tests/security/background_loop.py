"""A runtime on the loopback model server with one background task already started (shared by
the attack tests that race a running task against later commands)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roder_core.runtime.runtime import Runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.security.test_background_network import call, results, start, wait_for_task


@dataclass
class Running:
    runtime: Runtime
    thread_id: str
    task_id: str
    #: The model's script: append a turn's steps before running it (``turn``).
    steps: list[dict[str, Any]]

    async def turn(self, *calls: dict[str, Any]) -> list[Any]:
        """One more turn of these tool calls; returns the results it added."""
        before = len(results(self.runtime, self.thread_id))
        self.steps += [{"tool_calls": [c]} for c in calls] + [{"text": "done"}]
        await self.runtime.run_turn(self.thread_id, "go on")
        return results(self.runtime, self.thread_id)[before:]


@contextlib.asynccontextmanager
async def background_task(workspace: Path, roder_home: Path, command: str, ready: str) -> AsyncIterator[Running]:
    """A runtime whose thread started ``command`` in the background and saw it print ``ready``."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=command, run_in_background=True)]},
        {"text": "started"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "start")
            task_id = results(runtime, thread.id)[0].data["task_id"]
            await wait_for_task(runtime, task_id, lambda t: t.last_line == ready or t.status != "running")
            yield Running(runtime, thread.id, task_id, steps)
        finally:
            await runtime.close()
