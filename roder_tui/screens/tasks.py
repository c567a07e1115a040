"""The tasks panel: background tasks with their last output line; open one's output; kill it.

``enter`` opens the highlighted task's output (it follows new output live), ``k`` kills the task
and everything it started, ``p`` keeps it running when its thread is closed (or stops keeping
it), ``esc`` closes. Both screens use the whole width on narrow terminals.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from roder_core.server.protocol_tasks import TaskModel, TasksOutputResult


class TaskSource(Protocol):
    """What the tasks screens ask of the app's task data (``roder_tui.tasks_view.TasksView``
    is it): named here so the screens never import the app's side."""

    tasks: dict[str, TaskModel]

    def ordered(self) -> list[TaskModel]: ...

    async def output(self, task_id: str, since: int) -> TasksOutputResult: ...

    async def kill(self, task_id: str) -> TaskModel: ...

    async def keep(self, task_id: str, keep: bool) -> TaskModel: ...


STATUS_MARKS = {"running": "●", "queued": "○", "completed": "✓", "failed": "✗", "cancelled": "■"}


def task_row(task: TaskModel) -> Text:
    """Two lines: status, id and title; then the last output line (or how it ended)."""
    running = task.status in ("running", "queued")
    text = Text(f"{STATUS_MARKS.get(task.status, '?')} {task.status:<9} ", style="bold" if running else "dim")
    text.append(task.title or task.executor_id, style="" if running else "dim")
    text.append(f"  {task.id}", style="dim")
    if task.keep:
        text.append("  kept", style="italic")
    detail = task.last_line or ("(no output yet)" if running else "")
    if task.status == "failed" and task.error:
        detail = task.error
    if detail:
        text.append("\n   " + detail, style="dim")
    return text


class TasksScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss_panel", "Close"),
        Binding("k", "kill", "Kill"),
        Binding("p", "keep", "Keep past its thread"),
    ]
    DEFAULT_CSS = """
    TasksScreen { align: center middle; }
    TasksScreen > Vertical {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        background: $surface; border: round $accent; padding: 0 1;
    }
    TasksScreen #tasks-title { text-style: bold; color: $accent; }
    TasksScreen OptionList { height: auto; max-height: 1fr; }
    TasksScreen #tasks-keys { color: $text-muted; }
    """

    def __init__(self, view: TaskSource) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Background tasks", id="tasks-title")
            yield OptionList(id="tasks-list")
            yield Static("enter: output · k: kill · p: keep past its thread · esc: close", id="tasks-keys")

    def on_mount(self) -> None:
        self._fill()
        self.query_one(OptionList).focus()

    def _fill(self) -> None:
        listing = self.query_one(OptionList)
        highlighted = listing.highlighted_option.id if listing.highlighted_option is not None else None
        listing.clear_options()
        tasks = self.view.ordered()
        if not tasks:
            listing.add_option(Option(Text("no background tasks yet (bash with run_in_background starts one)"), disabled=True))
            return
        listing.add_options([Option(task_row(task), id=task.id) for task in tasks])
        ids = [task.id for task in tasks]
        listing.highlighted = ids.index(highlighted) if highlighted in ids else 0

    def task_updated(self, task: TaskModel) -> None:
        if self.is_attached:
            self._fill()

    def _selected(self) -> str | None:
        option = self.query_one(OptionList).highlighted_option
        return option.id if option is not None else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.app.push_screen(TaskOutputScreen(self.view, event.option.id))

    async def action_kill(self) -> None:
        task_id = self._selected()
        if task_id is not None:
            task = await self.view.kill(task_id)
            self.notify(f"{task.title or task.id}: {task.status}", title="task stopped")

    async def action_keep(self) -> None:
        task_id = self._selected()
        if task_id is not None:
            task = self.view.tasks[task_id]
            await self.view.keep(task_id, not task.keep)

    def action_dismiss_panel(self) -> None:
        self.dismiss(None)


class TaskOutputScreen(ModalScreen[None]):
    """One task's whole output (as kept in its log), followed live while it runs."""

    BINDINGS = [
        Binding("escape", "dismiss_output", "Back"),
        Binding("k", "kill", "Kill"),
    ]
    DEFAULT_CSS = """
    TaskOutputScreen { align: center middle; }
    TaskOutputScreen > Vertical {
        width: 100%; max-width: 140; height: 100%;
        background: $surface; border: round $accent; padding: 0 1;
    }
    TaskOutputScreen #output-title { text-style: bold; color: $accent; }
    TaskOutputScreen Log { height: 1fr; background: $background; }
    TaskOutputScreen #output-keys { color: $text-muted; }
    """

    def __init__(self, view: TaskSource, task_id: str) -> None:
        super().__init__()
        self.view = view
        self.task_id = task_id
        self.next = 0
        self._fetching = False
        self._again = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._title(), id="output-title", markup=False)
            yield Log(id="output-log", max_lines=20_000)
            yield Static("k: kill · esc: back", id="output-keys")

    def _title(self) -> str:
        task = self.view.tasks.get(self.task_id)
        if task is None:
            return self.task_id
        took = (task.finished_at or time.time()) - task.created_at
        return f"{task.title or task.executor_id} · {task.status} · {took:.0f} s · {task.output_path or ''}"

    async def on_mount(self) -> None:
        self.query_one(Log).focus()
        await self._fetch()

    async def _fetch(self) -> None:
        """Append what came after ``next``; overlapping calls collapse into one more fetch."""
        if self._fetching:
            self._again = True
            return
        self._fetching = True
        try:
            while True:
                self._again = False
                chunk: Any = await self.view.output(self.task_id, self.next)
                if chunk.text:
                    self.query_one(Log).write(chunk.text)
                self.next = chunk.next
                self.view.tasks[self.task_id] = chunk.task
                self.query_one("#output-title", Static).update(self._title())
                if not self._again:
                    return
        finally:
            self._fetching = False

    def task_updated(self, task: TaskModel) -> None:
        if task.id == self.task_id and self.is_attached:
            self.run_worker(self._fetch(), group=f"output-{self.task_id}", exit_on_error=False)

    async def action_kill(self) -> None:
        await self.view.kill(self.task_id)
        await self._fetch()

    def action_dismiss_output(self) -> None:
        self.dismiss(None)
