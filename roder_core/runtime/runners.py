"""The runner table: which runners exist, which are live, and which one each thread uses.

A runner is where a thread's tools execute (seed 003's ``RemoteRunnerProvider``). The table
knows the definitions (the built-in ``local`` plus ``[runners.NAME]`` of config.toml), the
installed providers (one per kind), the live sessions (one per runner and local workspace,
opened on first use and kept until ``runners/delete`` or the runtime closes) and the ports
forwarded from them. A thread's choice is saved in the thread itself (custom state
``roder.runner``), so a resumed thread keeps its runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from roder_core.errors import RoderError
from roder_core.kernel.services import (
    ForwardedPort,
    RemoteRunnerProvider,
    RunnerAvailability,
    RunnerDefinition,
    RunnerOpenContext,
    RunnerSession,
)
from roder_core.settings.runners import LOCAL_RUNNER

if TYPE_CHECKING:
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.runtime.options import RuntimeOptions
    from roder_core.runtime.runner_snapshots import WorkspaceSnapshots

log = logging.getLogger(__name__)

#: The custom-state namespace a thread's runner choice is saved under.
RUNNER_NAMESPACE = "roder.runner"


class RunnerError(RoderError):
    """A runner could not be found, opened or used; the message says why."""


@dataclass
class LiveRunner:
    """One open session and what hangs off it."""

    session: RunnerSession
    local_workspace: Path
    opened_at: float
    #: Ports forwarded to this machine (the session closes their listeners when it closes).
    forwards: dict[int, ForwardedPort] = field(default_factory=dict)
    #: The session's snapshot store, made on first use (``runners/snapshot``).
    snapshots: WorkspaceSnapshots | None = None


class RunnerTable:
    def __init__(self, registry: ExtensionRegistry, options: RuntimeOptions) -> None:
        self._options = options
        self._providers: dict[str, RemoteRunnerProvider] = {
            provider.id(): provider
            for provider in cast("list[RemoteRunnerProvider]", list(registry.services("RemoteRunnerProvider")))
        }
        self._live: dict[tuple[str, str], LiveRunner] = {}
        self._opening: dict[tuple[str, str], asyncio.Lock] = {}

    # ------------------------------------------------------------------ definitions

    def definitions(self) -> list[RunnerDefinition]:
        """``local`` first (unless config.toml redefines it), then the configured runners."""
        configured = self._options.config.runners
        rows = [] if LOCAL_RUNNER in configured else [RunnerDefinition(LOCAL_RUNNER, "local", {}, "this machine")]
        for name, table in configured.items():
            rows.append(RunnerDefinition(name, table.kind, table.settings(), table.description))
        return rows

    def definition(self, name: str) -> RunnerDefinition:
        for row in self.definitions():
            if row.name == name:
                return row
        known = ", ".join(r.name for r in self.definitions())
        raise RunnerError(f"unknown runner {name!r}; defined: {known} (add [runners.{name}] to config.toml)")

    def turn_snapshots(self, name: str) -> bool:
        """Whether runner ``name`` snapshots its workspace when each turn starts."""
        table = self._options.config.runners.get(name)
        return table is not None and table.snapshots == "turn"

    async def snapshots(self, name: str, workspace: Path) -> WorkspaceSnapshots:
        """The snapshot store of runner ``name``'s session for ``workspace`` (opened if needed)."""
        from roder_core.runtime.runner_snapshots import WorkspaceSnapshots

        live = await self.open(name, workspace)
        if live.snapshots is None:
            live.snapshots = WorkspaceSnapshots(live.session, name, workspace, self._options.paths.data_dir)
        return live.snapshots

    def provider(self, kind: str) -> RemoteRunnerProvider:
        provider = self._providers.get(kind)
        if provider is None:
            raise RunnerError(
                f"no runner provider of kind {kind!r} is installed (installed: {', '.join(sorted(self._providers)) or 'none'})"
            )
        return provider

    async def availability(self, definition: RunnerDefinition) -> RunnerAvailability:
        provider = self._providers.get(definition.kind)
        if provider is None:
            return RunnerAvailability(False, f"no runner provider of kind {definition.kind!r} is installed")
        try:
            provider.check(definition)
        except ValueError as exc:
            return RunnerAvailability(False, f"[runners.{definition.name}]: {exc}")
        return await provider.availability()

    # ------------------------------------------------------------------ sessions

    def live(self, name: str, workspace: Path | None = None) -> list[LiveRunner]:
        return [
            live
            for (runner, folder), live in self._live.items()
            if runner == name and (workspace is None or folder == str(workspace))
        ]

    def all_live(self) -> list[tuple[str, LiveRunner]]:
        return [(runner, live) for (runner, _folder), live in self._live.items()]

    def session_for(self, name: str, workspace: Path) -> RunnerSession | None:
        live = self._live.get((name, str(workspace)))
        return live.session if live is not None else None

    async def open(self, name: str, workspace: Path, *, runner_workspace: str | None = None) -> LiveRunner:
        """The live session of runner ``name`` for ``workspace``, opening it when needed
        (``runner_workspace`` replaces the configured folder in the runner: batch rollouts)."""
        import time

        key = (name, str(workspace))
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._live:
                return self._live[key]
            definition = self.definition(name)
            provider = self.provider(definition.kind)
            try:
                provider.check(definition)
            except ValueError as exc:
                raise RunnerError(f"[runners.{name}]: {exc}") from None
            availability = await provider.availability()
            if not availability.available:
                raise RunnerError(f"runner {name!r} ({definition.kind}) is unavailable: {availability.reason}")
            context = RunnerOpenContext(
                local_workspace=workspace,
                cache_dir=self._options.paths.cache_dir,
                network=self._options.config.network.commands,
                runner_workspace=runner_workspace,
            )
            try:
                session = await provider.open(definition, context)
            except RoderError:
                raise
            except (OSError, ValueError) as exc:
                raise RunnerError(f"runner {name!r} could not be opened: {exc}") from exc
            self._live[key] = LiveRunner(session, workspace, time.time())
            return self._live[key]

    async def delete(self, name: str, workspace: Path | None = None) -> int:
        """Close runner ``name``'s sessions (of one workspace, or all) and their forwards."""
        closed = 0
        for key in [k for k in self._live if k[0] == name and (workspace is None or k[1] == str(workspace))]:
            live = self._live.pop(key)
            await _close_live(live)
            closed += 1
        return closed

    async def forward(self, live: LiveRunner, port: int, local_port: int = 0) -> ForwardedPort:
        if port in live.forwards:
            return live.forwards[port]
        forwarded = await live.session.forward_port(port, local_port)
        live.forwards[port] = forwarded
        return forwarded

    async def close(self) -> None:
        for key in list(self._live):
            live = self._live.pop(key)
            with contextlib.suppress(Exception):
                await _close_live(live)


async def _close_live(live: LiveRunner) -> None:
    try:
        await live.session.close()
    except Exception as exc:
        log.warning("closing runner %s: %s", live.session.name, exc)
