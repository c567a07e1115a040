"""fs/readFile, fs/readDirectory, command/exec and tools/call: host access after policy.

The caller is a client acting for the user, so a policy verdict of "ask" counts as approved by
that call; "deny" (plan mode, deny rules, protected or outside-workspace paths) answers ``POLICY_DENIED``.
Files are read and commands run only through the workspace-scoped brokers: this machine's, or
those of the runner a ``threadId`` or ``runner`` names (``host_place``).
"""

from __future__ import annotations

import base64
import itertools
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from roder_core.kernel.registry import TOOL_PROVIDER
from roder_core.kernel.services import PolicyVerdict
from roder_core.kernel.tool_args import ToolArgumentError
from roder_core.kernel.tools import (
    PolicySubject,
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
    argument_problem,
    with_ignored_note,
)
from roder_core.policy.engine import subjects_of
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams, PolicyDenied
from roder_core.server.methods.core import absolute_path
from roder_core.server.methods.host_place import HostPlace, containing_workspace, host_place
from roder_core.server.protocol_host import (
    COMMAND_EXEC,
    FS_READ_DIRECTORY,
    FS_READ_FILE,
    TOOLS_CALL,
    CommandExecOutputDelta,
    CommandExecParams,
    CommandExecResult,
    DirectoryEntry,
    FsReadDirectoryParams,
    FsReadDirectoryResult,
    FsReadFileParams,
    FsReadFileResult,
    ToolsCallParams,
    ToolsCallResult,
)
from roder_core.turn.tool_host import TurnToolHost

_calls = itertools.count(1)


class _Probe(Tool):
    """Stands in for a built-in tool when asking policy about a client's direct request."""

    description = "policy probe"

    def __init__(self, name: str, kind: str, subject: PolicySubject, *, read_only: bool) -> None:
        self.name, self.kind, self._subject = name, kind, subject  # type: ignore[assignment]
        self.read_only = read_only

    def policy_subjects(self, arguments: dict[str, Any], workspace: Path) -> list[PolicySubject]:
        return [self._subject]


def workspace_of(app: Dispatcher, path: Path) -> Path:
    """The workspace (server cwd or an open thread's cwd) that contains ``path``; ``POLICY_DENIED`` if none."""
    found = containing_workspace(app, path)
    if found is None:
        raise PolicyDenied(f"{path} is outside the workspace ({app.runtime.options.cwd})")
    return found


async def check_policy(
    app: Dispatcher,
    workspace: Path,
    name: str,
    arguments: dict[str, Any],
    probe: _Probe,
    place: HostPlace | None = None,
) -> None:
    """Evaluate a direct request like the matching tool call (in ``place``'s mode, with its
    brokers); raise ``POLICY_DENIED`` when denied."""
    runtime = app.runtime
    tools = runtime.registry.tool_registry(on_error=lambda _source, _exc: None)
    tool = tools.get(name) or probe
    call = ToolCall(id=f"direct_{next(_calls)}", name=name, arguments=arguments)
    ctx = ToolExecutionContext(
        thread_id=(place.thread_id if place is not None else None) or "app-server",
        turn_id="",
        call_id=call.id,
        workspace=workspace,
        mode=place.mode if place is not None else runtime.mode,
        brokers=place.brokers(app) if place is not None else app.brokers(workspace),
    )
    if tool is not probe and not subjects_of(tool, call, workspace):
        tool = probe
    decision = await runtime.policy.evaluate(tool, call, ctx)
    if decision.verdict is PolicyVerdict.DENY:
        raise PolicyDenied(f"policy denied {name}: {decision.reason}")


async def check_tool_policy(app: Dispatcher, workspace: Path, name: str, arguments: dict[str, Any]) -> None:
    """Evaluate a client's request to have work done as the tool call ``name(arguments)`` (a
    background command as ``bash``); -32004 when policy denies it."""
    value = str(arguments.get("command", ""))
    probe = _Probe(name, "execute", PolicySubject(tool=name, value=value, kind="command"), read_only=False)
    await check_policy(app, workspace, name, arguments, probe)


async def _readable(app: Dispatcher, raw: str, thread_id: str | None, runner: str | None) -> tuple[Path, HostPlace]:
    """The local-workspace path to read (policy's view; the runner's broker maps it) and where."""
    requested = absolute_path(raw)
    place = await host_place(app, thread_id=thread_id, runner=runner, path=requested)
    path = place.local(requested)
    probe = _Probe("read", "read", PolicySubject(tool="read", value=str(path), kind="path", writes=False), read_only=True)
    await check_policy(app, place.workspace, "read", {"path": str(path)}, probe, place)
    return path, place


@handles(FS_READ_FILE)
async def fs_read_file(app: Dispatcher, params: FsReadFileParams, ctx: CallContext) -> FsReadFileResult:
    path, place = await _readable(app, params.path, params.thread_id, params.runner)
    fs = place.brokers(app).fs
    try:
        info = fs.stat(str(path))
    except FileNotFoundError as exc:
        raise InvalidParams(str(exc)) from None
    if info.kind != "file":
        raise InvalidParams(f"{params.path} is not a regular file")
    if info.size > params.max_bytes:
        raise InvalidParams(f"{params.path} is {info.size} bytes, more than maxBytes={params.max_bytes}")
    data = fs.read_bytes(str(path))
    return FsReadFileResult(path=str(Path(params.path)), data_base64=base64.b64encode(data).decode("ascii"), size=len(data))


@handles(FS_READ_DIRECTORY)
async def fs_read_directory(app: Dispatcher, params: FsReadDirectoryParams, ctx: CallContext) -> FsReadDirectoryResult:
    path, place = await _readable(app, params.path, params.thread_id, params.runner)
    fs = place.brokers(app).fs
    try:
        infos = fs.list_dir(str(path), respect_gitignore=params.respect_gitignore)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise InvalidParams(str(exc)) from None
    entries = [DirectoryEntry(name=i.path.name, path=str(i.path), kind=i.kind, size=i.size, mtime=i.mtime) for i in infos]
    entries.sort(key=lambda e: (e.kind != "dir", e.name))
    return FsReadDirectoryResult(path=str(Path(params.path)), entries=entries)


@handles(COMMAND_EXEC)
async def command_exec(app: Dispatcher, params: CommandExecParams, ctx: CallContext) -> CommandExecResult:
    if params.stream_stdout_stderr and not params.process_id:
        raise InvalidParams("streamStdoutStderr needs a processId to tag the output notifications")
    requested = absolute_path(params.cwd, "cwd") if params.cwd else None
    place = await host_place(app, thread_id=params.thread_id, runner=params.runner, path=requested or app.runtime.options.cwd)
    cwd = place.local(requested) if requested is not None else place.workspace
    line = shlex.join(params.command)
    probe = _Probe("bash", "execute", PolicySubject(tool="bash", value=line, kind="command"), read_only=False)
    await check_policy(app, place.workspace, "bash", {"command": line}, probe, place)
    on_stdout = on_stderr = None
    if params.stream_stdout_stderr:
        process_id = params.process_id or ""

        def streamer(stream: Literal["stdout", "stderr"]) -> Callable[[str], None]:
            def send(text: str) -> None:
                data = base64.b64encode(text.encode("utf-8", errors="replace")).decode("ascii")
                ctx.notify(CommandExecOutputDelta(process_id=process_id, stream=stream, delta_base64=data))

            return send

        on_stdout, on_stderr = streamer("stdout"), streamer("stderr")

    result = await place.brokers(app).process.run(
        list(params.command),
        cwd=cwd,
        timeout=params.timeout_ms / 1000,
        env=params.env or None,
        on_output=on_stdout,
        separate_stderr=True,
        on_stderr=on_stderr,
    )
    stdout, stdout_cut = _capped(result.output, params.output_bytes_cap)
    stderr, stderr_cut = _capped(result.stderr, params.output_bytes_cap)
    streamed = params.stream_stdout_stderr
    return CommandExecResult(
        exit_code=result.exit_code,
        stdout="" if streamed else stdout,
        stderr="" if streamed else stderr,
        timed_out=result.timed_out,
        truncated=result.truncated or stdout_cut or stderr_cut,
        duration_ms=result.duration_ms,
        sandbox=getattr(result, "sandbox", "off"),
        process_id=params.process_id,
    )


def _capped(text: str, cap: int | None) -> tuple[str, bool]:
    """``text`` cut to at most ``cap`` UTF-8 bytes (on a character boundary), and whether it was cut."""
    encoded = text.encode("utf-8")
    if cap is None or len(encoded) <= cap:
        return text, False
    return encoded[:cap].decode("utf-8", errors="ignore"), True


@handles(TOOLS_CALL)
async def tools_call(app: Dispatcher, params: ToolsCallParams, ctx: CallContext) -> ToolsCallResult:
    runtime = app.runtime
    tools = runtime.registry.tool_registry(on_error=lambda _source, _exc: None)
    tool = tools.get(params.tool_name)
    if tool is None:
        raise InvalidParams(tools.missing(params.tool_name))
    workspace = Path(runtime.thread(params.thread_id).cwd) if params.thread_id else runtime.options.cwd
    call = ToolCall(id=f"direct_{next(_calls)}", name=params.tool_name, arguments=dict(params.arguments))
    if params.thread_id:
        await runtime.open_runner(params.thread_id)  # the thread's runner executes its tools
    contributor = runtime.registry.service(TOOL_PROVIDER, tools.source_of(call.name))
    extension_id = runtime.registry.extension_of(contributor) or ""
    tool_ctx = ToolExecutionContext(
        thread_id=params.thread_id or "app-server",
        turn_id="",
        call_id=call.id,
        workspace=workspace,
        mode=runtime.mode,
        brokers=runtime.brokers_for(workspace, extension_id, thread_id=params.thread_id or None),
        capabilities=runtime.registry.granted_capabilities(extension_id),
        host=TurnToolHost(runtime, params.thread_id or "app-server", "", workspace, runtime.provider, runtime.model),
    )
    problem = argument_problem(tool, call)
    if problem is not None:
        return ToolsCallResult(tool_name=call.name, text=problem.text, is_error=True)
    decision = await runtime.policy.evaluate(tool, call, tool_ctx)
    if decision.verdict is PolicyVerdict.DENY:
        raise PolicyDenied(f"policy denied {call.name}: {decision.reason}")
    describe = getattr(tool, "mutated_paths", None)
    paths = list(describe(call.arguments, workspace)) if describe is not None else []
    async with runtime.mutations.hold(paths):
        try:
            result: ToolResult = with_ignored_note(tool, call, await tool.execute(tool_ctx, call))
        except PermissionError:
            raise
        except ToolArgumentError as exc:
            result = ToolResult.error(call, str(exc))
        except Exception as exc:
            result = ToolResult.error(call, f"{call.name} failed: {type(exc).__name__}: {exc}")
    return ToolsCallResult(
        tool_name=call.name,
        text=runtime.redact(result.text),
        data=result.data,
        is_error=result.is_error,
        attachments=result.attachments,
    )
