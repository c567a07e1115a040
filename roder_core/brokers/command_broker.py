"""What every process broker does around a command, whatever runs it.

``process.HostProcessBroker`` starts commands on this machine; ``runner_process.RunnerProcessBroker``
hands them to a runner's transport (ssh, a container). The protections the user relies on must
not drift apart between the two, so they live here once: the ``process.spawn.*`` grants, the
environment scrubbed of secrets, the audit records, and ``run``'s collection of redacted, capped
output into a ``ProcessResult``. A broker supplies only how a command is executed
(``_execute``) and why it may be blocked (``_blocked``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from roder_core.brokers import BrokerDenied, FileSystemBroker, ProcessResult
from roder_core.brokers.command_output import CommandOutput
from roder_core.brokers.secrets import SecretRedactor, scrubbed_env

DEFAULT_TIMEOUT = 120.0

AuditFn = Callable[[str, dict[str, Any]], None]


def show_command(command: str | list[str]) -> str:
    """A command as the audit log and results show it."""
    return command if isinstance(command, str) else " ".join(command)


@dataclass(frozen=True)
class CommandEnd:
    """How one executed command ended, as ``_execute`` reports it."""

    exit_code: int | None
    timed_out: bool
    duration_ms: int
    #: The sandbox level it actually ran under.
    sandbox: str
    #: Protected paths it created that were moved aside; None where the broker does not guard
    #: the tree (a runner), so the audit record leaves the field out.
    quarantined: list[str] | None = None


class CommandGrants(TypedDict, total=False):
    """What one extension's commands get, said the same way to every process broker (the
    defaults are ``CommandBroker``'s)."""

    capabilities: frozenset[str]
    pass_env: Iterable[str]
    secret_names: Iterable[str]
    redactor: SecretRedactor | None
    audit: AuditFn | None
    extension_id: str
    default_timeout: float


#: A command has no terminal, so nothing may wait for one: ``git commit`` without ``-m`` would
#: open the user's editor (vim then fills the output with its screen and waits on a closed
#: stdin). Git's editor is ``true`` (an empty message aborts the commit, which git says in one
#: line), pagers print straight through, and git never prompts for a password.
NO_TERMINAL_ENV = {"GIT_EDITOR": "true", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}


class CommandBroker(ABC):
    """Base of the process brokers: grants, the working folder, scrubbed environment, audit
    records and ``run``."""

    sandbox_level: str

    def __init__(
        self,
        files: FileSystemBroker,
        *,
        env: Mapping[str, str],
        spill_dir: Path,
        shell: str,
        capabilities: frozenset[str] = frozenset({"process.spawn.shell"}),
        pass_env: Iterable[str] = (),
        secret_names: Iterable[str] = (),
        redactor: SecretRedactor | None = None,
        audit: AuditFn | None = None,
        extension_id: str = "",
        default_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        #: The working folder of every command resolves through the file broker (never outside
        #: the workspace, never into Roder's own folders).
        self._files = files
        self._shell = shell
        self._env = dict(env)
        self._spill_dir = spill_dir
        self._capabilities = capabilities
        granted = {c.removeprefix("secret.read.") for c in capabilities if c.startswith("secret.read.")}
        self._pass_env = granted | set(pass_env)
        self._secret_names = set(secret_names)
        #: Known secret values never reach the result, the live output or the spill file.
        self._redactor = redactor or SecretRedactor.from_env(self._env, self._secret_names)
        self._audit = audit
        self._extension_id = extension_id
        self._default_timeout = default_timeout

    @property
    def spill_dir(self) -> Path:
        """Where output too long for a result is spilled."""
        return self._spill_dir

    def _record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, **fields})

    @abstractmethod
    def _blocked(self) -> tuple[str, str] | None:
        """Why no command may run at all (the audit reason, the error), or None."""

    def _check(self, command: str | list[str]) -> None:
        """Refuse a command the extension has no grant for, or any command while blocked."""
        spawn = [c for c in self._capabilities if c.startswith("process.spawn.")]
        needs_shell = isinstance(command, str)
        if not spawn or (needs_shell and "process.spawn.shell" not in spawn):
            cap = "process.spawn.shell" if needs_shell else "process.spawn.*"
            self._record("process.denied", command=show_command(command), reason=f"no {cap} grant")
            raise BrokerDenied(f"this extension was not granted {cap}; it cannot run commands")
        blocked = self._blocked()
        if blocked is not None:
            reason, message = blocked
            self._record("process.denied", command=show_command(command), reason=reason)
            raise BrokerDenied(message)

    def _admit(self, command: str | list[str], cwd: Path | None) -> tuple[list[str], Path]:
        """A command that may run: checked (``_check``), its working folder resolved inside the
        workspace (and a folder), its argv (a string runs in the broker's shell)."""
        self._check(command)
        try:
            folder = self._files.stat(str(cwd) if cwd is not None else ".")
        except FileNotFoundError:
            folder = None
        if folder is None or folder.kind != "dir":
            raise NotADirectoryError(f"working folder {cwd} is not a folder")
        argv = [self._shell, "-c", command] if isinstance(command, str) else list(command)
        return argv, folder.path

    def _started(self, command: str | list[str], workdir: Path, sandbox: str, env_dropped: list[str], **fields: Any) -> None:
        """The audit record of a command about to start."""
        self._record(
            "process.start",
            command=show_command(command),
            cwd=self._files.display(workdir),
            sandbox=sandbox,
            env_dropped=env_dropped,
            **fields,
        )

    def _interrupted(self, command: str | list[str], duration_ms: int, **fields: Any) -> None:
        """The audit record of a command cancelled while it ran (a turn interrupt)."""
        self._record("process.exit", command=show_command(command), interrupted=True, duration_ms=duration_ms, **fields)

    def _background_ended(
        self, command: str, *, exit_code: int | None, killed: bool, duration_ms: int, sandbox: str, **fields: Any
    ) -> ProcessResult:
        """A background command's end: its audit record and its result (the output went to its log)."""
        self._record(
            "process.exit",
            command=command,
            exit_code=exit_code,
            killed=killed,
            duration_ms=duration_ms,
            background=True,
            **fields,
        )
        return ProcessResult(
            exit_code=exit_code,
            output="",
            duration_ms=duration_ms,
            interrupted=killed,
            sandbox=sandbox,
            quarantined=list(fields.get("quarantined", [])),
        )

    def child_env(self, extra: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
        """The environment a command gets (scrubbed of secrets) and the names dropped from it."""
        env, dropped = scrubbed_env(self._env, self._redactor, self._pass_env, self._secret_names)
        env.update(NO_TERMINAL_ENV)
        if extra:
            env.update(extra)
        return env, dropped

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
        """Run ``command`` to its end or its timeout; its output redacted, capped and spilled
        (``read_only``: see ``ProcessBroker.run``)."""
        timeout = float(timeout or self._default_timeout)
        output = CommandOutput(self.spill_dir, self._redactor, on_output, on_stderr, separate=separate_stderr)
        try:
            end = await self._execute(command, cwd=cwd, timeout=timeout, env=env, output=output, read_only=read_only)
        finally:
            output.close()
        quarantined = {} if end.quarantined is None else {"quarantined": end.quarantined}
        self._record(
            "process.exit",
            command=show_command(command),
            exit_code=end.exit_code,
            timed_out=end.timed_out,
            duration_ms=end.duration_ms,
            output_bytes=output.stdout.total_bytes,
            **quarantined,
        )
        return output.result(
            exit_code=end.exit_code,
            timed_out=end.timed_out,
            duration_ms=end.duration_ms,
            sandbox=end.sandbox,
            quarantined=end.quarantined or [],
        )

    @abstractmethod
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
        """Check, start and wait for ``command``, its output flowing into ``output``; kill it
        and everything it started on timeout and on cancellation (then audit the interruption).
        ``read_only``: the command only reads, confine it so where the broker can."""
