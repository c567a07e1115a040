"""The process broker of a runner whose commands do not run on this machine (ssh, a container).

A runner supplies a ``CommandTransport`` that starts one argv there, streams its output and
kills it on timeout or cancellation. What protects the user stays here, above that seam, and
works exactly as the local broker's: the ``process.spawn.*`` grants, the environment scrubbed
of secrets by name and by value (``secrets.scrubbed_env``, from the runner's own environment),
known secret values removed from the output before anything keeps it, output capped head + tail
with the rest spilled to a local file, audit records, and the working folder resolved through
the runner's file broker (so it never leaves the workspace). The runner's sandbox (bubblewrap
on an ssh host) wraps the argv through ``wrap``.

Background commands (``spawn``: bash's ``run_in_background``, ``tasks/submit shell``) are the
same ``execute`` without a timeout, run as a task of their own: their redacted output flows into
the task's log (which caps it and spills the rest), and killing one cancels that task, which
kills the command's process group in the runner before it returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Unpack

from roder_core.brokers import FileSystemBroker, OutputSink, ProcessResult, RunningProcess
from roder_core.brokers.command_broker import CommandBroker, CommandEnd, CommandGrants, show_command
from roder_core.brokers.command_output import CommandOutput, RedactedSink


@dataclass(frozen=True)
class CommandExit:
    exit_code: int | None
    timed_out: bool = False


class CommandTransport(Protocol):
    """Runs one argv in the runner with exactly ``env`` (nothing inherited) in ``cwd``.

    Must kill the command and everything it started on timeout (None: never), on cancellation
    (before the cancellation returns) and when it ends (background children do not outlive it).
    ``on_group`` hears the id of the command's process group in the runner once it is known."""

    async def execute(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        on_group: Callable[[int], None] | None = None,
    ) -> CommandExit: ...


class RunnerProcessBroker(CommandBroker):
    """``ProcessBroker`` over a ``CommandTransport``."""

    def __init__(
        self,
        fs: FileSystemBroker,
        transport: CommandTransport,
        *,
        base_env: Mapping[str, str],
        spill_dir: Path,
        sandbox_level: str,
        wrap: Callable[[list[str], str], Awaitable[list[str]]] | None = None,
        blocked: str | None = None,
        programs: Mapping[str, str] | None = None,
        shell: str = "bash",
        **grants: Unpack[CommandGrants],
    ) -> None:
        super().__init__(fs, env=base_env, spill_dir=spill_dir, shell=shell, **grants)
        self._transport = transport
        self.sandbox_level = "blocked" if blocked else sandbox_level
        self._wrap = wrap
        self._blocked_reason = blocked
        self._programs = dict(programs or {})

    def _blocked(self) -> tuple[str, str] | None:
        return (self._blocked_reason, self._blocked_reason) if self._blocked_reason else None

    def which(self, program: str) -> str | None:
        """Where ``program`` is in the runner (probed when the session opened)."""
        return self._programs.get(program)

    async def _prepare(
        self, command: str | list[str], cwd: Path | None, env: dict[str, str] | None, **audit: Any
    ) -> tuple[list[str], Path, dict[str, str]]:
        """Checked, wrapped and audited: the argv to run, its working folder and environment."""
        argv, workdir = self._admit(command, cwd)
        if self._wrap is not None:
            argv = await self._wrap(argv, workdir.as_posix())
        child_env, dropped = self.child_env(env)
        self._started(command, workdir, self.sandbox_level, dropped, **audit)
        return argv, workdir, child_env

    async def spawn(self, command: str | list[str], *, output: OutputSink, cwd: Path | None = None) -> RunningProcess:
        """Start a long-running command in the runner and return at once: no timeout, its
        merged, redacted output flowing into ``output``, ended by ``kill`` (the whole group)."""
        argv, workdir, child_env = await self._prepare(command, cwd, None, background=True)
        sink = RedactedSink(output, self._redactor.byte_stream())
        process = RunnerBackgroundProcess(self, show_command(command), sink)
        process.start(
            self._transport.execute(
                argv,
                cwd=workdir.as_posix(),
                env=child_env,
                timeout=None,
                on_stdout=sink.feed,
                on_stderr=sink.feed,
                on_group=process.group_known,
            )
        )
        return process

    async def _execute(
        self,
        command: str | list[str],
        *,
        cwd: Path | None,
        timeout: float,
        env: dict[str, str] | None,
        output: CommandOutput,
        read_only: bool,
    ) -> CommandEnd:
        # A runner neither walks the tree around a command nor narrows its confinement here:
        # ``read_only`` changes nothing.
        argv, workdir, child_env = await self._prepare(command, cwd, env, timeout=timeout)
        started = time.monotonic()
        try:
            done = await self._transport.execute(
                argv,
                cwd=workdir.as_posix(),
                env=child_env,
                timeout=timeout,
                on_stdout=output.stdout.feed,
                on_stderr=output.stderr.feed,
            )
        except BaseException:
            self._interrupted(command, _ms_since(started))
            raise
        return CommandEnd(done.exit_code, done.timed_out, _ms_since(started), self.sandbox_level)


class RunnerBackgroundProcess:
    """A command ``RunnerProcessBroker.spawn`` started: wait for it, or kill it and all it started."""

    def __init__(self, broker: RunnerProcessBroker, command: str, sink: RedactedSink) -> None:
        self._broker = broker
        self._command = command
        self._sink = sink
        self._started = time.monotonic()
        self._task: asyncio.Task[CommandExit] | None = None
        self._group = 0
        self._killed = False
        self._result: ProcessResult | None = None

    def start(self, execution: Awaitable[CommandExit]) -> None:
        async def run() -> CommandExit:
            return await execution

        self._task = asyncio.create_task(run())

    def group_known(self, pgid: int) -> None:
        self._group = pgid

    @property
    def pid(self) -> int:
        """The command's process group id in the runner (0 until it reported it)."""
        return self._group

    @property
    def sandbox(self) -> str:
        return self._broker.sandbox_level

    async def wait(self) -> ProcessResult:
        """Until the command exits (or is killed); cancelling the wait kills it. A runner that
        failed under it (a lost connection) raises its error."""
        assert self._task is not None
        try:
            await asyncio.wait([self._task])  # cancelling this wait leaves the task to ``kill``
        except asyncio.CancelledError:
            await asyncio.shield(self.kill())
            raise
        result = self._finish(self._outcome())
        if not self._task.cancelled() and (error := self._task.exception()) is not None:
            raise error
        return result

    async def kill(self) -> ProcessResult:
        """Stop it: its process group in the runner is killed before this returns."""
        assert self._task is not None
        if not self._task.done():
            self._killed = True
            self._task.cancel()
        await asyncio.wait([self._task])
        return self._finish(self._outcome())

    def _outcome(self) -> CommandExit | None:
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    def _finish(self, done: CommandExit | None) -> ProcessResult:
        if self._result is not None:
            return self._result
        self._sink.flush()
        self._result = self._broker._background_ended(
            self._command,
            exit_code=None if done is None else done.exit_code,
            killed=self._killed,
            duration_ms=_ms_since(self._started),
            sandbox=self._broker.sandbox_level,
        )
        return self._result


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
