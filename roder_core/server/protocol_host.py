"""Protocol models of the host methods: fs/*, command/exec and tools/call (seed 004).

Paths are absolute; file contents travel as base64. Every method here is evaluated by the
policy engine first and answers ``POLICY_DENIED`` when policy denies it. ``fs/*`` and
``command/exec`` act where a thread's tools act when given its ``threadId`` (its runner), or in
the runner named by ``runner`` (``server/methods/host_place.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import Attachment, empty_list
from roder_core.server.protocol import MethodSpec, ProtocolModel, ServerNotification, register, register_notification

DEFAULT_TIMEOUT_MS = 30_000


class HostTarget(ProtocolModel):
    """Where a request acts: this machine (neither set), a thread's runner, or a named runner."""

    #: Act where this thread's tools act (its runner and its mode).
    thread_id: str | None = None
    #: Act in this runner (``runners/list``), for the thread's workspace or the server's folder.
    runner: str | None = None


class FsReadFileParams(HostTarget):
    path: str
    #: Refuse files larger than this many bytes (default 32 MiB).
    max_bytes: int = Field(default=32 * 1024 * 1024, ge=1)


class FsReadFileResult(ProtocolModel):
    path: str
    data_base64: str
    size: int


class FsReadDirectoryParams(HostTarget):
    path: str
    respect_gitignore: bool = False


class DirectoryEntry(ProtocolModel):
    name: str
    path: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int = 0
    mtime: float = 0.0


class FsReadDirectoryResult(ProtocolModel):
    path: str
    entries: list[DirectoryEntry]


class CommandExecParams(HostTarget):
    command: list[str] = Field(min_length=1)
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int = Field(default=DEFAULT_TIMEOUT_MS, ge=1, le=24 * 3600 * 1000)
    output_bytes_cap: int | None = Field(default=None, ge=0)
    stream_stdout_stderr: bool = False
    process_id: str | None = None


class CommandExecResult(ProtocolModel):
    """``stdout`` and ``stderr`` are the two streams, kept apart (each capped by ``outputBytesCap``)."""

    exit_code: int | None = None
    stdout: str
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration_ms: int
    sandbox: str = "off"
    process_id: str | None = None


class CommandExecOutputDelta(ServerNotification):
    """A chunk of a streamed command's output (only to the client that ran it)."""

    method: Literal["command/exec/output_delta"] = "command/exec/output_delta"
    process_id: str
    stream: Literal["stdout", "stderr"] = "stdout"
    delta_base64: str


class ToolsCallParams(ProtocolModel):
    thread_id: str | None = None
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolsCallResult(ProtocolModel):
    tool_name: str
    text: str
    data: Any = None
    is_error: bool = False
    attachments: list[Attachment] = Field(default_factory=empty_list)


FS_READ_FILE = MethodSpec(
    "fs/readFile", "fs", FsReadFileParams, FsReadFileResult, "Read a file (absolute path inside the workspace) as base64."
)

FS_READ_DIRECTORY = MethodSpec(
    "fs/readDirectory",
    "fs",
    FsReadDirectoryParams,
    FsReadDirectoryResult,
    "List a directory (absolute path inside the workspace).",
)

COMMAND_EXEC = MethodSpec(
    "command/exec",
    "fs",
    CommandExecParams,
    CommandExecResult,
    "Run a command vector after policy; optional streaming via command/exec/output_delta.",
)

TOOLS_CALL = MethodSpec(
    "tools/call",
    "tools",
    ToolsCallParams,
    ToolsCallResult,
    "Call a registered tool directly (policy applies; the caller approves 'ask' verdicts).",
)

_SPECS: list[MethodSpec[Any, Any]] = [FS_READ_FILE, FS_READ_DIRECTORY, COMMAND_EXEC, TOOLS_CALL]
for _spec in _SPECS:
    register(_spec)
register_notification(CommandExecOutputDelta)
