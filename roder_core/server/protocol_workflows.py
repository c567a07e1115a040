"""Protocol models of workflows (seed 004): workflow files (``workflow/*``: scan, preview,
enable, ignore, refresh, remove) and running workflows (``workflows/*``: plan, create, approve,
list, get, pause, resume, stop, restartAgent), with ``workflows/updated`` after each change.

A workflow's definition and state are ``roder_core.workflows.model``'s, sent unchanged."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, ProtocolModel, ServerNotification, register, register_notification
from roder_core.workflows.model import StepStatus, WorkflowDefinition, WorkflowRun, WorkflowSource, WorkflowStatus

IMPORTS = "workflowImports"
WORKFLOWS = "workflows"


class WorkflowGraph(ProtocolModel):
    """The steps by level (a level's steps can run at once; each waits on earlier levels) and
    the dependency edges ``[from, to]``."""

    levels: list[list[str]]
    edges: list[list[str]]


# --------------------------------------------------------------------------- workflow files


class WorkflowFileInfo(ProtocolModel):
    path: str
    name: str
    description: str = ""
    sha256: str = ""
    valid: bool
    error: str = ""
    #: enabled (runs with workflows/create), ignored, undecided, or changed since enabled.
    decision: Literal["enabled", "ignored", "undecided", "changed"]
    steps: int = 0


class WorkflowScanParams(ProtocolModel):
    #: Absolute; the server's workspace when omitted.
    workspace: str | None = None


class WorkflowScanResult(ProtocolModel):
    workspace: str
    #: Workflow files of an untrusted folder are not read (trust the folder first).
    trusted: bool
    files: list[WorkflowFileInfo]
    #: workflow/refresh: decisions dropped because their file is gone.
    removed: list[str] = Field(default_factory=empty_list)
    note: str = ""


class WorkflowPathParams(ProtocolModel):
    #: The file: absolute, relative to the workspace, or its name in ``.roder/workflows``.
    path: str = Field(min_length=1)
    workspace: str | None = None


class WorkflowPreviewResult(ProtocolModel):
    file: WorkflowFileInfo
    workflow: WorkflowDefinition | None = None
    graph: WorkflowGraph | None = None


class WorkflowFileResult(ProtocolModel):
    file: WorkflowFileInfo


class WorkflowRemoveResult(ProtocolModel):
    path: str
    #: False when no decision was recorded for it.
    removed: bool


# --------------------------------------------------------------------------- workflows


class WorkflowsPlanParams(ProtocolModel):
    goal: str = Field(min_length=1)
    workspace: str | None = None


class WorkflowsCreateParams(ProtocolModel):
    """A draft from a definition the client wrote, or from an enabled workflow file."""

    workflow: WorkflowDefinition | None = None
    path: str | None = None
    workspace: str | None = None
    #: What the workflow is for (``{goal}`` in prompts and commands).
    goal: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> WorkflowsCreateParams:
        if (self.workflow is None) == (self.path is None):
            raise ValueError("give exactly one of workflow (a definition) or path (an enabled workflow file)")
        return self


class WorkflowResult(ProtocolModel):
    workflow: WorkflowRun
    graph: WorkflowGraph


class WorkflowsApproveParams(ProtocolModel):
    workflow_id: str
    #: An edited definition to run instead of the planned one (checked by the same rules).
    workflow: WorkflowDefinition | None = None
    #: The steps' policy mode; never looser than the session's.
    mode: Literal["plan", "ask", "auto-edit", "bypass"] | None = None


class WorkflowsListParams(ProtocolModel):
    limit: int | None = Field(default=None, ge=1)
    status: WorkflowStatus | None = None


class StepSummary(ProtocolModel):
    id: str
    status: StepStatus
    thread_id: str | None = None


class WorkflowSummary(ProtocolModel):
    id: str
    name: str
    status: WorkflowStatus
    #: Run by this server now; ``running`` and not live means cut off (workflows/resume), unless
    #: ``elsewhere``: another Roder process runs it.
    live: bool
    elsewhere: bool = False
    cwd: str
    source: WorkflowSource
    steps: list[StepSummary]
    error: str = ""
    created_at: float
    updated_at: float


class WorkflowsListResult(ProtocolModel):
    workflows: list[WorkflowSummary]


class WorkflowIdParams(ProtocolModel):
    workflow_id: str


class WorkflowsRestartAgentParams(ProtocolModel):
    workflow_id: str
    step_id: str
    #: Told to the step's agent on this run (appended to its task).
    instruction: str = ""


class WorkflowUpdated(ServerNotification):
    """A workflow changed: created, approved, a step started or ended, paused, resumed, ..."""

    method: Literal["workflows/updated"] = "workflows/updated"
    change: str
    step_id: str | None = None
    workflow: WorkflowRun


WORKFLOW_SCAN = MethodSpec(
    "workflow/scan", IMPORTS, WorkflowScanParams, WorkflowScanResult, "The workspace's .roder/workflows/*.toml files."
)
WORKFLOW_PREVIEW = MethodSpec(
    "workflow/preview", IMPORTS, WorkflowPathParams, WorkflowPreviewResult, "One workflow file: definition and graph."
)
WORKFLOW_ENABLE = MethodSpec(
    "workflow/enable", IMPORTS, WorkflowPathParams, WorkflowFileResult, "Allow a workflow file (this content) to run."
)
WORKFLOW_IGNORE = MethodSpec(
    "workflow/ignore", IMPORTS, WorkflowPathParams, WorkflowFileResult, "Record that a workflow file is not to be used."
)
WORKFLOW_REFRESH = MethodSpec(
    "workflow/refresh",
    IMPORTS,
    WorkflowScanParams,
    WorkflowScanResult,
    "Read the files again; forget decisions about files that are gone.",
)
WORKFLOW_REMOVE = MethodSpec(
    "workflow/remove", IMPORTS, WorkflowPathParams, WorkflowRemoveResult, "Forget the decision about a workflow file."
)

WORKFLOWS_PLAN = MethodSpec(
    "workflows/plan", WORKFLOWS, WorkflowsPlanParams, WorkflowResult, "Ask the model for a workflow reaching a goal (a draft)."
)
WORKFLOWS_CREATE = MethodSpec(
    "workflows/create", WORKFLOWS, WorkflowsCreateParams, WorkflowResult, "A draft from a definition or an enabled file."
)
WORKFLOWS_APPROVE = MethodSpec(
    "workflows/approve", WORKFLOWS, WorkflowsApproveParams, WorkflowResult, "Run a draft (optionally edited)."
)
WORKFLOWS_LIST = MethodSpec(
    "workflows/list", WORKFLOWS, WorkflowsListParams, WorkflowsListResult, "Workflows, most recently changed first."
)
WORKFLOWS_GET = MethodSpec("workflows/get", WORKFLOWS, WorkflowIdParams, WorkflowResult, "One workflow, its steps and outputs.")
WORKFLOWS_PAUSE = MethodSpec(
    "workflows/pause", WORKFLOWS, WorkflowIdParams, WorkflowResult, "Interrupt the running steps; start no more."
)
WORKFLOWS_RESUME = MethodSpec(
    "workflows/resume", WORKFLOWS, WorkflowIdParams, WorkflowResult, "Continue a paused or cut-off workflow where it stopped."
)
WORKFLOWS_STOP = MethodSpec("workflows/stop", WORKFLOWS, WorkflowIdParams, WorkflowResult, "End a workflow (or reject a draft).")
WORKFLOWS_RESTART_AGENT = MethodSpec(
    "workflows/restartAgent",
    WORKFLOWS,
    WorkflowsRestartAgentParams,
    WorkflowResult,
    "Run one step again (with an instruction) and the steps after it.",
)

_SPECS: list[MethodSpec[Any, Any]] = [
    WORKFLOW_SCAN,
    WORKFLOW_PREVIEW,
    WORKFLOW_ENABLE,
    WORKFLOW_IGNORE,
    WORKFLOW_REFRESH,
    WORKFLOW_REMOVE,
    WORKFLOWS_PLAN,
    WORKFLOWS_CREATE,
    WORKFLOWS_APPROVE,
    WORKFLOWS_LIST,
    WORKFLOWS_GET,
    WORKFLOWS_PAUSE,
    WORKFLOWS_RESUME,
    WORKFLOWS_STOP,
    WORKFLOWS_RESTART_AGENT,
]
for _spec in _SPECS:
    register(_spec)
register_notification(WorkflowUpdated)
