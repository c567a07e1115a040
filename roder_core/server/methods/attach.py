"""thread/live, thread/headless, palette/commands, host/status and host/stop: what clients that
attach to a running host need (see ``roder_core.server.protocol_attach``)."""

from __future__ import annotations

import os
import time
from typing import Any

from roder_core import __version__
from roder_core.errors import RoderError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import PolicyDenied
from roder_core.server.host_paths import config_stamp
from roder_core.server.protocol import PROTOCOL_VERSION, NoParams, Ok, UserInputRequest
from roder_core.server.protocol_attach import (
    HOST_STATUS,
    HOST_STOP,
    PALETTE_COMMANDS,
    THREAD_HEADLESS,
    THREAD_LIVE,
    HostStatusResult,
    PaletteCommandModel,
    PaletteCommandsParams,
    PaletteCommandsResult,
    StreamingText,
    ThreadHeadlessParams,
    ThreadLive,
    ThreadLiveParams,
    ThreadLiveResult,
)

#: ``CallContext.data`` key naming the transport of a connection ("unix" for the host socket).
TRANSPORT = "transport"
#: ``Dispatcher.services`` key of the background host (``roder_core.server.unix.UnixHost``).
HOST_SERVICE = "host"


@handles(THREAD_LIVE)
async def thread_live(app: Dispatcher, params: ThreadLiveParams, ctx: CallContext) -> ThreadLiveResult:
    """Read everything synchronously (no await from here to the return), so the notification
    sits exactly between the deltas it includes and the ones after it."""
    runtime = app.runtime
    thread = runtime.thread(params.thread_id)
    live = app.live.of(params.thread_id)
    turn_id = runtime.active_turn_id(params.thread_id)
    started = runtime.turn_started_at(params.thread_id)
    result = ThreadLiveResult(
        thread_id=params.thread_id,
        turn_id=turn_id,
        streaming=[StreamingText(item_id=i, kind=kind, text=text) for i, (kind, text) in live.items.items()],  # type: ignore[arg-type]
        tool_output=live.tool_output,
        queued_steers=runtime.queued_steers(params.thread_id) if turn_id else [],
        pending_approvals=runtime.pending_approvals(params.thread_id),
        pending_user_inputs=[
            UserInputRequest(request_id=e.request_id, thread_id=e.thread_id, turn_id=e.turn_id, questions=e.questions)
            for e in runtime.pending_user_inputs(params.thread_id)
        ],
        context_window=_context_window(app, thread.provider, thread.model),
        turn_elapsed_ms=max(0, int((time.time() - started) * 1000)) if started is not None else None,
    )
    ctx.notify(ThreadLive.model_validate(result.model_dump()))
    return result


def _context_window(app: Dispatcher, provider: str, model: str) -> int | None:
    if not provider or not model:
        return None
    try:
        return app.runtime.model_profile(provider, model).context_window
    except RoderError:
        return None


@handles(THREAD_HEADLESS)
async def thread_headless(app: Dispatcher, params: ThreadHeadlessParams, ctx: CallContext) -> Ok:
    app.runtime.set_headless(params.thread_id, params.headless)
    if params.mode is not None:
        app.runtime.restrict_thread(params.thread_id, mode=params.mode)
    return Ok()


@handles(PALETTE_COMMANDS)
async def palette_commands(app: Dispatcher, params: PaletteCommandsParams, ctx: CallContext) -> PaletteCommandsResult:
    """Every source of the host's registry; one that fails is reported, the others still answer."""
    rows: list[PaletteCommandModel] = []
    errors: dict[str, str] = {}
    for source in app.runtime.registry.palette_sources:
        try:
            commands = await source.commands(dict(params.state))
        except Exception as exc:
            errors[source.id()] = f"{type(exc).__name__}: {exc}"
            continue
        rows += [PaletteCommandModel(title=c.title, help=c.help, method=c.method, params=dict(c.params)) for c in commands]
    return PaletteCommandsResult(commands=rows, errors=errors)


@handles(HOST_STATUS)
async def host_status(app: Dispatcher, params: NoParams, ctx: CallContext) -> HostStatusResult:
    runtime = app.runtime
    host: Any = app.services.get(HOST_SERVICE)
    started = app.started
    trusted = started.distribution.host.trusted if started is not None else False
    return HostStatusResult(
        pid=os.getpid(),
        version=__version__,
        protocol_version=PROTOCOL_VERSION,
        socket=str(host.socket_path) if host is not None else None,
        cwd=str(runtime.options.cwd),
        started_at=host.started_at if host is not None else 0.0,
        trusted=trusted,
        profile=started.distribution.host.profile.name if started is not None else "",
        mode=runtime.mode,
        sandbox=runtime.sandbox.requested,
        max_iterations=runtime.options.max_iterations,
        provider=runtime.provider,
        model=runtime.model,
        clients=len(app.fanout),
        active_turns={t.id: turn for t in runtime.open_threads() if (turn := runtime.active_turn_id(t.id))},
        default_mode=runtime.options.config.mode,
        flags=host.flags if host is not None else {},
        config_stamp=config_stamp(runtime.options.paths.config_file, runtime.options.cwd, trusted),
        environment_digest=host.environment_digest if host is not None else "",
    )


@handles(HOST_STOP)
async def host_stop(app: Dispatcher, params: NoParams, ctx: CallContext) -> Ok:
    """Only a process of this user on this machine (the private unix socket) may stop the host;
    a WebSocket or browser client, however authenticated, may not."""
    host: Any = app.services.get(HOST_SERVICE)
    if host is None:
        raise PolicyDenied("this server is not a background host (roder serve); stop it where it runs")
    if ctx.data.get(TRANSPORT) != "unix":
        raise PolicyDenied("host/stop is accepted only on the host's unix socket (roder serve --stop)")
    host.request_stop()
    return Ok()
