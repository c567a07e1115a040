"""Protocol models of background tasks (seed 004's ``tasks/*``), plus reading a task's output
and keeping a task past its thread, which seed 004 leaves to the implementation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.server.protocol import MethodSpec, Ok, ProtocolModel, ServerNotification, register, register_notification

TaskStatus = Literal["queued", "running", "completed", "failed", "cancelled"]


class TaskModel(ProtocolModel):
    id: str
    executor_id: str
    status: TaskStatus
    params: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    workspace: str | None = None
    #: The command line or the agent's prompt, for lists.
    title: str = ""
    #: Kept running when its thread is closed (``tasks/keep``).
    keep: bool = False
    created_at: float
    finished_at: float | None = None
    #: The last non-empty output line so far.
    last_line: str = ""
    output_bytes: int = 0
    #: The file holding the whole output (redacted).
    output_path: str | None = None


class TasksSubmitParams(ProtocolModel):
    executor_id: str
    params: dict[str, Any] = Field(default_factory=dict)
    #: The thread the task belongs to: it runs in the thread's workspace and loopback network,
    #: and stops when the thread is closed unless ``keep``.
    thread_id: str | None = None
    turn_id: str | None = None
    workspace: str | None = None
    keep: bool = False


class TaskResult(ProtocolModel):
    task: TaskModel


class TasksListParams(ProtocolModel):
    status: TaskStatus | None = None
    thread_id: str | None = None


class TasksListResult(ProtocolModel):
    tasks: list[TaskModel]
    executors: list[str]


class TaskIdParams(ProtocolModel):
    task_id: str


class TasksSubscribeParams(ProtocolModel):
    #: One task, or every task when omitted.
    task_id: str | None = None


class TaskUpdated(ServerNotification):
    """A task's status changed, or (a few times a second at most) its last output line."""

    method: Literal["tasks/updated"] = "tasks/updated"
    task: TaskModel


class TasksOutputParams(ProtocolModel):
    task_id: str
    #: Output offset to start from: 0 for everything kept, or ``next`` of the previous read.
    since: int = Field(default=0, ge=0)


class TasksOutputResult(ProtocolModel):
    task: TaskModel
    #: At most 2000 lines or 50 KB: over that, the head and tail with the file's path between.
    text: str
    since: int
    next: int
    omitted_bytes: int = 0
    path: str


class TasksKeepParams(ProtocolModel):
    task_id: str
    keep: bool = True


TASKS_SUBMIT = MethodSpec(
    "tasks/submit",
    "tasks",
    TasksSubmitParams,
    TaskResult,
    "Run params on an installed TaskExecutor (shell: a command, after policy; agent: a turn in a child thread).",
)

TASKS_LIST = MethodSpec(
    "tasks/list", "tasks", TasksListParams, TasksListResult, "Tasks (all, or of one thread) and the executors."
)

TASKS_GET = MethodSpec("tasks/get", "tasks", TaskIdParams, TaskResult, "One task.")

TASKS_CANCEL = MethodSpec(
    "tasks/cancel", "tasks", TaskIdParams, TaskResult, "Stop a task and what it runs; returns once it stopped."
)

TASKS_SUBSCRIBE = MethodSpec(
    "tasks/subscribe",
    "tasks",
    TasksSubscribeParams,
    Ok,
    "Receive tasks/updated notifications on this connection (one task or all).",
)

TASKS_OUTPUT = MethodSpec(
    "tasks/output", "tasks", TasksOutputParams, TasksOutputResult, "A task's output from an offset, capped."
)

TASKS_KEEP = MethodSpec(
    "tasks/keep", "tasks", TasksKeepParams, TaskResult, "Keep a task running when its thread is closed (or not)."
)

_SPECS: list[MethodSpec[Any, Any]] = [
    TASKS_SUBMIT,
    TASKS_LIST,
    TASKS_GET,
    TASKS_CANCEL,
    TASKS_SUBSCRIBE,
    TASKS_OUTPUT,
    TASKS_KEEP,
]
for _spec in _SPECS:
    register(_spec)
register_notification(TaskUpdated)
