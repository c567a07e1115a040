"""Protocol models of the runner methods (seed 004 "Runners/tasks"): ``runners/list``,
``select``, ``session``, ``snapshot``, ``delete`` and ``ports``.

A runner is named by ``runner`` (a ``[runners.NAME]`` of config.toml, or ``local``); the
session it concerns is that runner's for one workspace: the thread's (``threadId``: its
selected runner and its folder) or ``workspace`` (default: the server's folder).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel, register

GROUP = "runners"


class RunnerTarget(ProtocolModel):
    thread_id: str | None = None
    runner: str | None = None
    #: Absolute path of the local workspace (ignored with ``threadId``).
    workspace: str | None = None


class RunnerInfo(ProtocolModel):
    name: str
    kind: str
    description: str = ""
    available: bool
    #: Why the runner cannot be used here (a missing engine, a wrong setting).
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    #: The table's settings (paths, host, image); never secrets: runners hold none.
    settings: dict[str, Any] = Field(default_factory=dict)
    live_sessions: int = 0


class RunnersListResult(ProtocolModel):
    runners: list[RunnerInfo]
    default: str = "local"


class RunnersSelectParams(ProtocolModel):
    thread_id: str
    runner: str


class RunnerSessionInfo(ProtocolModel):
    runner: str
    kind: str
    live: bool
    #: The local workspace the session serves.
    workspace: str
    #: The workspace as the runner sees it (a remote path, the container mount).
    runner_workspace: str = ""
    opened_at: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    forwarded_ports: list[ForwardedPortInfo] = Field(default_factory=empty_list)


class ForwardedPortInfo(ProtocolModel):
    port: int
    local_host: str
    local_port: int
    how: str


class RunnersSelectResult(ProtocolModel):
    thread_id: str
    runner: str
    session: RunnerSessionInfo


class RunnersSessionResult(ProtocolModel):
    #: Which runner the thread uses (with ``threadId``).
    thread_runner: str | None = None
    session: RunnerSessionInfo


class SnapshotInfo(ProtocolModel):
    id: str
    commit: str
    created_at: float
    files: int
    thread_id: str | None = None
    item_id: str | None = None
    label: str = ""


class RunnersSnapshotParams(RunnerTarget):
    #: ``create`` (default), ``list``, ``restore`` or ``delete``.
    action: Literal["create", "list", "restore", "delete"] = "create"
    snapshot_id: str | None = None
    #: The user message this snapshot belongs to (rewind finds it by this id).
    item_id: str | None = None
    label: str = ""


class RunnersSnapshotResult(ProtocolModel):
    action: str
    runner: str
    snapshot: SnapshotInfo | None = None
    snapshots: list[SnapshotInfo] = Field(default_factory=empty_list)


class RunnersDeleteParams(RunnerTarget):
    pass


class RunnersDeleteResult(ProtocolModel):
    runner: str
    closed: int


class RunnersPortsParams(RunnerTarget):
    #: Forward this port of the runner to this machine.
    forward: int | None = Field(default=None, ge=1, le=65535)
    #: Local port to listen on (0: any free port).
    local_port: int = Field(default=0, ge=0, le=65535)


class ListeningPortInfo(ProtocolModel):
    port: int
    address: str
    family: str
    loopback_only: bool
    forwarded_to: str | None = None


class RunnersPortsResult(ProtocolModel):
    runner: str
    ports: list[ListeningPortInfo]
    forwarded: ForwardedPortInfo | None = None


RunnerSessionInfo.model_rebuild()

RUNNERS_LIST = register(
    MethodSpec("runners/list", GROUP, NoParams, RunnersListResult, "Runners: defined, available or why not, live sessions.")
)
RUNNERS_SELECT = register(
    MethodSpec(
        "runners/select",
        GROUP,
        RunnersSelectParams,
        RunnersSelectResult,
        "Run a thread's tools in a runner (opens its session; saved with the thread).",
    )
)
RUNNERS_SESSION = register(
    MethodSpec("runners/session", GROUP, RunnerTarget, RunnersSessionResult, "Describe a runner's session (live or not).")
)
RUNNERS_SNAPSHOT = register(
    MethodSpec(
        "runners/snapshot",
        GROUP,
        RunnersSnapshotParams,
        RunnersSnapshotResult,
        "Git-based snapshots of a runner's workspace: create, list, restore, delete.",
    )
)
RUNNERS_DELETE = register(
    MethodSpec("runners/delete", GROUP, RunnersDeleteParams, RunnersDeleteResult, "Close and remove a runner's session(s).")
)
RUNNERS_PORTS = register(
    MethodSpec(
        "runners/ports",
        GROUP,
        RunnersPortsParams,
        RunnersPortsResult,
        "Ports listening in a runner; forward one to this machine.",
    )
)
