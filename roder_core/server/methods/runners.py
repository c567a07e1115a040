"""runners/*: list, select, describe and remove runner sessions; snapshots; listening ports.

The runner table lives on the runtime (``Runtime.runners``); these handlers resolve which
session a request means (a thread's runner and folder, or a runner and a workspace), open it
when the method needs it live, and translate to the protocol models.
"""

from __future__ import annotations

from pathlib import Path

from roder_core.ir import Mode
from roder_core.kernel.services import ForwardedPort
from roder_core.runtime.listening_ports import COMMAND as LISTEN_COMMAND
from roder_core.runtime.listening_ports import parse as parse_listening
from roder_core.runtime.runner_snapshots import Snapshot
from roder_core.runtime.runners import LiveRunner, RunnerError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import RUNTIME_ERROR, InvalidParams, PolicyDenied, RpcError
from roder_core.server.methods.core import absolute_path
from roder_core.server.protocol import NoParams, from_domain
from roder_core.server.protocol_runners import (
    RUNNERS_DELETE,
    RUNNERS_LIST,
    RUNNERS_PORTS,
    RUNNERS_SELECT,
    RUNNERS_SESSION,
    RUNNERS_SNAPSHOT,
    ForwardedPortInfo,
    ListeningPortInfo,
    RunnerInfo,
    RunnersDeleteParams,
    RunnersDeleteResult,
    RunnerSessionInfo,
    RunnersListResult,
    RunnersPortsParams,
    RunnersPortsResult,
    RunnersSelectParams,
    RunnersSelectResult,
    RunnersSessionResult,
    RunnersSnapshotParams,
    RunnersSnapshotResult,
    RunnerTarget,
    SnapshotInfo,
)
from roder_core.settings.runners import LOCAL_RUNNER


def _target(app: Dispatcher, params: RunnerTarget) -> tuple[str, Path]:
    runtime = app.runtime
    if params.thread_id:
        thread = runtime.thread(params.thread_id)
        runner = params.runner or runtime.thread_runner(params.thread_id) or LOCAL_RUNNER
        return runner, Path(thread.cwd)
    workspace = absolute_path(params.workspace, "workspace") if params.workspace else runtime.options.cwd
    return params.runner or LOCAL_RUNNER, workspace.resolve()


async def _open(app: Dispatcher, runner: str, workspace: Path) -> LiveRunner:
    try:
        return await app.runtime.runners.open(runner, workspace)
    except RunnerError as exc:
        raise RpcError(RUNTIME_ERROR, str(exc)) from None


def _forwarded(port: ForwardedPort) -> ForwardedPortInfo:
    return ForwardedPortInfo(port=port.port, local_host=port.local_host, local_port=port.local_port, how=port.how)


def _session_info(runner: str, kind: str, workspace: Path, live: LiveRunner | None) -> RunnerSessionInfo:
    if live is None:
        return RunnerSessionInfo(runner=runner, kind=kind, live=False, workspace=str(workspace))
    details = live.session.describe()
    return RunnerSessionInfo(
        runner=runner,
        kind=live.session.kind,
        live=True,
        workspace=str(live.local_workspace),
        runner_workspace=str(details.get("runnerWorkspace") or live.session.workspace),
        opened_at=live.opened_at,
        details=details,
        forwarded_ports=[_forwarded(p) for p in live.forwards.values()],
    )


@handles(RUNNERS_LIST)
async def runners_list(app: Dispatcher, params: NoParams, ctx: CallContext) -> RunnersListResult:
    table = app.runtime.runners
    rows = []
    for definition in table.definitions():
        availability = await table.availability(definition)
        rows.append(
            RunnerInfo(
                name=definition.name,
                kind=definition.kind,
                description=definition.description,
                available=availability.available,
                reason=availability.reason,
                details=availability.details,
                settings=definition.settings,
                live_sessions=len(table.live(definition.name)),
            )
        )
    return RunnersListResult(runners=rows)


@handles(RUNNERS_SELECT)
async def runners_select(app: Dispatcher, params: RunnersSelectParams, ctx: CallContext) -> RunnersSelectResult:
    runtime = app.runtime
    try:
        await runtime.set_thread_runner(params.thread_id, params.runner)
    except RunnerError as exc:
        raise RpcError(RUNTIME_ERROR, str(exc)) from None
    workspace = Path(runtime.thread(params.thread_id).cwd)
    live = runtime.runners.live(params.runner, workspace)
    kind = runtime.runners.definition(params.runner).kind
    return RunnersSelectResult(
        thread_id=params.thread_id,
        runner=params.runner,
        session=_session_info(params.runner, kind, workspace, live[0] if live else None),
    )


@handles(RUNNERS_SESSION)
async def runners_session(app: Dispatcher, params: RunnerTarget, ctx: CallContext) -> RunnersSessionResult:
    runtime = app.runtime
    runner, workspace = _target(app, params)
    try:
        kind = runtime.runners.definition(runner).kind
    except RunnerError as exc:
        raise InvalidParams(str(exc)) from None
    live = runtime.runners.live(runner, workspace)
    thread_runner = (runtime.thread_runner(params.thread_id) or LOCAL_RUNNER) if params.thread_id else None
    return RunnersSessionResult(
        thread_runner=thread_runner, session=_session_info(runner, kind, workspace, live[0] if live else None)
    )


def _snapshot_info(snapshot: Snapshot) -> SnapshotInfo:
    return from_domain(SnapshotInfo, snapshot.to_json())


@handles(RUNNERS_SNAPSHOT)
async def runners_snapshot(app: Dispatcher, params: RunnersSnapshotParams, ctx: CallContext) -> RunnersSnapshotResult:
    runtime = app.runtime
    runner, workspace = _target(app, params)
    try:
        store = await runtime.runners.snapshots(runner, workspace)
    except RunnerError as exc:
        raise RpcError(RUNTIME_ERROR, str(exc)) from None
    result = RunnersSnapshotResult(action=params.action, runner=runner)
    if params.action == "create":
        snapshot = await store.create(thread_id=params.thread_id, item_id=params.item_id, label=params.label)
        result.snapshot = _snapshot_info(snapshot)
    elif params.action == "list":
        snapshots = await store.list()
        result.snapshots = [_snapshot_info(s) for s in snapshots if params.item_id is None or s.item_id == params.item_id]
    else:
        if not params.snapshot_id:
            raise InvalidParams(f"runners/snapshot {params.action} needs snapshotId")
        if params.action == "restore":
            mode = runtime.thread_mode(params.thread_id) if params.thread_id else runtime.mode
            if mode == Mode.PLAN:
                raise PolicyDenied("plan mode is read-only: restoring a snapshot would rewrite the workspace")
            result.snapshot = _snapshot_info(await store.restore(params.snapshot_id))
        else:
            result.snapshot = _snapshot_info(await store.delete(params.snapshot_id))
    return result


@handles(RUNNERS_DELETE)
async def runners_delete(app: Dispatcher, params: RunnersDeleteParams, ctx: CallContext) -> RunnersDeleteResult:
    runtime = app.runtime
    if not params.runner and not params.thread_id:
        raise InvalidParams("runners/delete needs runner (and optionally workspace) or threadId")
    runner, workspace = _target(app, params)
    try:
        runtime.runners.definition(runner)
    except RunnerError as exc:
        raise InvalidParams(str(exc)) from None
    scoped = params.thread_id is not None or params.workspace is not None
    closed = await runtime.runners.delete(runner, workspace if scoped else None)
    for thread in runtime.open_threads():
        runtime.forget_brokers(thread.cwd, runner)
    return RunnersDeleteResult(runner=runner, closed=closed)


@handles(RUNNERS_PORTS)
async def runners_ports(app: Dispatcher, params: RunnersPortsParams, ctx: CallContext) -> RunnersPortsResult:
    runner, workspace = _target(app, params)
    live = await _open(app, runner, workspace)
    listing = await live.session.run_internal(LISTEN_COMMAND, timeout=30)
    if listing.exit_code != 0:
        raise RpcError(RUNTIME_ERROR, f"could not read the listening ports in runner {runner!r}: {listing.stderr.strip()[:300]}")
    ports = parse_listening(listing.stdout)
    forwarded = None
    if params.forward is not None:
        if not any(p.port == params.forward for p in ports):
            raise InvalidParams(f"nothing listens on port {params.forward} in runner {runner!r}")
        try:
            forwarded = _forwarded(await app.runtime.runners.forward(live, params.forward, params.local_port))
        except OSError as exc:
            raise RpcError(RUNTIME_ERROR, f"could not forward port {params.forward}: {exc}") from None
    rows = []
    for port in ports:
        done = live.forwards.get(port.port)
        rows.append(
            ListeningPortInfo(
                port=port.port,
                address=port.address,
                family=port.family,
                loopback_only=port.loopback_only,
                forwarded_to=f"{done.local_host}:{done.local_port}" if done is not None else None,
            )
        )
    return RunnersPortsResult(runner=runner, ports=rows, forwarded=forwarded)
