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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from roder_core.brokers import BrokerDenied, FileSystemBroker, OutputSink, ProcessResult, RunningProcess
from roder_core.brokers.process import DEFAULT_TIMEOUT, OutputCollector, RedactedSink
from roder_core.brokers.secrets import SecretRedactor, scrubbed_env

AuditFn = Callable[[str, dict[str, Any]], None]


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


class RunnerProcessBroker:
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
        capabilities: frozenset[str] = frozenset({"process.spawn.shell"}),
        pass_env: Iterable[str] = (),
        secret_names: Iterable[str] = (),
        redactor: SecretRedactor | None = None,
        audit: AuditFn | None = None,
        extension_id: str = "",
        default_timeout: float = DEFAULT_TIMEOUT,
        shell: str = "bash",
    ) -> None:
        self._fs = fs
        self._transport = transport
        self._base_env = dict(base_env)
        self._spill_dir = spill_dir
        self.sandbox_level = "blocked" if blocked else sandbox_level
        self._wrap = wrap
        self._blocked = blocked
        self._programs = dict(programs or {})
        self._capabilities = capabilities
        granted = {c.removeprefix("secret.read.") for c in capabilities if c.startswith("secret.read.")}
        self._pass_env = granted | set(pass_env)
        self._secret_names = set(secret_names)
        self._redactor = redactor or SecretRedactor.from_env(self._base_env, self._secret_names)
        self._audit = audit
        self._extension_id = extension_id
        self._default_timeout = default_timeout
        self._shell = shell

    def _record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, **fields})

    def _check(self, command: str | list[str]) -> None:
        spawn = [c for c in self._capabilities if c.startswith("process.spawn.")]
        needs_shell = isinstance(command, str)
        if not spawn or (needs_shell and "process.spawn.shell" not in spawn):
            cap = "process.spawn.shell" if needs_shell else "process.spawn.*"
            self._record("process.denied", command=_show(command), reason=f"no {cap} grant")
            raise BrokerDenied(f"this extension was not granted {cap}; it cannot run commands")
        if self._blocked:
            self._record("process.denied", command=_show(command), reason=self._blocked)
            raise BrokerDenied(self._blocked)

    def which(self, program: str) -> str | None:
        """Where ``program`` is in the runner (probed when the session opened)."""
        return self._programs.get(program)

    def child_env(self, extra: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
        env, dropped = scrubbed_env(
            self._base_env, self._pass_env, self._secret_names, self._redactor.values(exclude=self._pass_env)
        )
        if extra:
            env.update(extra)
        return env, dropped

    async def _prepare(
        self, command: str | list[str], cwd: Path | None, env: dict[str, str] | None, **audit: Any
    ) -> tuple[list[str], Path, dict[str, str]]:
        """Checked, wrapped and audited: the argv to run, its working folder and environment."""
        self._check(command)
        workdir = self._fs.resolve(str(cwd) if cwd is not None else ".")
        argv = [self._shell, "-c", command] if isinstance(command, str) else list(command)
        if self._wrap is not None:
            argv = await self._wrap(argv, workdir.as_posix())
        child_env, dropped = self.child_env(env)
        self._record(
            "process.start",
            command=_show(command),
            cwd=self._fs.display(workdir),
            sandbox=self.sandbox_level,
            env_dropped=dropped,
            **audit,
        )
        return argv, workdir, child_env

    async def spawn(self, command: str | list[str], *, output: OutputSink, cwd: Path | None = None) -> RunningProcess:
        """Start a long-running command in the runner and return at once: no timeout, its
        merged, redacted output flowing into ``output``, ended by ``kill`` (the whole group)."""
        argv, workdir, child_env = await self._prepare(command, cwd, None, background=True)
        sink = RedactedSink(output, self._redactor.byte_stream())
        process = RunnerBackgroundProcess(self, _show(command), sink)
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
    ) -> ProcessResult:
        timeout = float(timeout or self._default_timeout)
        argv, workdir, child_env = await self._prepare(command, cwd, env, timeout=timeout)
        collector = OutputCollector(self._spill_dir, on_output, self._redactor.byte_stream())
        err_collector = (
            OutputCollector(self._spill_dir, on_stderr, self._redactor.byte_stream()) if separate_stderr else collector
        )
        started = time.monotonic()
        try:
            done = await self._transport.execute(
                argv,
                cwd=workdir.as_posix(),
                env=child_env,
                timeout=timeout,
                on_stdout=collector.feed,
                on_stderr=err_collector.feed,
            )
        except BaseException:
            collector.close()
            err_collector.close()
            self._record(
                "process.exit", command=_show(command), interrupted=True, duration_ms=int((time.monotonic() - started) * 1000)
            )
            raise
        collector.close()
        err_collector.close()
        duration_ms = int((time.monotonic() - started) * 1000)
        output, truncated = collector.text()
        stderr, stderr_truncated = err_collector.text() if separate_stderr else ("", False)
        self._record(
            "process.exit",
            command=_show(command),
            exit_code=done.exit_code,
            timed_out=done.timed_out,
            duration_ms=duration_ms,
            output_bytes=collector.total_bytes,
        )
        return ProcessResult(
            exit_code=None if done.timed_out else done.exit_code,
            output=output,
            stderr=stderr,
            duration_ms=duration_ms,
            timed_out=done.timed_out,
            truncated=truncated or stderr_truncated,
            full_output_path=str(collector.spill_path) if collector.spill_path else None,
            sandbox=self.sandbox_level,
            total_bytes=collector.total_bytes,
            total_lines=collector.total_lines,
        )


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
        duration_ms = int((time.monotonic() - self._started) * 1000)
        exit_code = None if done is None else done.exit_code
        self._broker._record(
            "process.exit",
            command=self._command,
            exit_code=exit_code,
            killed=self._killed,
            duration_ms=duration_ms,
            background=True,
        )
        self._result = ProcessResult(
            exit_code=exit_code,
            output="",
            duration_ms=duration_ms,
            interrupted=self._killed,
            sandbox=self._broker.sandbox_level,
        )
        return self._result


def _show(command: str | list[str]) -> str:
    return command if isinstance(command, str) else " ".join(command)
