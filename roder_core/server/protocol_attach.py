"""Protocol models for clients that attach to a running host (``roder serve``, ``roder attach``).

A client that opens a thread while a turn runs there needs what the stored thread cannot give:
the text streamed so far, the live output of running tools, the messages queued for the running
turn, and the approvals and questions waiting for a person. ``thread/live`` answers with that
snapshot and also sends it as a ``thread/live`` notification on the caller's own stream, at the
exact point between the deltas it already contains and the ones that follow, so a client that
applies its notifications in order never loses or repeats a character.

``turn/steer/queued`` and ``turn/steer/cancelled`` tell every client about messages queued for a
running turn, so several attached clients show the same queue. ``palette/commands`` runs the
host's palette sources (some read host state, like MCP servers) for a client's state, and
``host/status`` and ``host/stop`` describe and stop a background host.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import ApprovalRequest, Mode, UserMessageItem, empty_list
from roder_core.server.protocol import (
    MethodSpec,
    NoParams,
    Ok,
    ProtocolModel,
    ServerNotification,
    UserInputRequest,
    register,
    register_notification,
)

# --------------------------------------------------------------------------- live state of a thread


class StreamingText(ProtocolModel):
    """An item still streaming: everything shown of it so far."""

    item_id: str
    kind: Literal["text", "reasoning"] = "text"
    text: str


class ThreadLiveParams(ProtocolModel):
    thread_id: str


class ThreadLiveResult(ProtocolModel):
    thread_id: str
    #: The running turn, or None when the thread is idle.
    turn_id: str | None = None
    streaming: list[StreamingText] = Field(default_factory=empty_list)
    #: Live output of tool calls still running, by call id.
    tool_output: dict[str, str] = Field(default_factory=dict)
    queued_steers: list[UserMessageItem] = Field(default_factory=empty_list)
    pending_approvals: list[ApprovalRequest] = Field(default_factory=empty_list)
    pending_user_inputs: list[UserInputRequest] = Field(default_factory=empty_list)
    #: The context window of the thread's model (from the host's profile table), if known.
    context_window: int | None = None
    #: How long the running turn has been going, in milliseconds, measured on the host (a
    #: client's clock may differ): an attaching client's elapsed counter continues from it.
    turn_elapsed_ms: int | None = None


class ThreadLive(ServerNotification, ThreadLiveResult):
    """The ``thread/live`` snapshot, placed in the caller's notification stream."""

    method: Literal["thread/live"] = "thread/live"


class SteerQueued(ServerNotification):
    """A message was queued for a running turn (by any client)."""

    method: Literal["turn/steer/queued"] = "turn/steer/queued"
    thread_id: str
    turn_id: str
    item: UserMessageItem


class SteerCancelled(ServerNotification):
    """A queued message was taken back before the model saw it."""

    method: Literal["turn/steer/cancelled"] = "turn/steer/cancelled"
    thread_id: str
    item_id: str


class ThreadHeadlessParams(ProtocolModel):
    thread_id: str
    headless: bool = True
    #: The thread's own policy mode (what the one-shot run would have had), whatever mode
    #: the host's clients have switched to.
    mode: Mode | None = None


# --------------------------------------------------------------------------- palette


class PaletteCommandModel(ProtocolModel):
    title: str
    help: str = ""
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class PaletteCommandsParams(ProtocolModel):
    #: The client's state (threads, providers, models, mode, themes, commands...): see
    #: ``roder_ext_tui.palette`` for the keys the built-in sources read.
    state: dict[str, Any] = Field(default_factory=dict)


class PaletteCommandsResult(ProtocolModel):
    commands: list[PaletteCommandModel]
    #: Sources that failed, with their error (the others still answer).
    errors: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- the host


class HostStatusResult(ProtocolModel):
    """What a background host serves, so a client can decide whether to use it."""

    pid: int
    version: str
    protocol_version: str
    socket: str | None = None
    cwd: str
    started_at: float
    trusted: bool
    profile: str
    mode: str
    sandbox: str | None = None
    max_iterations: int | None = None
    provider: str
    model: str
    clients: int
    active_turns: dict[str, str] = Field(default_factory=dict)
    #: The policy mode of config.toml (what a run without --mode gets; ``mode`` may have been
    #: changed since by a client).
    default_mode: str = "ask"
    #: Runtime flags the host was started with (provider, model, mode, sandbox, profile,
    #: max_iterations, trust), None where the config decides.
    flags: dict[str, Any] = Field(default_factory=dict)
    #: See ``roder_core.server.unix.config_stamp`` and ``environment_digest``.
    config_stamp: str = ""
    environment_digest: str = ""


THREAD_LIVE = MethodSpec(
    "thread/live",
    "attach",
    ThreadLiveParams,
    ThreadLiveResult,
    "A running thread's live state (streamed text, tool output, queued messages, pending approvals "
    "and questions), also sent as a thread/live notification in order with the caller's stream.",
)
THREAD_HEADLESS = MethodSpec(
    "thread/headless",
    "attach",
    ThreadHeadlessParams,
    Ok,
    "Run a thread as a headless run would (one-shot runs handed to a host): approvals are denied "
    "with their remedy and questions refused, instead of waiting for a person.",
)
PALETTE_COMMANDS = MethodSpec(
    "palette/commands",
    "attach",
    PaletteCommandsParams,
    PaletteCommandsResult,
    "The host's command-palette rows for a client's state (every installed PaletteSource).",
)
HOST_STATUS = MethodSpec(
    "host/status", "attach", NoParams, HostStatusResult, "What this host serves: process, workspace, settings."
)
HOST_STOP = MethodSpec(
    "host/stop",
    "attach",
    NoParams,
    Ok,
    "Stop a background host (local unix-socket clients only); running turns are interrupted and saved.",
)
register(THREAD_LIVE)
register(THREAD_HEADLESS)
register(PALETTE_COMMANDS)
register(HOST_STATUS)
register(HOST_STOP)
for _model in (ThreadLive, SteerQueued, SteerCancelled):
    register_notification(_model)
