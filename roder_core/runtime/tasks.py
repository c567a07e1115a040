"""Background tasks: installed ``TaskExecutor`` services run work that outlives a tool call.

One table per runtime, so a task started by the model (``bash`` with ``run_in_background``)
and one started by a client (``tasks/submit``) are the same kind of thing: listed together,
read with ``task_output``, stopped with ``task_kill`` or ``tasks/cancel``. A task that belongs
to a thread runs with that thread's brokers (its workspace, its loopback network) and is
stopped when the thread is closed, unless the user chose to keep it. Every task writes to an
output log (``brokers.task_log``); listeners (``tasks/subscribe``, the TUI's tasks panel)
hear about every change of status and, at most a few times a second, of the last output line.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from roder_core.brokers import Brokers
from roder_core.brokers.own_folders import thread_folder
from roder_core.brokers.task_log import TaskLog, TaskOutputSlice
from roder_core.errors import RoderError
from roder_core.ir import new_id
from roder_core.kernel.services import TaskContext, TaskExecutor
from roder_core.kernel.tasks import TaskFailed, TaskInfo, TaskStatus
from roder_core.turn.tool_host import ThreadHost, TurnToolHost

log = logging.getLogger(__name__)

#: Finished tasks kept for listing.
KEEP_FINISHED = 500
#: Seconds between two ``tasks/updated`` sent only because the last output line changed.
OUTPUT_UPDATE_INTERVAL = 0.25

TaskListener = Callable[[TaskInfo], None]


class TaskHost(ThreadHost, Protocol):
    """What the task table needs of the runtime: a tool host's view of it, plus the brokers of a
    thread (its runner's, in its loopback network)."""

    def thread_brokers(self, thread_id: str | None, workspace: Path, extension_id: str) -> Brokers: ...


class TaskError(RoderError):
    """A task request that cannot be honoured (unknown executor or task, bad params)."""


@dataclasses.dataclass
class _Entry:
    info: TaskInfo
    log: TaskLog
    runner: asyncio.Task[None] | None = None
    last_published: float = 0.0
    pending_publish: asyncio.TimerHandle | None = None


class BackgroundTasks:
    def __init__(self, runtime: TaskHost, default_workspace: Path) -> None:
        self._runtime = runtime
        self._default_workspace = default_workspace
        self._entries: dict[str, _Entry] = {}
        self._listeners: list[TaskListener] = []

    # ------------------------------------------------------------------ reading

    def executors(self) -> dict[str, tuple[TaskExecutor, str]]:
        """Installed executors by id, with the id of the extension that installed each."""
        registry = self._runtime.registry
        return {e.id(): (e, registry.extension_of(e) or "") for e in registry.task_executors}

    def executor_ids(self) -> builtins.list[str]:
        return sorted(self.executors())

    def _entry(self, task_id: str) -> _Entry:
        entry = self._entries.get(task_id)
        if entry is None:
            raise TaskError(f"no task {task_id!r}")
        return entry

    def _snapshot(self, entry: _Entry) -> TaskInfo:
        info = entry.info
        info.last_line = entry.log.last_line
        info.output_bytes = entry.log.total_bytes
        return dataclasses.replace(info, params=dict(info.params))

    def get(self, task_id: str) -> TaskInfo:
        return self._snapshot(self._entry(task_id))

    def list(self, *, status: TaskStatus | None = None, thread_id: str | None = None) -> builtins.list[TaskInfo]:
        return [
            self._snapshot(entry)
            for entry in self._entries.values()
            if (status is None or entry.info.status == status) and (thread_id is None or entry.info.thread_id == thread_id)
        ]

    def output(self, task_id: str, since: int = 0) -> TaskOutputSlice:
        return self._entry(task_id).log.read(since)

    # ------------------------------------------------------------------ listeners

    def subscribe(self, listener: TaskListener) -> Callable[[], None]:
        """Call ``listener`` with a snapshot on every change; returns the unsubscribe function."""
        self._listeners.append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    def _publish(self, entry: _Entry) -> None:
        if entry.pending_publish is not None:
            entry.pending_publish.cancel()
            entry.pending_publish = None
        entry.last_published = time.monotonic()
        snapshot = self._snapshot(entry)
        for listener in list(self._listeners):
            try:
                listener(snapshot)
            except Exception:  # one broken listener must not stop the others or the task
                log.exception("task listener failed")

    def _output_changed(self, entry: _Entry) -> None:
        """Throttled: a chatty task sends a few updates a second, never one per chunk."""
        if entry.pending_publish is not None or not self._listeners:
            return
        wait = OUTPUT_UPDATE_INTERVAL - (time.monotonic() - entry.last_published)
        if wait <= 0:
            self._publish(entry)
        else:
            entry.pending_publish = asyncio.get_running_loop().call_later(wait, self._publish, entry)

    # ------------------------------------------------------------------ running

    async def submit(
        self,
        executor_id: str,
        params: dict[str, Any],
        *,
        thread_id: str | None = None,
        turn_id: str | None = None,
        workspace: Path | None = None,
        keep: bool = False,
    ) -> TaskInfo:
        executors = self.executors()
        if executor_id not in executors:
            known = ", ".join(sorted(executors)) or "none installed"
            raise TaskError(f"unknown task executor {executor_id!r} (available: {known})")
        executor, extension_id = executors[executor_id]
        title = ""
        describe = getattr(executor, "describe", None)
        if describe is not None:
            try:
                title = str(describe(params))
            except ValueError as exc:
                raise TaskError(f"{executor_id}: {exc}") from None
        thread = self._runtime.thread(thread_id) if thread_id is not None else None
        if thread is not None:
            workspace = workspace or Path(thread.cwd)
        workspace = workspace or self._default_workspace
        task_id = new_id("task")
        info = TaskInfo(
            id=task_id,
            executor_id=executor_id,
            status="queued",
            params=dict(params),
            thread_id=thread_id,
            turn_id=turn_id,
            workspace=str(workspace),
            title=title,
            keep=keep,
            created_at=time.time(),
        )
        # the thread's own folder: its sandboxed commands are shown that one (``own_folders``)
        log_dir = thread_folder(self._runtime.options.paths.task_logs_dir, thread_id)
        task_log = _ObservedLog(log_dir / f"{task_id}.log", lambda: self._output_changed(entry))
        info.output_path = str(task_log.path)
        entry = _Entry(info, task_log)
        self._entries[task_id] = entry
        host = None
        if thread is not None:
            host = TurnToolHost(self._runtime, thread.id, turn_id or "", workspace, thread.provider, thread.model)
        ctx = TaskContext(
            task_id=task_id,
            workspace=workspace,
            brokers=self._runtime.thread_brokers(thread_id, workspace, extension_id),
            output=task_log,
            thread_id=thread_id,
            turn_id=turn_id,
            host=host,
        )
        self._publish(entry)
        started = asyncio.get_running_loop().create_future()
        entry.runner = asyncio.create_task(self._run(entry, executor, ctx, started), name=f"task {task_id}")
        await started  # running (or already over): a first task_output or tasks/get sees it so
        self._trim()
        return self._snapshot(entry)

    async def _run(self, entry: _Entry, executor: TaskExecutor, ctx: TaskContext, started: asyncio.Future[None]) -> None:
        info = entry.info
        info.status = "running"
        self._publish(entry)
        started.set_result(None)
        try:
            result = await executor.run(dict(info.params), ctx)
        except asyncio.CancelledError:
            self._finish(entry, "cancelled")
            raise
        except Exception as exc:
            log.info("task %s failed: %s", info.id, exc)
            self._finish(entry, "failed", error=f"{type(exc).__name__}: {exc}" if not isinstance(exc, TaskFailed) else str(exc))
        else:
            self._finish(entry, "completed", result=result)
        finally:
            entry.runner = None

    def _finish(self, entry: _Entry, status: TaskStatus, *, result: Any = None, error: str | None = None) -> None:
        entry.log.close()
        entry.info.status = status
        entry.info.result = result
        entry.info.error = error
        entry.info.finished_at = time.time()
        self._publish(entry)

    async def cancel(self, task_id: str) -> TaskInfo:
        """Stop a task (its executor kills what it runs) and wait until it has stopped."""
        entry = self._entry(task_id)
        runner = entry.runner
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        return self._snapshot(entry)

    def keep(self, task_id: str, keep: bool = True) -> TaskInfo:
        """Keep a task running when its thread is closed (or stop keeping it)."""
        entry = self._entry(task_id)
        entry.info.keep = keep
        self._publish(entry)
        return self._snapshot(entry)

    async def thread_closed(self, thread_id: str) -> None:
        """The thread is closing: stop its tasks, except those the user kept."""
        doomed = [e.info.id for e in self._entries.values() if e.info.thread_id == thread_id and not e.info.keep]
        await asyncio.gather(*(self.cancel(task_id) for task_id in doomed))

    def _trim(self) -> None:
        finished = [e.info.id for e in self._entries.values() if e.runner is None]
        for task_id in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            self._entries.pop(task_id, None)

    async def aclose(self) -> None:
        """The runtime is closing: every task stops, kept or not (nothing outlives Roder)."""
        await asyncio.gather(*(self.cancel(task_id) for task_id in list(self._entries)))

    # ------------------------------------------------------------------ per-thread view

    def board(self, thread_id: str, turn_id: str) -> ThreadTaskBoard:
        return ThreadTaskBoard(self, thread_id, turn_id)


class _ObservedLog(TaskLog):
    """A task log that tells the table when output arrived (for the last-line updates)."""

    def __init__(self, path: Path, changed: Callable[[], None]) -> None:
        super().__init__(path)
        self._changed = changed

    def feed(self, data: bytes) -> None:
        super().feed(data)
        if data:
            self._changed()


class ThreadTaskBoard:
    """``TaskBoard`` for the tools of one thread (``ToolHost.tasks``)."""

    def __init__(self, tasks: BackgroundTasks, thread_id: str, turn_id: str) -> None:
        self._tasks = tasks
        self._thread_id = thread_id
        self._turn_id = turn_id

    async def submit(self, executor_id: str, params: dict[str, Any]) -> TaskInfo:
        return await self._tasks.submit(executor_id, params, thread_id=self._thread_id, turn_id=self._turn_id)

    def get(self, task_id: str) -> TaskInfo:
        try:
            info = self._tasks.get(task_id)
        except TaskError:
            info = None
        if info is None or info.thread_id != self._thread_id:
            raise KeyError(f"no task {task_id!r} in this thread")
        return info

    def list(self) -> builtins.list[TaskInfo]:
        return self._tasks.list(thread_id=self._thread_id)

    def output(self, task_id: str, since: int = 0) -> TaskOutputSlice:
        self.get(task_id)
        return self._tasks.output(task_id, since)

    async def cancel(self, task_id: str) -> TaskInfo:
        self.get(task_id)
        return await self._tasks.cancel(task_id)
