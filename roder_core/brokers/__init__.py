"""Host brokers: the only way tools reach the machine.

Each broker is scoped (workspace, capability grants, sandbox level) when the runtime builds the
``ToolExecutionContext`` for a call. The concrete implementations live in the sibling modules
(``fs``, ``process``, ``sandbox``, ``network``, ``secrets``; ``host`` wires them together); this
module holds the contracts so tools and tests can depend on them without importing them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal, Protocol


class BrokerDenied(PermissionError):
    """A broker refused an operation (path escape, protected path, denied capability)."""


FileKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class FileInfo:
    """One directory entry or stat result, as a tool may see it."""

    path: Path
    #: Workspace-relative (posix) when inside the workspace, absolute otherwise.
    display: str
    kind: FileKind
    size: int = 0
    mtime: float = 0.0
    links: int = 1


class FileSystemBroker(Protocol):
    """Files, scoped to the workspace plus granted extra roots.

    Every path is resolved (``..`` and symlinks) before a decision; escapes, protected paths
    (for writes) and hard-linked files raise ``BrokerDenied``.
    """

    workspace: Path

    def resolve(self, path: str, *, write: bool = False) -> Path: ...

    def display(self, path: Path) -> str: ...

    def exists(self, path: str) -> bool: ...

    def stat(self, path: str) -> FileInfo: ...

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> bytes: ...

    def open_read(self, path: str) -> BinaryIO: ...

    def write_bytes(self, path: str, data: bytes) -> Path: ...

    def mkdir(self, path: str) -> Path: ...

    def delete(self, path: str) -> Path: ...

    def move(self, source: str, target: str) -> Path: ...

    def list_dir(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> list[FileInfo]: ...

    def walk(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> Iterator[FileInfo]: ...

    def may_withhold(self) -> bool:
        """Whether the content gate could refuse any file at all (searches skip asking otherwise)."""
        ...

    def withheld(self, path: str) -> str | None:
        """Why a file a search found must not reach the model (``content_gate``), or None."""
        ...

    def find_files(self, path: str, pattern: str, *, limit: int, withheld: list[str] | None = None) -> tuple[list[FileInfo], int]:
        """Files below ``path`` whose path relative to it matches the glob ``pattern``, ignored
        ones left out: the ``limit`` newest (ties by path) and how many matched in all. Files the
        content gate refuses are left out too, and named in ``withheld``."""
        ...


@dataclass
class ProcessResult:
    exit_code: int | None
    output: str
    duration_ms: int
    #: Only when the caller asked for ``separate_stderr`` (otherwise stderr is in ``output``).
    stderr: str = ""
    timed_out: bool = False
    interrupted: bool = False
    truncated: bool = False
    full_output_path: str | None = None
    #: The sandbox level the command actually ran under.
    sandbox: str = "off"
    #: Protected paths the command created and Roder moved aside (see docs/security.md).
    quarantined: list[str] = field(default_factory=list)
    total_bytes: int = 0
    total_lines: int = 0


class OutputSink(Protocol):
    """Where a background command's output goes (a task's log)."""

    def feed(self, data: bytes) -> None: ...


class RunningProcess(Protocol):
    """A background command (``ProcessBroker.spawn``)."""

    @property
    def pid(self) -> int: ...

    @property
    def sandbox(self) -> str: ...

    async def wait(self) -> ProcessResult:
        """Until it exits; cancelling the wait kills it and everything it started."""
        ...

    async def kill(self) -> ProcessResult: ...


class ProcessBroker(Protocol):
    """Runs commands with a scrubbed environment, resource limits and the sandbox backend.

    A string is run by the shell; a list is executed directly. On timeout or cancellation the
    whole process group (and, sandboxed, the whole PID namespace) is killed.
    """

    sandbox_level: str

    def which(self, program: str) -> str | None: ...

    def child_env(self, extra: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
        """The environment a command gets (scrubbed of secrets) and the names dropped from it."""
        ...

    async def run(
        self,
        command: str | list[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        on_output: Callable[[str], None] | None = None,
        separate_stderr: bool = False,
        on_stderr: Callable[[str], None] | None = None,
        read_only: bool = False,
    ) -> ProcessResult:
        """``read_only``: the caller's own command only reads (a search). Where bubblewrap
        confines commands it then runs with the workspace read-only too, which spares the
        walks of the tree before and after it that guard a writing command; where it cannot
        be held to reading (no sandbox) it is run and guarded like any other."""
        ...

    async def spawn(self, command: str | list[str], *, output: OutputSink, cwd: Path | None = None) -> RunningProcess:
        """Start a long-running command (no timeout) whose redacted output flows into ``output``."""
        ...


@dataclass
class FetchResult:
    url: str
    status: int
    content_type: str
    text: str
    truncated: bool = False


class NetworkBroker(Protocol):
    """Outbound HTTP, limited to a domain allowlist (an empty list means no network)."""

    def allowed(self, url: str) -> bool: ...

    def refusal(self, url: str) -> str | None: ...

    async def fetch(self, url: str, *, max_bytes: int = 5_000_000, timeout: float = 30.0) -> FetchResult: ...


class SecretBroker(Protocol):
    def redact(self, text: str) -> str: ...

    def get(self, name: str) -> str: ...


@dataclass
class Brokers:
    fs: FileSystemBroker
    process: ProcessBroker
    network: NetworkBroker
    secrets: SecretBroker
