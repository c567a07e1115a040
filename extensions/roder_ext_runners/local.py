"""The ``local`` runner: this machine, with today's brokers and the bubblewrap sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from roder_core.brokers import Brokers
from roder_core.brokers.host_programs import system_program
from roder_core.kernel.services import (
    ForwardedPort,
    InternalCommandResult,
    RunnerAvailability,
    RunnerDefinition,
    RunnerOpenContext,
    RunnerScope,
)


async def run_local(argv: list[str], timeout: float) -> InternalCommandResult:
    """Run one of Roder's own commands here (never the model's: those go through the brokers)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return InternalCommandResult(None, "", f"{argv[0]} did not finish within {timeout:.0f} s")
    return InternalCommandResult(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class LocalSession:
    """This machine: the runtime's own broker factory (bubblewrap when it works)."""

    kind = "local"
    files_local = True

    def __init__(self, name: str, context: RunnerOpenContext) -> None:
        self.name = name
        self.workspace = str(context.local_workspace)
        self.state_dir = str(context.cache_dir)
        self._scope_sandbox = ""

    def brokers(self, scope: RunnerScope) -> Brokers:
        brokers = scope.local_brokers()
        self._scope_sandbox = getattr(brokers.process, "sandbox_level", "")
        return brokers

    def describe(self) -> dict[str, Any]:
        return {
            "host": "this machine",
            "runnerWorkspace": self.workspace,
            "sandbox": self._scope_sandbox or "see roder doctor",
            "note": "commands run here under the local sandbox (bubblewrap when it works)",
        }

    async def run_internal(self, argv: list[str], *, timeout: float = 60.0) -> InternalCommandResult:
        return await run_local(argv, timeout)

    async def forward_port(self, port: int, local_port: int = 0) -> ForwardedPort:
        return ForwardedPort(port, "127.0.0.1", port, "already on this machine: nothing to forward")

    async def push(self, local: Path) -> None:
        return None  # the runner's workspace is the local folder

    async def pull(self, local: Path) -> None:
        return None

    async def close(self) -> None:
        return None


class LocalRunnerProvider:
    def id(self) -> str:
        return "local"

    def description(self) -> str:
        return "this machine, with the bubblewrap sandbox when it works"

    async def availability(self) -> RunnerAvailability:
        return RunnerAvailability(True, details={"bubblewrap": system_program("bwrap") or "not installed"})

    def check(self, definition: RunnerDefinition) -> None:
        extra = sorted(definition.settings)
        if extra:
            raise ValueError(f"a local runner takes no settings (got {', '.join(extra)})")

    async def open(self, definition: RunnerDefinition, context: RunnerOpenContext) -> LocalSession:
        return LocalSession(definition.name, context)
