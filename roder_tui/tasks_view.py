"""The app's side of background tasks: the tasks panel's data, fed by ``tasks/*`` methods and
``tasks/updated`` notifications (the screens are in ``screens.tasks``, imported when opened)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_tasks import TaskModel, TasksOutputResult


class TasksView:
    def __init__(self, app: App[Any], client: Callable[[], AppClient]) -> None:
        self._app = app
        self._client = client
        self.tasks: dict[str, TaskModel] = {}
        self._subscribed = False

    def ordered(self) -> list[TaskModel]:
        """Running (and queued) tasks first, newest first within each group."""
        return sorted(self.tasks.values(), key=lambda t: (t.status not in ("running", "queued"), -t.created_at))

    async def refresh(self) -> None:
        from roder_core.server.protocol_tasks import TASKS_LIST, TASKS_SUBSCRIBE, TasksListParams, TasksSubscribeParams

        client = self._client()
        if not self._subscribed:
            await client.call(TASKS_SUBSCRIBE, TasksSubscribeParams())
            self._subscribed = True
        listing = await client.call(TASKS_LIST, TasksListParams())
        self.tasks = {task.id: task for task in listing.tasks}

    async def open(self) -> None:
        """The tasks panel (f2, or "Background tasks" in the palette)."""
        from roder_tui.screens.tasks import TasksScreen

        await self.refresh()
        await self._app.push_screen(TasksScreen(self))

    def task_updated(self, task: TaskModel) -> None:
        self.tasks[task.id] = task
        for screen in self._app.screen_stack:
            update = getattr(screen, "task_updated", None)
            if update is not None:
                update(task)

    async def output(self, task_id: str, since: int) -> TasksOutputResult:
        from roder_core.server.protocol_tasks import TASKS_OUTPUT, TasksOutputParams

        return await self._client().call(TASKS_OUTPUT, TasksOutputParams(task_id=task_id, since=since))

    async def kill(self, task_id: str) -> TaskModel:
        from roder_core.server.protocol_tasks import TASKS_CANCEL, TaskIdParams

        result = await self._client().call(TASKS_CANCEL, TaskIdParams(task_id=task_id))
        self.task_updated(result.task)
        return result.task

    async def keep(self, task_id: str, keep: bool) -> TaskModel:
        from roder_core.server.protocol_tasks import TASKS_KEEP, TasksKeepParams

        result = await self._client().call(TASKS_KEEP, TasksKeepParams(task_id=task_id, keep=keep))
        self.task_updated(result.task)
        return result.task
