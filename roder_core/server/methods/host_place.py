"""Where a client's fs/* or command/exec request acts: this machine, or a thread's runner.

Without ``threadId`` or ``runner`` a request acts here, in the open workspace that contains its
path (the server's folder or a thread's). With ``threadId`` it acts where that thread's tools do
(its runner, inherited from its parent thread when it has none of its own); ``runner`` names a
runner explicitly. A runner's path may be given either way: as a path of the local workspace
(mapped into the runner, as the file tools do) or as a path of the runner's own workspace (an
ssh host's folder, a container's mount). Policy always sees the local-workspace path, so its
rules and its outside-the-workspace check are the same on every runner; the runner's brokers then
check again where the files are (symlinks, protected names, git dirs on the host).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from roder_core.brokers import Brokers
from roder_core.runtime.runners import RunnerError
from roder_core.server.dispatcher import Dispatcher
from roder_core.server.errors import RUNTIME_ERROR, PolicyDenied, RpcError


@dataclass(frozen=True)
class HostPlace:
    #: The local workspace: what policy sees and what the brokers are scoped to.
    workspace: Path
    #: The runner that acts (None: this machine, as without a thread).
    runner: str | None
    #: The workspace as the runner sees it (None without a runner).
    runner_root: str | None
    #: The mode policy decides in (the thread's, else the server's).
    mode: str
    thread_id: str | None = None

    def local(self, path: Path) -> Path:
        """``path`` as a path of the local workspace; ``POLICY_DENIED`` when it is outside both
        the local workspace and the runner's."""
        if self.runner is None:
            real = Path(os.path.realpath(path))
            if real == self.workspace or real.is_relative_to(self.workspace):
                return real
            raise PolicyDenied(f"{path} is outside the workspace ({self.workspace})")
        lexical = posixpath.normpath(path.as_posix())
        local = self.workspace.as_posix()
        if lexical == local or lexical.startswith(local.rstrip("/") + "/"):
            return Path(lexical)
        root = posixpath.normpath(self.runner_root or "")
        if root and (lexical == root or lexical.startswith(root.rstrip("/") + "/")):
            return self.workspace / posixpath.relpath(lexical, root)
        raise PolicyDenied(f"{path} is outside the workspace of runner {self.runner!r} ({self.runner_root} there, {local} here)")

    def brokers(self, app: Dispatcher) -> Brokers:
        return app.brokers(self.workspace, runner=self.runner)


def containing_workspace(app: Dispatcher, path: Path) -> Path | None:
    """The open workspace (the server's folder or a thread's) that contains ``path``, if any."""
    real = Path(os.path.realpath(path))
    roots = [app.runtime.options.cwd, *(Path(t.cwd) for t in app.runtime.open_threads())]
    for root in roots:
        resolved = Path(os.path.realpath(root))
        if real == resolved or real.is_relative_to(resolved):
            return resolved
    return None


async def host_place(app: Dispatcher, *, thread_id: str | None, runner: str | None, path: Path | None) -> HostPlace:
    """Where the request acts; opens the runner's session when it is not live."""
    runtime = app.runtime
    if thread_id:
        thread = runtime.thread(thread_id)
        workspace = Path(os.path.realpath(thread.cwd))
        name = runner or runtime.thread_runner(thread_id)
        mode = runtime.thread_mode(thread_id)
    else:
        name = runner
        mode = runtime.mode
        found = containing_workspace(app, path) if path is not None else None
        if found is None and name is None:
            where = path if path is not None else runtime.options.cwd
            raise PolicyDenied(f"{where} is outside the workspace ({runtime.options.cwd})")
        workspace = found or Path(os.path.realpath(runtime.options.cwd))
    if name is None:
        return HostPlace(workspace, None, None, mode, thread_id)
    try:
        live = await runtime.runners.open(name, workspace)
    except RunnerError as exc:
        raise RpcError(RUNTIME_ERROR, str(exc)) from None
    root = str(live.session.describe().get("runnerWorkspace") or live.session.workspace)
    return HostPlace(workspace, name, root, mode, thread_id)
