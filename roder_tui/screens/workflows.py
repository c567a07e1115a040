"""The workflow screens: every workflow, and one workflow as its graph of steps.

The list (f3): ``enter`` opens a workflow, ``n`` plans a new one from a goal, ``esc`` closes.
A workflow: its steps by level (a level's steps run at once, after the levels above), each
with its status; the highlighted step's detail below (its thread, error, scores, output).
``enter`` opens the step's thread, ``a`` approves a draft, ``p`` pauses, ``r`` resumes, ``s``
stops, ``t`` restarts the highlighted step (with an optional instruction), ``esc`` goes back.
Everything is a key and every row wraps, so the screens work at 40 columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from roder_core.workflows.model import levels

if TYPE_CHECKING:
    from roder_core.server.protocol_workflows import WorkflowSummary
    from roder_core.workflows.model import StepState, WorkflowRun


class WorkflowSource(Protocol):
    """What the workflow screens ask of the app's workflow data (``roder_tui.workflows_view.
    WorkflowsView`` is it): named here so the screens never import the app's side."""

    workflows: list[WorkflowSummary]

    async def refresh(self) -> None: ...

    async def get(self, workflow_id: str) -> WorkflowRun: ...

    async def plan(self, goal: str) -> WorkflowRun: ...

    async def approve(self, workflow_id: str) -> WorkflowRun: ...

    async def control(self, action: str, workflow_id: str) -> WorkflowRun: ...

    async def restart(self, workflow_id: str, step_id: str, instruction: str) -> WorkflowRun: ...


MARKS = {
    "pending": "○",
    "running": "●",
    "completed": "✓",
    "failed": "✗",
    "interrupted": "‖",
    "draft": "◇",
    "paused": "‖",
    "stopped": "■",
}
DETAIL_LINES = 6

_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 100%; max-width: 120; height: auto; max-height: 100%;
    background: $surface; border: round $accent; padding: 0 1;
}}
{name} .wf-title {{ text-style: bold; color: $accent; }}
{name} OptionList {{ height: auto; max-height: 1fr; }}
{name} .wf-detail {{ color: $text; height: auto; max-height: {lines}; }}
{name} .wf-keys {{ color: $text-muted; }}
"""


def workflow_state(status: str, live: bool, elsewhere: bool) -> str:
    """A ``running`` workflow nobody runs was cut off (a crash): say so, it resumes with ``r``."""
    if status == "running" and not live:
        return "running in another Roder" if elsewhere else "cut off: r resumes"
    return status


def summary_row(summary: WorkflowSummary) -> Text:
    done = sum(1 for s in summary.steps if s.status == "completed")
    text = Text(f"{MARKS.get(summary.status, '?')} {summary.name}", style="bold")
    text.append(f"  {workflow_state(summary.status, summary.live, summary.elsewhere)} · {done}/{len(summary.steps)}")
    text.append(f"\n   {summary.id}", style="dim")
    return text


def step_row(run: WorkflowRun, state: StepState) -> Text:
    step = run.definition.step(state.id)
    text = Text(f"{MARKS.get(state.status, '?')} {state.id}", style="bold" if state.status == "running" else "")
    text.append(f"  {state.status}")
    kind = "script" if step.kind == "script" else step.agent
    extra = f" · score {len(step.score)}" if step.score else ""
    text.append(f" · {kind}{extra}", style="dim")
    if state.attempts > 1:
        text.append(f" · try {state.attempts}", style="dim")
    return text


def step_detail(run: WorkflowRun, state: StepState) -> str:
    step = run.definition.step(state.id)
    lines = [f"{state.id}: {step.title or (step.run if step.kind == 'script' else step.prompt)}".strip()]
    if step.depends_on:
        lines.append("after " + ", ".join(step.depends_on))
    if state.thread_id:
        lines.append(f"thread {state.thread_id} (enter opens it)")
    if state.error:
        lines.append(f"error: {state.error}")
    for score in state.scores:
        lines.append(f"{'✓' if score.passed else '✗'} {score.command} {score.last_line}".rstrip())
    if state.output.strip():
        lines.append("output: " + " ".join(state.output.split())[:300])
    return "\n".join(lines)


class WorkflowsScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("n", "plan", "Plan a workflow"),
    ]
    DEFAULT_CSS = _CSS.format(name="WorkflowsScreen", lines=DETAIL_LINES)

    def __init__(self, view: WorkflowSource) -> None:
        super().__init__()
        self.view = view
        self._refilling = False
        self._again = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Workflows", classes="wf-title")
            yield OptionList(id="workflows-list")
            yield Static("enter: open · n: plan one from a goal · esc: close", classes="wf-keys")

    def on_mount(self) -> None:
        self._fill()
        self.query_one(OptionList).focus()

    def _fill(self) -> None:
        listing = self.query_one(OptionList)
        highlighted = listing.highlighted_option.id if listing.highlighted_option is not None else None
        listing.clear_options()
        if not self.view.workflows:
            listing.add_option(Option(Text("no workflows yet: n plans one from a goal"), disabled=True))
            return
        listing.add_options([Option(summary_row(w), id=w.id) for w in self.view.workflows])
        ids = [w.id for w in self.view.workflows]
        listing.highlighted = ids.index(highlighted) if highlighted is not None and highlighted in ids else 0

    def workflow_updated(self, run: WorkflowRun) -> None:
        if not self.is_attached:
            return
        if self._refilling:  # a burst of changes: one more listing after the current one
            self._again = True
            return
        self.run_worker(self._refill(), group="workflows-list", exit_on_error=False)

    async def _refill(self) -> None:
        self._refilling = True
        try:
            while True:
                self._again = False
                await self.view.refresh()
                self._fill()
                if not self._again:
                    return
        finally:
            self._refilling = False

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            run = await self.view.get(event.option.id)
            await self.app.push_screen(WorkflowScreen(self.view, run))

    def action_plan(self) -> None:
        from roder_tui.screens.text_prompt import TextPromptScreen

        def planned(goal: str | None) -> None:
            if goal:
                self.notify("the model is planning the workflow…", title="workflow")
                self.run_worker(self._plan(goal), group="workflow-plan", exit_on_error=False)

        self.app.push_screen(TextPromptScreen("Plan a workflow", note="The goal; you review the plan before it runs."), planned)

    async def _plan(self, goal: str) -> None:
        from roder_core.server.errors import RpcError

        try:
            run = await self.view.plan(goal)
        except RpcError as exc:
            self.notify(exc.message, title="no workflow", severity="error", timeout=10)
            return
        await self._refill()
        await self.app.push_screen(WorkflowScreen(self.view, run))

    def action_close(self) -> None:
        self.dismiss(None)


class WorkflowScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("a", "approve", "Approve"),
        Binding("p", "control('pause')", "Pause"),
        Binding("r", "control('resume')", "Resume"),
        Binding("s", "control('stop')", "Stop"),
        Binding("t", "restart", "Restart step"),
    ]
    DEFAULT_CSS = _CSS.format(name="WorkflowScreen", lines=DETAIL_LINES + 2)

    def __init__(self, view: WorkflowSource, run: WorkflowRun) -> None:
        super().__init__()
        self.view = view
        self.run_state = run

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="workflow-title", classes="wf-title", markup=False)
            yield OptionList(id="workflow-steps")
            yield Static("", id="workflow-detail", classes="wf-detail", markup=False)
            yield Static(
                "enter: open thread · a: approve · p: pause · r: resume · s: stop · t: restart step · esc: back",
                classes="wf-keys",
            )

    def on_mount(self) -> None:
        self._fill()
        self.query_one(OptionList).focus()

    def _fill(self) -> None:
        run = self.run_state
        done = sum(1 for s in run.steps if s.status == "completed")
        title = f"{run.definition.name} · {workflow_state(run.status, run.live, run.elsewhere)} · {done}/{len(run.steps)} done"
        if run.error:
            title += f" · {run.error}"
        self.query_one("#workflow-title", Static).update(title)
        listing = self.query_one(OptionList)
        highlighted = listing.highlighted_option.id if listing.highlighted_option is not None else None
        listing.clear_options()
        deps = {s.id: s.depends_on for s in run.definition.steps}
        for number, level in enumerate(levels(run.definition), 1):
            after = sorted({d for step_id in level for d in deps[step_id]})
            heading = f"── {number}" + (f" · after {', '.join(after)}" if after else "") + " ──"
            listing.add_option(Option(Text(heading, style="dim"), disabled=True))
            listing.add_options([Option(step_row(run, run.state(step_id)), id=step_id) for step_id in level])
        ids = [o.id for o in listing.options]
        first = next(i for i, o in enumerate(listing.options) if not o.disabled)
        listing.highlighted = ids.index(highlighted) if highlighted is not None and highlighted in ids else first
        self._show_detail()

    def _selected(self) -> str | None:
        option = self.query_one(OptionList).highlighted_option
        return option.id if option is not None else None

    def _show_detail(self) -> None:
        step_id = self._selected()
        text = step_detail(self.run_state, self.run_state.state(step_id)) if step_id else ""
        self.query_one("#workflow-detail", Static).update(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_detail()

    def workflow_updated(self, run: WorkflowRun) -> None:
        if run.id == self.run_state.id and self.is_attached:
            self.run_state = run
            self._fill()

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        state = self.run_state.state(event.option.id) if event.option.id else None
        if state is None or state.thread_id is None:
            self.notify("this step has no thread yet", title="workflow")
            return
        switch: Any = getattr(self.app, "switch_thread", None)
        if switch is not None and await switch(state.thread_id):
            while isinstance(self.app.screen, WorkflowScreen | WorkflowsScreen):
                self.app.pop_screen()

    async def _act(self, action: Any) -> None:
        from roder_core.server.errors import RpcError

        try:
            self.run_state = await action
        except RpcError as exc:
            self.notify(exc.message, title="workflow", severity="warning", timeout=8)
            return
        self._fill()

    async def action_approve(self) -> None:
        await self._act(self.view.approve(self.run_state.id))

    async def action_control(self, action: str) -> None:
        await self._act(self.view.control(action, self.run_state.id))

    def action_restart(self) -> None:
        from roder_tui.screens.text_prompt import TextPromptScreen

        step_id = self._selected()
        if step_id is None:
            return

        def given(instruction: str | None) -> None:
            if instruction is not None:
                self.run_worker(self._act(self.view.restart(self.run_state.id, step_id, instruction)), exit_on_error=False)

        self.app.push_screen(
            TextPromptScreen(f"Restart step {step_id}", note="An instruction for this run (optional).", required=False),
            given,
        )

    def action_back(self) -> None:
        self.dismiss(None)
