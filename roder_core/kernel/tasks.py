"""Background tasks as extensions and tools see them: their record and one thread's board.

The executors' contract (``TaskExecutor``, ``TaskContext``) is in ``kernel.services`` with the
other services; the runtime's ``runtime.tasks.BackgroundTasks`` runs them.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from roder_core.errors import RoderError

if TYPE_CHECKING:
    from roder_core.brokers.task_log import TaskOutputSlice


class TaskFailed(RoderError):
    """An executor's way to fail a task with a plain message (no exception type in front)."""


TaskStatus = Literal["queued", "running", "completed", "failed", "cancelled"]


@dataclass
class TaskInfo:
    """A background task as clients and tools see it (``tasks/*``, ``task_output``)."""

    id: str
    executor_id: str
    status: TaskStatus
    result: Any = None
    error: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: The thread that started it: its commands share that thread's loopback network, and
    #: closing the thread kills it unless ``keep`` is set.
    thread_id: str | None = None
    turn_id: str | None = None
    workspace: str | None = None
    #: A short description for lists (the command line, the agent's prompt).
    title: str = ""
    keep: bool = False
    created_at: float = 0.0
    finished_at: float | None = None
    #: The last non-empty line of output so far, and where the whole output is.
    last_line: str = ""
    output_bytes: int = 0
    output_path: str | None = None


class TaskOutput(Protocol):
    """A task's output log (``roder_core.brokers.task_log.TaskLog``)."""

    def feed(self, data: bytes) -> None: ...

    def write(self, text: str) -> None: ...


class TaskBoard(Protocol):
    """Background tasks as the tools of one thread see them (``ToolHost.tasks``): they may start
    tasks for the thread and read or stop the thread's own tasks, never another thread's."""

    async def submit(self, executor_id: str, params: dict[str, Any]) -> TaskInfo: ...

    def get(self, task_id: str) -> TaskInfo:
        """Raises ``KeyError`` for a task this thread does not own."""
        ...

    def list(self) -> builtins.list[TaskInfo]: ...

    def output(self, task_id: str, since: int = 0) -> TaskOutputSlice: ...

    async def cancel(self, task_id: str) -> TaskInfo: ...


class TaskBoards(Protocol):
    """Hands out each thread's ``TaskBoard`` (the runtime's task table)."""

    def board(self, thread_id: str, turn_id: str) -> TaskBoard: ...
