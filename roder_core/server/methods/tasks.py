"""tasks/*: background tasks of the runtime's task table (``roder_core.runtime.tasks``).

A client's ``tasks/submit`` passes policy like the matching tool call would (a ``shell`` task
is checked as ``bash`` with its command line): "ask" counts as approved by the client, "deny"
answers -32004.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from roder_core.kernel.tasks import TaskInfo
from roder_core.runtime.tasks import BackgroundTasks, TaskError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.methods.core import absolute_path
from roder_core.server.methods.host import check_tool_policy, workspace_of
from roder_core.server.protocol import Ok, from_domain
from roder_core.server.protocol_tasks import (
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_KEEP,
    TASKS_LIST,
    TASKS_OUTPUT,
    TASKS_SUBMIT,
    TASKS_SUBSCRIBE,
    TaskIdParams,
    TaskModel,
    TaskResult,
    TasksKeepParams,
    TasksListParams,
    TasksListResult,
    TasksOutputParams,
    TasksOutputResult,
    TasksSubmitParams,
    TasksSubscribeParams,
    TaskUpdated,
)


def task_model(info: TaskInfo) -> TaskModel:
    return from_domain(
        TaskModel,
        {
            "id": info.id,
            "executor_id": info.executor_id,
            "status": info.status,
            "params": info.params,
            "result": info.result,
            "error": info.error,
            "thread_id": info.thread_id,
            "turn_id": info.turn_id,
            "workspace": info.workspace,
            "title": info.title,
            "keep": info.keep,
            "created_at": info.created_at,
            "finished_at": info.finished_at,
            "last_line": info.last_line,
            "output_bytes": info.output_bytes,
            "output_path": info.output_path,
        },
    )


def _tasks(app: Dispatcher) -> BackgroundTasks:
    return app.runtime.tasks


def _info(app: Dispatcher, task_id: str) -> TaskInfo:
    try:
        return _tasks(app).get(task_id)
    except TaskError as exc:
        raise InvalidParams(str(exc)) from None


@handles(TASKS_SUBMIT)
async def tasks_submit(app: Dispatcher, params: TasksSubmitParams, ctx: CallContext) -> TaskResult:
    runtime = app.runtime
    tasks = _tasks(app)
    if params.workspace:
        workspace: Path = workspace_of(app, absolute_path(params.workspace, "workspace"))
    elif params.thread_id:
        workspace = Path(runtime.thread(params.thread_id).cwd)
    else:
        workspace = runtime.options.cwd
    executor = tasks.executors().get(params.executor_id)
    policy_call = getattr(executor[0], "policy_call", None) if executor is not None else None
    if policy_call is not None:
        try:
            call = policy_call(params.params)
        except ValueError as exc:
            raise InvalidParams(f"{params.executor_id}: {exc}") from None
        if call is not None:
            await check_tool_policy(app, workspace, call[0], call[1])
    if params.thread_id:
        await runtime.open_runner(params.thread_id)  # the thread's runner runs its tasks
    try:
        info = await tasks.submit(
            params.executor_id,
            params.params,
            thread_id=params.thread_id,
            turn_id=params.turn_id,
            workspace=workspace,
            keep=params.keep,
        )
    except TaskError as exc:
        raise InvalidParams(str(exc)) from None
    return TaskResult(task=task_model(info))


@handles(TASKS_LIST)
async def tasks_list(app: Dispatcher, params: TasksListParams, ctx: CallContext) -> TasksListResult:
    tasks = _tasks(app)
    rows = tasks.list(status=params.status, thread_id=params.thread_id)
    return TasksListResult(tasks=[task_model(t) for t in rows], executors=tasks.executor_ids())


@handles(TASKS_GET)
async def tasks_get(app: Dispatcher, params: TaskIdParams, ctx: CallContext) -> TaskResult:
    return TaskResult(task=task_model(_info(app, params.task_id)))


@handles(TASKS_CANCEL)
async def tasks_cancel(app: Dispatcher, params: TaskIdParams, ctx: CallContext) -> TaskResult:
    _info(app, params.task_id)
    return TaskResult(task=task_model(await _tasks(app).cancel(params.task_id)))


@handles(TASKS_OUTPUT)
async def tasks_output(app: Dispatcher, params: TasksOutputParams, ctx: CallContext) -> TasksOutputResult:
    info = _info(app, params.task_id)
    chunk = _tasks(app).output(params.task_id, params.since)
    return TasksOutputResult(
        task=task_model(info),
        text=chunk.text,
        since=chunk.since,
        next=chunk.next,
        omitted_bytes=chunk.omitted_bytes,
        path=chunk.path,
    )


@handles(TASKS_KEEP)
async def tasks_keep(app: Dispatcher, params: TasksKeepParams, ctx: CallContext) -> TaskResult:
    _info(app, params.task_id)
    return TaskResult(task=task_model(_tasks(app).keep(params.task_id, params.keep)))


class _Subscriptions:
    """This dispatcher's tasks/subscribe listeners, by (connection, task); closed with it."""

    def __init__(self) -> None:
        self.removers: dict[tuple[str, str | None], Callable[[], None]] = {}

    async def aclose(self) -> None:
        for remove in self.removers.values():
            remove()
        self.removers.clear()


@handles(TASKS_SUBSCRIBE)
async def tasks_subscribe(app: Dispatcher, params: TasksSubscribeParams, ctx: CallContext) -> Ok:
    if params.task_id is not None:
        _info(app, params.task_id)
    subscriptions: _Subscriptions = app.services.setdefault("tasks.subscriptions", _Subscriptions())
    key = (ctx.connection_id, params.task_id)
    if key in subscriptions.removers:
        return Ok()
    wanted, notify = params.task_id, ctx.notify

    def listener(info: Any) -> None:
        if wanted is None or info.id == wanted:
            notify(TaskUpdated(task=task_model(info)))

    subscriptions.removers[key] = _tasks(app).subscribe(listener)
    return Ok()
