"""Background tasks of the app server: params run on an installed ``TaskExecutor``.

Tasks live as long as the server; ``tasks/subscribe`` makes a connection receive
``tasks/updated`` for one task or all. Closing the server cancels what still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from roder_core.ir import new_id
from roder_core.server.errors import InvalidParams
from roder_core.server.protocol_features import TaskModel, TaskUpdated

log = logging.getLogger(__name__)

#: Finished tasks kept for tasks/list and tasks/get.
KEEP_FINISHED = 500


class TaskManager:
    def __init__(self, executors: dict[str, Any]) -> None:
        self.executors = executors
        self.tasks: dict[str, TaskModel] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        #: (task id or None for all, notify callback)
        self._subscribers: list[tuple[str | None, Callable[[Any], None]]] = []

    def subscribe(self, task_id: str | None, notify: Callable[[Any], None]) -> None:
        if task_id is not None and task_id not in self.tasks:
            raise InvalidParams(f"no task {task_id!r}")
        self._subscribers.append((task_id, notify))

    def _publish(self, task: TaskModel) -> None:
        for wanted, notify in list(self._subscribers):
            if wanted is None or wanted == task.id:
                notify(TaskUpdated(task=task.model_copy()))

    def _update(self, task: TaskModel, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(task, key, value)
        self._publish(task)

    def submit(self, executor_id: str, params: dict[str, Any], **context: Any) -> TaskModel:
        executor = self.executors.get(executor_id)
        if executor is None:
            known = ", ".join(sorted(self.executors)) or "none installed"
            raise InvalidParams(f"unknown task executor {executor_id!r} (available: {known})")
        task = TaskModel(
            id=new_id("task"), executor_id=executor_id, status="queued", params=params, created_at=time.time(), **context
        )
        self.tasks[task.id] = task
        self._running[task.id] = asyncio.create_task(self._run(task, executor), name=f"task {task.id}")
        self._trim()
        return task

    async def _run(self, task: TaskModel, executor: Any) -> None:
        self._update(task, status="running")
        try:
            result = await executor.run(dict(task.params))
        except asyncio.CancelledError:
            self._update(task, status="cancelled", finished_at=time.time())
            raise
        except Exception as exc:
            log.info("task %s failed: %s", task.id, exc)
            self._update(task, status="failed", error=f"{type(exc).__name__}: {exc}", finished_at=time.time())
        else:
            self._update(task, status="completed", result=result, finished_at=time.time())
        finally:
            self._running.pop(task.id, None)

    def get(self, task_id: str) -> TaskModel:
        task = self.tasks.get(task_id)
        if task is None:
            raise InvalidParams(f"no task {task_id!r}")
        return task

    async def cancel(self, task_id: str) -> TaskModel:
        task = self.get(task_id)
        running = self._running.get(task_id)
        if running is not None:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running
            self._running.pop(task_id, None)
        if task.status in ("queued", "running"):  # cancelled before it ever started
            self._update(task, status="cancelled", finished_at=time.time())
        return task

    def _trim(self) -> None:
        finished = [t for t in self.tasks.values() if t.id not in self._running]
        for task in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            self.tasks.pop(task.id, None)

    async def aclose(self) -> None:
        for task_id in list(self._running):
            await self.cancel(task_id)
