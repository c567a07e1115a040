"""workflow/* (workflow files) and workflows/* (running workflows) over the runtime.

One ``WorkflowEngine`` per dispatcher (``app.services["workflows"]``), built on first use; its
changes go to every connection as ``workflows/updated``. Project workflow files are read only in
trusted folders (``policy.trust``), and run only once enabled (``workflows.files``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from roder_core.customization.subagents import list_agents
from roder_core.policy.trust import TrustStore
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.methods.core import absolute_path
from roder_core.server.protocol_workflows import (
    WORKFLOW_ENABLE,
    WORKFLOW_IGNORE,
    WORKFLOW_PREVIEW,
    WORKFLOW_REFRESH,
    WORKFLOW_REMOVE,
    WORKFLOW_SCAN,
    WORKFLOWS_APPROVE,
    WORKFLOWS_CREATE,
    WORKFLOWS_GET,
    WORKFLOWS_LIST,
    WORKFLOWS_PAUSE,
    WORKFLOWS_PLAN,
    WORKFLOWS_RESTART_AGENT,
    WORKFLOWS_RESUME,
    WORKFLOWS_STOP,
    StepSummary,
    WorkflowFileInfo,
    WorkflowFileResult,
    WorkflowGraph,
    WorkflowIdParams,
    WorkflowPathParams,
    WorkflowPreviewResult,
    WorkflowRemoveResult,
    WorkflowResult,
    WorkflowsApproveParams,
    WorkflowScanParams,
    WorkflowScanResult,
    WorkflowsCreateParams,
    WorkflowsListParams,
    WorkflowsListResult,
    WorkflowsPlanParams,
    WorkflowsRestartAgentParams,
    WorkflowSummary,
    WorkflowUpdated,
)
from roder_core.workflows.engine import WorkflowEngine
from roder_core.workflows.files import WorkflowDecisions, WorkflowFile, WorkflowFiles
from roder_core.workflows.journal import WorkflowJournal
from roder_core.workflows.model import WorkflowDefinition, WorkflowError, WorkflowRun, WorkflowSource, levels

SERVICE = "workflows"


class WorkflowService:
    """The dispatcher's workflow engine and workflow files; closed with the dispatcher."""

    def __init__(self, app: Dispatcher) -> None:
        runtime = app.runtime
        paths = runtime.options.paths
        self.app = app
        self.files = WorkflowFiles(WorkflowDecisions(paths.data_dir / "workflow-decisions.json"))
        self.engine = WorkflowEngine(
            runtime,
            WorkflowJournal(paths.data_dir / "workflows"),
            lambda cwd: list_agents(cwd, paths, self.trusted(cwd), runtime.options.config),
        )
        self._remove = self.engine.subscribe(
            lambda run, change, step: app.broadcast(
                WorkflowUpdated(change=change, step_id=step, workflow=run.model_copy(deep=True))  # as it is now
            )
        )

    def trusted(self, workspace: Path) -> bool:
        options = self.app.runtime.options
        if workspace.resolve() == options.cwd.resolve():
            return options.trusted
        return TrustStore(options.paths).is_trusted(workspace)

    async def aclose(self) -> None:
        self._remove()
        await self.engine.aclose()


def _service(app: Dispatcher) -> WorkflowService:
    service = app.services.get(SERVICE)
    if service is None:
        service = app.services[SERVICE] = WorkflowService(app)
    assert isinstance(service, WorkflowService)
    return service


def _workspace(app: Dispatcher, value: str | None) -> Path:
    return (absolute_path(value, "workspace") if value else app.runtime.options.cwd).resolve()


@contextmanager
def _invalid() -> Iterator[None]:
    """A workflow method that does not apply (unknown id, wrong state) is a bad param."""
    try:
        yield
    except WorkflowError as exc:
        raise InvalidParams(str(exc)) from None


def graph_of(definition: WorkflowDefinition) -> WorkflowGraph:
    edges = [[dep, s.id] for s in definition.steps for dep in s.depends_on]
    return WorkflowGraph(levels=levels(definition), edges=edges)


def _result(run: WorkflowRun) -> WorkflowResult:
    return WorkflowResult(workflow=run, graph=graph_of(run.definition))


def _file_info(found: WorkflowFile) -> WorkflowFileInfo:
    definition = found.definition
    return WorkflowFileInfo(
        path=str(found.path),
        name=definition.name if definition else found.path.stem,
        description=definition.description if definition else "",
        sha256=found.sha256,
        valid=definition is not None,
        error=found.error,
        decision=found.decision,
        steps=len(definition.steps) if definition else 0,
    )


def _summary(run: WorkflowRun) -> WorkflowSummary:
    return WorkflowSummary(
        id=run.id,
        name=run.definition.name,
        status=run.status,
        live=run.live,
        elsewhere=run.elsewhere,
        cwd=run.cwd,
        source=run.source,
        steps=[StepSummary(id=s.id, status=s.status, thread_id=s.thread_id) for s in run.steps],
        error=run.error,
        created_at=run.created_at,
        updated_at=run.updated_at,
    )


def _trusted_workspace(app: Dispatcher, value: str | None) -> tuple[WorkflowService, Path]:
    service, workspace = _service(app), _workspace(app, value)
    if not service.trusted(workspace):
        raise InvalidParams(f"{workspace} is not trusted: its workflow files are not read until you trust the folder")
    return service, workspace


def _file(app: Dispatcher, params: WorkflowPathParams) -> tuple[WorkflowService, Path]:
    service, workspace = _trusted_workspace(app, params.workspace)
    with _invalid():
        return service, service.files.locate(workspace, params.path)


# --------------------------------------------------------------------------- workflow files


async def _scan(app: Dispatcher, params: WorkflowScanParams, *, refresh: bool) -> WorkflowScanResult:
    service, workspace = _service(app), _workspace(app, params.workspace)
    removed = service.files.decisions.forget_missing(workspace) if refresh else []
    if not service.trusted(workspace):
        return WorkflowScanResult(
            workspace=str(workspace),
            trusted=False,
            files=[],
            removed=removed,
            note="this folder is not trusted: its workflow files are not read until you trust it",
        )
    files = [_file_info(f) for f in service.files.scan(workspace)]
    return WorkflowScanResult(workspace=str(workspace), trusted=True, files=files, removed=removed)


@handles(WORKFLOW_SCAN)
async def workflow_scan(app: Dispatcher, params: WorkflowScanParams, ctx: CallContext) -> WorkflowScanResult:
    return await _scan(app, params, refresh=False)


@handles(WORKFLOW_REFRESH)
async def workflow_refresh(app: Dispatcher, params: WorkflowScanParams, ctx: CallContext) -> WorkflowScanResult:
    return await _scan(app, params, refresh=True)


@handles(WORKFLOW_PREVIEW)
async def workflow_preview(app: Dispatcher, params: WorkflowPathParams, ctx: CallContext) -> WorkflowPreviewResult:
    service, path = _file(app, params)
    found = service.files.read(path)
    definition = found.definition
    return WorkflowPreviewResult(
        file=_file_info(found), workflow=definition, graph=graph_of(definition) if definition is not None else None
    )


@handles(WORKFLOW_ENABLE)
async def workflow_enable(app: Dispatcher, params: WorkflowPathParams, ctx: CallContext) -> WorkflowFileResult:
    service, path = _file(app, params)
    with _invalid():
        return WorkflowFileResult(file=_file_info(service.files.enable(path)))


@handles(WORKFLOW_IGNORE)
async def workflow_ignore(app: Dispatcher, params: WorkflowPathParams, ctx: CallContext) -> WorkflowFileResult:
    service, path = _file(app, params)
    return WorkflowFileResult(file=_file_info(service.files.ignore(path)))


@handles(WORKFLOW_REMOVE)
async def workflow_remove(app: Dispatcher, params: WorkflowPathParams, ctx: CallContext) -> WorkflowRemoveResult:
    service, workspace = _service(app), _workspace(app, params.workspace)
    raw = Path(params.path)
    path = raw if raw.is_absolute() else workspace / ".roder" / "workflows" / raw
    if path.suffix != ".toml":
        path = path.with_name(path.name + ".toml")
    return WorkflowRemoveResult(path=str(path.resolve()), removed=service.files.decisions.forget(path))


# --------------------------------------------------------------------------- workflows


def _engine(app: Dispatcher) -> WorkflowEngine:
    return _service(app).engine


@handles(WORKFLOWS_PLAN)
async def workflows_plan(app: Dispatcher, params: WorkflowsPlanParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        return _result(await _engine(app).plan(params.goal, _workspace(app, params.workspace)))


@handles(WORKFLOWS_CREATE)
async def workflows_create(app: Dispatcher, params: WorkflowsCreateParams, ctx: CallContext) -> WorkflowResult:
    engine = _engine(app)
    with _invalid():
        if params.path is not None:
            service, path = _file(app, WorkflowPathParams(path=params.path, workspace=params.workspace))
            definition = service.files.runnable(path)
            source = WorkflowSource(kind="file", path=str(path), goal=params.goal)
            workspace = _workspace(app, params.workspace)
        else:
            assert params.workflow is not None
            definition, source = params.workflow, WorkflowSource(kind="client", goal=params.goal)
            workspace = _workspace(app, params.workspace)
        return _result(engine.create(definition, source, workspace))


@handles(WORKFLOWS_APPROVE)
async def workflows_approve(app: Dispatcher, params: WorkflowsApproveParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        run = await _engine(app).approve(params.workflow_id, definition=params.workflow, mode=params.mode)
    return _result(run)


@handles(WORKFLOWS_LIST)
async def workflows_list(app: Dispatcher, params: WorkflowsListParams, ctx: CallContext) -> WorkflowsListResult:
    runs = _engine(app).runs(status=params.status, limit=params.limit)
    return WorkflowsListResult(workflows=[_summary(r) for r in runs])


@handles(WORKFLOWS_GET)
async def workflows_get(app: Dispatcher, params: WorkflowIdParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        return _result(_engine(app).get(params.workflow_id))


@handles(WORKFLOWS_PAUSE)
async def workflows_pause(app: Dispatcher, params: WorkflowIdParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        return _result(await _engine(app).pause(params.workflow_id))


@handles(WORKFLOWS_RESUME)
async def workflows_resume(app: Dispatcher, params: WorkflowIdParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        return _result(await _engine(app).resume(params.workflow_id))


@handles(WORKFLOWS_STOP)
async def workflows_stop(app: Dispatcher, params: WorkflowIdParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        return _result(await _engine(app).stop(params.workflow_id))


@handles(WORKFLOWS_RESTART_AGENT)
async def workflows_restart_agent(app: Dispatcher, params: WorkflowsRestartAgentParams, ctx: CallContext) -> WorkflowResult:
    with _invalid():
        run = await _engine(app).restart_step(params.workflow_id, params.step_id, params.instruction)
    return _result(run)
