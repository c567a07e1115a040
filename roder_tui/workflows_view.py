"""The app's side of workflows: the workflow screens' data, fed by ``workflows/*`` methods and
``workflows/updated`` notifications (the screens are in ``screens.workflows``, imported when
opened). The threads of this workspace's workflow steps join the app's family of threads, so a
step's approval request opens the approval dialog like one of a subagent."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_workflows import WorkflowResult, WorkflowSummary, WorkflowUpdated
    from roder_core.workflows.model import WorkflowRun


class WorkflowsView:
    def __init__(self, app: App[Any], client: Callable[[], AppClient], family: set[str], cwd: str) -> None:
        self._app = app
        self._client = client
        self._family = family
        self._cwd = cwd
        self.workflows: list[WorkflowSummary] = []
        #: Full state of the workflows opened or changed since, by id.
        self.runs: dict[str, WorkflowRun] = {}

    async def refresh(self) -> None:
        from roder_core.server.protocol_workflows import WORKFLOWS_LIST, WorkflowsListParams

        self.workflows = (await self._client().call(WORKFLOWS_LIST, WorkflowsListParams(limit=50))).workflows

    async def open(self) -> None:
        """The workflows list (f3, or "Workflows" in the palette)."""
        from roder_tui.screens.workflows import WorkflowsScreen

        await self.refresh()
        await self._app.push_screen(WorkflowsScreen(self))

    async def get(self, workflow_id: str) -> WorkflowRun:
        from roder_core.server.protocol_workflows import WORKFLOWS_GET, WorkflowIdParams

        return self._keep(await self._client().call(WORKFLOWS_GET, WorkflowIdParams(workflow_id=workflow_id)))

    def updated(self, note: WorkflowUpdated) -> None:
        run = note.workflow
        self.runs[run.id] = run
        if run.cwd == self._cwd:
            self._family.update(s.thread_id for s in run.steps if s.thread_id)
        for screen in self._app.screen_stack:
            update = getattr(screen, "workflow_updated", None)
            if update is not None:
                update(run)

    def _keep(self, result: WorkflowResult) -> WorkflowRun:
        self.runs[result.workflow.id] = result.workflow
        return result.workflow

    # ------------------------------------------------------------------ actions

    async def plan(self, goal: str) -> WorkflowRun:
        from roder_core.server.protocol_workflows import WORKFLOWS_PLAN, WorkflowsPlanParams

        return self._keep(await self._client().call(WORKFLOWS_PLAN, WorkflowsPlanParams(goal=goal)))

    async def approve(self, workflow_id: str) -> WorkflowRun:
        from roder_core.server.protocol_workflows import WORKFLOWS_APPROVE, WorkflowsApproveParams

        return self._keep(await self._client().call(WORKFLOWS_APPROVE, WorkflowsApproveParams(workflow_id=workflow_id)))

    async def control(self, action: str, workflow_id: str) -> WorkflowRun:
        """``pause``, ``resume`` or ``stop``."""
        from roder_core.server.protocol_workflows import (
            WORKFLOWS_PAUSE,
            WORKFLOWS_RESUME,
            WORKFLOWS_STOP,
            WorkflowIdParams,
        )

        spec = {"pause": WORKFLOWS_PAUSE, "resume": WORKFLOWS_RESUME, "stop": WORKFLOWS_STOP}[action]
        return self._keep(await self._client().call(spec, WorkflowIdParams(workflow_id=workflow_id)))

    async def restart(self, workflow_id: str, step_id: str, instruction: str) -> WorkflowRun:
        from roder_core.server.protocol_workflows import WORKFLOWS_RESTART_AGENT, WorkflowsRestartAgentParams

        params = WorkflowsRestartAgentParams(workflow_id=workflow_id, step_id=step_id, instruction=instruction)
        return self._keep(await self._client().call(WORKFLOWS_RESTART_AGENT, params))
