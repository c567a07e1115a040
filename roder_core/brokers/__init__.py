"""Host brokers: the only way tools reach the machine.

Each broker is scoped (workspace, capability grants, sandbox level) when the runtime builds the
``ToolExecutionContext`` for a call. The concrete implementations live in the sibling modules;
this module holds the contracts so tools and tests can depend on them without importing them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class BrokerDenied(PermissionError):
    """A broker refused an operation (path escape, protected path, denied capability)."""


class FileSystemBroker(Protocol):
    workspace: Path

    def resolve(self, path: str, *, write: bool = False) -> Path: ...

    def read_bytes(self, path: str) -> bytes: ...

    def write_bytes(self, path: str, data: bytes) -> Path: ...


@dataclass
class ProcessResult:
    exit_code: int | None
    output: str
    duration_ms: int
    timed_out: bool = False
    interrupted: bool = False
    truncated: bool = False
    full_output_path: str | None = None


class ProcessBroker(Protocol):
    async def run(
        self,
        command: str | list[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ProcessResult: ...


class NetworkBroker(Protocol):
    def allowed(self, url: str) -> bool: ...


class SecretBroker(Protocol):
    def redact(self, text: str) -> str: ...


@dataclass
class Brokers:
    fs: FileSystemBroker
    process: ProcessBroker
    network: NetworkBroker
    secrets: SecretBroker
