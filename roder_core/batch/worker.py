"""One rollout, start to finish: the single function every backend runs.

``run_rollout(spec)`` copies the task's workspace, runs its setup, records a baseline, runs the
agent headless (no trust, nobody to approve, the batch's capability profile) with a deadline,
takes the diff, runs the score command, and returns everything as plain data: a result record
and the output files' bytes. It writes nothing outside its own scratch folder, so the local
process pool and Ray run exactly the same code and the driver alone owns the output folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from roder_core.batch.containers import (
    TASK_RUNNER,
    ContainerUnavailable,
    TaskImage,
    VerifierMounts,
    engine_argv,
    export_workdir,
    prepare_image,
    run_in_container,
)
from roder_core.batch.environment import child_environment, value_redactor
from roder_core.batch.rewards import RewardError, read_reward
from roder_core.batch.runner_guard import RunnerGuard, UnscorableChange
from roder_core.batch.score_witness import ForgedResult, Witness, check_exit, check_loaded, check_run, test_statuses
from roder_core.batch.scoring import ScoreGuard, ScoringError, credential_paths, run_score, score_sandbox
from roder_core.batch.shell import ShellOutcome, run_shell
from roder_core.batch.swebench import patch_paths, swe_report
from roder_core.batch.tasks import Task
from roder_core.batch.worker_loop import run_on_worker_loop
from roder_core.batch.workspace import Baseline, WorkspaceError, prepare_workspace
from roder_core.bounded_log import HeadAndTail
from roder_core.brokers.secrets import SecretRedactor, is_secret_name, redact_data
from roder_core.errors import InferenceErrorKind, RoderError
from roder_core.ir import AgentMessageItem, Thread, ToolCallItem, ToolResultItem, Turn
from roder_core.threads.atif import build_atif
from roder_core.threads.events import RuntimeEvent
from roder_core.threads.trajectory import build_trajectory

if TYPE_CHECKING:
    from roder_core.kernel.distribution import ExtensionFactory
    from roder_core.runtime.runtime import Runtime

#: Why a rollout failed, in the order they are reported.
FAILURE_CAUSES = (
    "timeout",
    "policy_denial",
    "provider_failure",
    "score_failure",
    "score_refused",
    "score_timeout",
    "setup_failure",
    "agent_failure",
    "environment_unavailable",
    "infra_failure",
    "error",
)
#: Provider errors of the machine or the network rather than of the model or the task: a rollout
#: that ends with one is run again (up to the batch's --attempts).
INFRA_ERROR_KINDS = frozenset({"auth", "network", "server", "stream_dropped", "timeout", "rate_limit"})
PROVIDER_ERROR_KINDS = frozenset(get_args(InferenceErrorKind))
#: The exit reason of a rollout that could not run here; summaries count it apart.
NOT_RUN = "not_run"
#: Environment variables the driver forwards to workers (other variables come from the worker's
#: own environment, so API keys never travel inside a task description).
FORWARDED_ENV_PREFIX = "RODER_"


@dataclass(frozen=True)
class RunSettings:
    """Batch-wide settings; every one of them changes what a rollout does."""

    provider: str | None = None
    model: str | None = None
    #: Policy mode for tasks that name none. ``bypass`` because nobody can approve in a batch;
    #: the eval-sandbox profile and the command sandbox are what contain the agent.
    mode: str = "bypass"
    profile: str = "eval-sandbox"
    sandbox: str | None = None
    #: Seconds per agent turn for tasks that name none (None: no deadline).
    deadline: float | None = None
    task_ledger_required: bool = False
    max_iterations: int | None = None
    #: Where the agent's tools execute (``[runners.NAME]``; None: this machine).
    runner: str | None = None
    #: The provider's ``[providers.NAME]`` table as the driver resolved it (no key, no secret
    #: header) and the ``[models]`` tables of its model: every node runs the same provider,
    #: whatever its own config.toml says. Keys still come from each node's environment.
    provider_table: dict[str, Any] | None = None
    model_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The ``--runner`` table as the driver resolved it: a container runner's engine settings
    #: (OCI runtime, run options) are also used for tasks that bring their own image.
    runner_table: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def start_tables(self) -> dict[str, Any]:
        """``StartSettings`` keywords that carry the resolved provider to a worker's runtime."""
        tables = {str(self.provider): self.provider_table} if self.provider_table is not None and self.provider else {}
        return {"provider_tables": tables, "model_tables": self.model_tables}


@dataclass(frozen=True)
class RolloutSpec:
    task: Task
    #: Which of the task's ``--repeat`` rollouts this is (0-based).
    index: int
    settings: RunSettings
    env: dict[str, str] = field(default_factory=dict)
    #: Work in the task's workspace folder itself instead of a copy (``roder exec --in-place``).
    in_place: bool = False
    #: 1 for the first try; the records of earlier tries lost to infrastructure failures.
    attempt: int = 1
    discarded: tuple[dict[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.task.id, self.index)


@dataclass
class RolloutOutcome:
    """What the driver records: ``result`` becomes result.json, ``files`` the other outputs."""

    result: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ) if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith(FORWARDED_ENV_PREFIX)}


def finalization_reserve(deadline: float) -> float:
    """Seconds kept at the end of a deadline for the model to finish: a tenth, 1-30 s, at most half."""
    return min(max(deadline * 0.1, 1.0), 30.0, deadline / 2)


def run_rollout(spec: RolloutSpec, on_event: Callable[[RuntimeEvent], None] | None = None) -> RolloutOutcome:
    """Run one rollout in a private scratch folder (removed afterwards) and return its outcome.

    Never raises for a problem of the task or the agent: those are recorded in the result.
    ``on_event`` sees every runtime event live (``roder exec`` prints them). The rollout runs
    on this worker's kept event loop (``worker_loop``), isolated from the rollouts before it.
    """
    sweep_orphaned_scratch()
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    rollout = _Rollout(spec, scratch, on_event)
    log = _LogCapture(rollout.redactor)
    root = logging.getLogger()
    root.addHandler(log)
    try:
        outcome = run_on_worker_loop(rollout.run)
    finally:
        root.removeHandler(log)
        discard_scratch(scratch)
    if log.lines:  # records can quote anything (a provider's malformed event, an error): redacted as every output is
        outcome.files |= _redacted_files(rollout.redactor, {"roder.log": log.lines.text().encode()})
    return outcome


SCRATCH_PREFIX = "roder-rollout-"
#: A finished rollout's scratch folder, renamed so, waits for its removal in the background.
DISCARDED_PREFIX = "roder-discarded-"


def discard_scratch(scratch: Path) -> None:
    """Remove a finished rollout's scratch folder off the rollout's path: renamed at once (so
    the folder of a rollout in progress is never mistaken for it), then removed by a thread of
    its own while the worker goes on. The thread is not a daemon, so a worker that ends
    normally waits for it; a killed one leaves the folder to ``sweep_orphaned_scratch``."""
    discarded = scratch.with_name(DISCARDED_PREFIX + scratch.name.removeprefix(SCRATCH_PREFIX))
    try:
        scratch.rename(discarded)
    except OSError:
        discarded = scratch  # removed under its own name, still in the background
    threading.Thread(target=shutil.rmtree, args=(discarded,), kwargs={"ignore_errors": True}, name="roder-discard").start()


def remove_scratch_of(pid: int) -> None:
    """Clean up after a worker process that died (a crash skips its own cleanup): kill what its
    setup or score commands left running, then remove its scratch folders (those of its
    rollouts in progress and those it had not finished removing)."""
    for prefix in (SCRATCH_PREFIX, DISCARDED_PREFIX):
        for folder in Path(tempfile.gettempdir()).glob(f"{prefix}{pid}-*"):
            _kill_processes_in(folder)
            shutil.rmtree(folder, ignore_errors=True)


def sweep_orphaned_scratch() -> None:
    """Clean up after workers that no longer exist (killed, or their machine's driver was), so
    crashes never leave workspace copies or score processes behind on a node."""
    with os.scandir(tempfile.gettempdir()) as entries:  # one pass over a busy /tmp, both prefixes
        names = [entry.name for entry in entries if entry.name.startswith((SCRATCH_PREFIX, DISCARDED_PREFIX))]
    for name in names:
        pid = name.removeprefix(SCRATCH_PREFIX).removeprefix(DISCARDED_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and Path("/proc/self").exists():
            remove_scratch_of(int(pid))


def _kill_processes_in(folder: Path) -> None:
    """SIGKILL every process working inside ``folder`` and the rest of its session (a score's
    ``sh`` dies with its worker, but what it started would not)."""
    own = os.getsid(0)
    sessions: set[int] = set()
    processes: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            session = int(stat[stat.rfind(b")") + 2 :].split()[3])
            processes[int(entry.name)] = session
            if Path(os.readlink(entry / "cwd")).is_relative_to(folder) and session != own:
                sessions.add(session)
        except (OSError, ValueError, IndexError):
            continue
    for pid, session in processes.items():
        if session in sessions and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class _LogCapture(logging.Handler):
    """Keeps a rollout's warnings and errors for its ``roder.log`` instead of a worker's stderr
    (where they would scramble the progress bar or vanish inside Ray). Memory is bounded
    (``bounded_log.HeadAndTail``: the first and latest lines, the dropped middle said in a line);
    each record is redacted before it is kept, so cutting a long one never leaves part of a secret."""

    def __init__(self, redactor: SecretRedactor | None = None) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.lines = HeadAndTail()
        self._redactor = redactor

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record) + "\n"
        self.lines.add(self._redactor(line) if self._redactor else line)


@dataclass
class _AgentRun:
    thread: Thread | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    thread_file: Path | None = None
    #: The turn was still running when the deadline's finalization reserve began.
    reserve_hit: bool = False
    #: What the model was sent: the system prompt and tool schemas of its first call.
    context: dict[str, Any] = field(default_factory=dict)
    #: The persisted events of the run, for the trajectory's per-item timings and per-call usage.
    events: list[RuntimeEvent] = field(default_factory=list)
    #: The runtime, still open: a task container's session is where its score runs.
    runtime: Runtime | None = None


class _Rollout:
    def __init__(self, spec: RolloutSpec, scratch: Path, on_event: Callable[[RuntimeEvent], None] | None) -> None:
        self.spec = spec
        self.task = spec.task
        self.settings = spec.settings
        self.scratch = scratch
        self.on_event = on_event
        self.files: dict[str, bytes] = {}
        #: The task's own image and the engine that runs it (None: the task runs on this machine).
        self.image: TaskImage | None = None
        self.engine: list[str] = []
        self.mounts: VerifierMounts | None = None
        self.redactor = value_redactor(os.environ, score_only=self.task.score_env)
        self.started = time.monotonic()
        self.deadline = self.task.deadline or self.settings.deadline
        self.result: dict[str, Any] = {
            "task_id": self.task.id,
            "rollout": spec.index,
            "task_digest": self.task.digest(),
            "provider": self.settings.provider,
            "model": self.settings.model,
            "mode": self.task.mode or self.settings.mode,
            "profile": self.settings.profile,
            "deadline_s": self.deadline,
            "reserve_s": self._reserve(),
            "metadata": self.task.metadata,
            "host": worker_host(),
        }

    def _reserve(self) -> float | None:
        if not self.deadline:
            return None
        return self.task.reserve if self.task.reserve is not None else finalization_reserve(self.deadline)

    async def run(self) -> RolloutOutcome:
        try:
            await self._run()
        except Exception as exc:  # a harness bug must cost one rollout, not the batch
            self._record(
                passed=False,
                cause="error",
                exit_reason="error",
                error={"message": f"{type(exc).__name__}: {exc}", "kind": "harness"},
            )
            self.files["error.log"] = traceback.format_exc().encode()
        self.result["timings"]["total_s"] = round(time.monotonic() - self.started, 3)
        self.result["attempts"] = self.spec.attempt
        self.result["discarded_attempts"] = list(self.spec.discarded)
        self.result["discarded_tokens"] = sum(int(d.get("tokens") or 0) for d in self.spec.discarded)
        return RolloutOutcome(redact_data(self.result, self.redactor)[0], _redacted_files(self.redactor, self.files))

    def _record(self, *, passed: bool, cause: str | None, exit_reason: str, error: dict[str, Any] | None = None) -> None:
        self.result.update(passed=passed, failure_cause=None if passed else cause, exit_reason=exit_reason, error=error)
        self.result.setdefault("timings", {})
        self.result.setdefault("usage", {})
        self.result.setdefault("score", None)

    async def _run(self) -> None:
        # The driver's RODER_* settings win over whatever a long-lived worker (Ray) inherited.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(FORWARDED_ENV_PREFIX)}
        base_env = {**inherited, **self.spec.env}
        command_env = child_environment(base_env, self.task.env)
        self.redactor = value_redactor(base_env, self.task.env, self.task.score_env)
        self.result["timings"] = timings = {}
        setup_started = time.monotonic()
        try:
            if self.task.container is not None or self.task.image is not None:
                self._prepare_image()
            workspace = self._workspace()
        except ContainerUnavailable as exc:
            self._not_run(str(exc))
            return
        except WorkspaceError as exc:
            self._record(
                passed=False, cause="setup_failure", exit_reason="setup_failed", error={"message": str(exc), "kind": "workspace"}
            )
            return
        setup_log: list[str] = []
        for command in self.task.setup:
            outcome = run_shell(command, workspace, command_env, self.task.setup_timeout)
            setup_log.append(outcome.log())
            if not outcome.ok:
                self.files["setup.log"] = "".join(setup_log).encode()
                self._record(
                    passed=False,
                    cause="setup_failure",
                    exit_reason="setup_failed",
                    error={"message": f"setup command {_why(outcome, self.task.setup_timeout)}: {command}", "kind": "setup"},
                )
                return
        if setup_log:
            self.files["setup.log"] = "".join(setup_log).encode()
        runner = None
        if self.task.score and not self.spec.in_place:  # in place: the user's own folder, never reset
            task = self.task
            runner = RunnerGuard(workspace, self.scratch / "runner", agent_files=task.agent_files, score=task.score)
            if task.keep_copy_files is not None:
                runner.copy_files = task.keep_copy_files
            if task.keep_copy_mib is not None:
                runner.copy_bytes = task.keep_copy_mib << 20
        guard = ScoreGuard(workspace, self.scratch / "guarded", tests=self.task.tests, protect=self.task.protect, runner=runner)
        guard.hide()
        baseline = Baseline(self.scratch / "baseline.git", workspace)
        # git records the baseline (submitted at once) while the runtime starts; the agent's turn
        # waits for it.
        recorded = asyncio.get_running_loop().run_in_executor(None, _record_base, baseline, runner)
        timings["setup_s"] = round(time.monotonic() - setup_started, 3)

        try:
            agent = await self._run_agent(workspace, {**base_env, **self.task.env}, command_env, recorded)
        except ContainerUnavailable as exc:
            self._not_run(str(exc))
            return
        finally:
            await asyncio.wait([recorded])  # never leave git working in a folder about to go
            if not recorded.cancelled():
                recorded.exception()  # raised by the agent's start already, when it failed
        try:
            await self._after_agent(agent, workspace, guard, baseline, command_env, base_env.get("HOME"))
        finally:
            if agent.runtime is not None:  # kept open for a score in the task's container
                await agent.runtime.close()

    def _not_run(self, reason: str) -> None:
        """This machine cannot run the task (its container): recorded apart from failures."""
        self._record(
            passed=False, cause="environment_unavailable", exit_reason=NOT_RUN, error={"message": reason, "kind": "environment"}
        )

    def _prepare_image(self) -> None:
        runner = self.settings.runner_table or {}
        oci = runner.get("oci_runtime") if runner.get("kind") == "container" else None
        self.engine = engine_argv(oci)
        self.image = prepare_image(self.task.container, self.task.image, self.engine, self.task.setup_timeout)
        self.result["container"] = {"image": self.image.tag, "source": self.image.source, "workdir": self.image.workdir}

    async def _after_agent(
        self,
        agent: _AgentRun,
        workspace: Path,
        guard: ScoreGuard,
        baseline: Baseline,
        command_env: dict[str, str],
        home: str | None,
    ) -> None:
        timings = self.result["timings"]
        timings["agent_s"] = round(agent.duration_s, 3)
        diff, changes = baseline.compare()
        kept = patch_paths(changes)
        self.files["workspace.diff"] = diff.encode()

        score: ShellOutcome | None = None
        if self.task.score:
            score_env = {**command_env, **self.task.score_env}  # the verifier's, for the score alone
            score, kept = await self._score(workspace, guard, baseline, kept, score_env, home, agent.runtime)
            timings["score_s"] = round(score.duration_s, 3)
        # The prediction is what the score saw: the agent's changes minus what the score reset.
        self.files["model.patch"] = (diff if kept == [path for _, path in changes] else baseline.diff(kept)).encode()
        self._conclude(agent, score)

    async def _score(
        self,
        workspace: Path,
        guard: ScoreGuard,
        baseline: Baseline,
        kept: list[str],
        env: dict[str, str],
        home: str | None,
        runtime: Runtime | None,
    ) -> tuple[ShellOutcome, list[str]]:
        """Make the workspace the scoring copy (base plus prediction, the runner's files and the
        tests put back), then run the score in the sandbox. Returns the outcome and the
        prediction's paths."""
        assert self.task.score is not None
        verifier = self.scratch / "verifier"
        (verifier / "logs" / "verifier").mkdir(parents=True)
        env = {**env, "LOGS_DIR": str(verifier / "logs")}
        refused = None
        witness: Witness | None = None
        try:
            settled, kept = guard.settle(kept, sweep=not self.spec.in_place)
            restored = settled + guard.restore(baseline)
            if self.image is None and self.task.tests_folder is not None:
                shutil.copytree(self.task.tests_folder, verifier / "tests", symlinks=True)
                env["TESTS_DIR"] = str(verifier / "tests")
        except UnscorableChange as exc:  # the agent's doing: the score fails closed, saying why
            refused = str(exc)
            outcome = ShellOutcome(self.task.score, None, f"score refused: {refused}\n", 0.0)
            restored = []
        except (ScoringError, OSError) as exc:
            outcome = ShellOutcome(self.task.score, None, f"scoring copy not prepared: {exc}\n", 0.0)
            restored = []
        else:
            outcome, witness = await self._run_score(workspace, verifier, env, home, runtime)
        self.result["score"] = {"command": outcome.command, "exit_code": outcome.exit_code, "timed_out": outcome.timed_out}
        try:
            reward = read_reward(verifier / "logs" / "verifier")
        except RewardError as exc:
            self.result.update(reward=0.0, reward_error=str(exc))
        else:
            if reward is not None:
                self.result["reward"] = reward
        forged = self._verdict(outcome, witness)
        log = "".join(f"# {line}\n" for line in restored) + outcome.log()
        if forged is not None:
            log += f"score refused: {forged}\n"
        refused = refused or forged
        if refused is not None:
            self.result["score"]["refused"] = refused
            self.result["reward"] = 0.0  # whatever the score wrote
        self.files["score.log"] = log.encode()
        return outcome, kept

    def _verdict(self, outcome: ShellOutcome, witness: Witness | None) -> str | None:
        """The one place a score's result is read (its exit status and reward are read as they
        are; ``_score_passed`` weighs them): each listed test's status from what the runner
        decided, never from lines the code under test printed (``score_witness``). Returns why
        the result cannot be trusted, or None."""
        try:
            report = witness.report() if witness is not None else None
            check_loaded(outcome.full_output, report)
            passing = self.result["reward"] > 0 if "reward" in self.result else outcome.exit_code == 0
            check_run(report, passing=passing)
            if self.task.fail_to_pass or self.task.pass_to_pass:
                statuses = test_statuses(outcome.full_output, report)
                self.result["tests"] = swe_report(statuses, self.task.fail_to_pass, self.task.pass_to_pass)
            elif "reward" not in self.result:  # the exit status decides
                check_exit(outcome.full_output, outcome.exit_code, report)
        except ForgedResult as exc:
            return str(exc)
        return None

    async def _run_score(
        self, workspace: Path, verifier: Path, env: dict[str, str], home: str | None, runtime: Runtime | None
    ) -> tuple[ShellOutcome, Witness | None]:
        """The score in the task's container, or on this machine in the score's sandbox, with
        the witness of its pytest runs (``score_witness``; not in a container)."""
        assert self.task.score is not None
        if self.image is not None:
            assert runtime is not None
            return await self._score_in_container(runtime, workspace, verifier), None
        witness = Witness.prepare(self.scratch, verifier)
        shown = [witness.folder, *(Path(path) for path in self.task.score_paths)]
        if self.task.python is not None:
            shown.append(Path(self.task.python).parent.parent)  # the environment it belongs to
        shown = [path for path in shown if path.exists()]  # what is missing fails below, saying so
        sandbox = score_sandbox(
            self.settings.sandbox, [workspace, verifier], workspace, network=self.task.network, home=home, shown=tuple(shown)
        )
        self.result["score_sandbox"] = sandbox.level
        with witness.listening():
            outcome = run_score(
                self.task.score,
                workspace,
                witness.environment(env, workspace),
                self.task.score_timeout,
                sandbox,
                verifier,
                python=self.task.python,
                caches_removed=not self.spec.in_place,  # ScoreGuard.settle removed them
            )
        return outcome, witness

    async def _score_in_container(self, runtime: Runtime, workspace: Path, verifier: Path) -> ShellOutcome:
        """Harbor's way: the tests at ``/tests``, the logs at ``/logs``, in the agent's container,
        with the task's environment and the verifier's (read from a file, never a command line)."""
        assert self.image is not None and self.task.score is not None
        session = runtime.runners.session_for(TASK_RUNNER, workspace)
        if session is None:
            raise OSError("the task's container is gone before its score")
        env = {k: v for k, v in self.task.env.items() if not is_secret_name(k)}
        env.update({**self.task.score_env, "TESTS_DIR": "/tests", "LOGS_DIR": "/logs"})
        tests = Path(self.task.tests_folder) if self.task.tests_folder else None
        self.result["score_sandbox"] = "container"
        began = time.monotonic()
        mounts = self.mounts
        assert mounts is not None
        code, output = await run_in_container(
            session, self.image.workdir, self.task.score, self.task.score_timeout, mounts, tests, env
        )
        shutil.copytree(mounts.logs, verifier / "logs", symlinks=True, dirs_exist_ok=True)
        return ShellOutcome(self.task.score, code, output, time.monotonic() - began, timed_out=code is None)

    def _workspace(self) -> Path:
        source = self.task.workspace
        if self.image is not None:
            if self.spec.in_place:
                raise WorkspaceError("a task with its own image cannot work in place")
            workspace = self.scratch / "workspace"
            export_workdir(self.engine, self.image, workspace)  # what the Dockerfile put there
            return workspace
        if not self.spec.in_place:
            return prepare_workspace(source, self.scratch / "workspace")
        if source is None or source.path is None or not Path(source.path).is_dir():
            raise WorkspaceError("working in place needs an existing workspace folder")
        return Path(source.path)

    async def _run_agent(
        self, workspace: Path, env: dict[str, str], command_env: dict[str, str], recorded: Awaitable[None]
    ) -> _AgentRun:
        """Start the runtime (while ``recorded``, the baseline, is taken), then run the turn."""
        from roder_core.runtime.bootstrap import StartSettings, start_runtime

        run = _AgentRun()
        settings = self.settings
        started = start_runtime(
            StartSettings(
                cwd=workspace,
                provider=settings.provider,
                model=settings.model,
                mode=self.task.mode or settings.mode,
                sandbox=settings.sandbox,
                profile=settings.profile,
                trust=False,
                interactive=False,
                max_iterations=settings.max_iterations,
                env=env,
                data_dir=self.scratch / "data",
                scratch_data=True,
                network=self.task.network,
                command_env=command_env,
                hidden_paths=credential_paths(os.environ.get("HOME")),
                logprobs=self.task.logprobs,
                token_ids=self.task.token_ids,
                **settings.start_tables(),
            ),
            installed_factories(env),
        )
        runtime = started.runtime
        self.result.update(provider=runtime.provider, model=runtime.model)
        on_event = self.on_event
        run.context = _record_requests(runtime)

        def observe(event: RuntimeEvent) -> None:
            if event.persisted:
                run.events.append(event)
            if on_event is not None:
                on_event(event)

        remove = runtime.bus.add_listener(observe)
        began = time.monotonic()
        try:
            thread = await runtime.start_thread()
            await recorded  # the workspace is the agent's from here on
            runner = self._container_runner(runtime) if self.image is not None else settings.runner
            if runner:
                try:
                    pulled = await self._use_runner(runtime, thread.id, workspace, runner)
                except (OSError, RoderError) as exc:
                    if self.image is None:
                        raise
                    raise ContainerUnavailable(f"the task's container did not start: {_first_line(exc)}") from None
                run.runtime = runtime if self.image is not None else None
            hard_end = time.time() + self.deadline if self.deadline else None
            work_deadline = hard_end - (self._reserve() or 0.0) if hard_end is not None else None
            await runtime.start_turn(
                thread.id,
                self.task.prompt,
                deadline=work_deadline,
                task_ledger_required=bool(self.task.task_ledger_required or settings.task_ledger_required),
            )
            try:
                async with asyncio.timeout(None if hard_end is None else hard_end - time.time()):
                    await runtime.wait_turn(thread.id)
            except TimeoutError:
                run.timed_out = True
                await runtime.interrupt(thread.id)
            run.reserve_hit = work_deadline is not None and time.time() >= work_deadline
            run.thread = runtime.thread(thread.id).model_copy(deep=True)
            if runner:
                await pulled()
        finally:
            run.duration_s = time.monotonic() - began
            remove()
            if run.runtime is None:  # a task container's stays open for its score
                await runtime.close()
        if runtime.store is not None and run.thread is not None:
            run.thread_file = self.scratch / "data" / "threads" / f"{run.thread.id}.jsonl"
        return run

    def _container_runner(self, runtime: Runtime) -> str:
        """Define the task's container as a runner of this rollout's runtime: its image, the
        workspace mounted at its working folder, the batch's container runner's engine settings."""
        from roder_core.settings.runners import RunnerConfig

        assert self.image is not None
        base = self.settings.runner_table or {}
        own = base.get("kind") == "container"
        table: dict[str, Any] = {key: base[key] for key in ("engine", "oci_runtime", "run_args") if own and key in base}
        self.mounts = VerifierMounts.under(self.scratch)
        table["run_args"] = [*table.get("run_args", []), *self.mounts.run_args()]
        table.update(kind="container", image=self.image.tag, workspace=self.image.workdir, network=self.task.network)
        runtime.options.config.runners[TASK_RUNNER] = RunnerConfig.model_validate(table)
        return TASK_RUNNER

    async def _use_runner(self, runtime: Runtime, thread_id: str, workspace: Path, name: str) -> Callable[[], Awaitable[None]]:
        """Run the agent's tools in the ``--runner`` runner. A runner whose workspace is not
        the local folder (ssh) gets a folder of this rollout's own there, filled with the
        prepared workspace; the returned coroutine brings the files back (the diff and the
        score are computed here, as for local runs) and removes that folder."""
        definition = runtime.runners.definition(name)
        base = definition.settings.get("workspace")
        remote = None
        if definition.kind == "ssh" and base:
            remote = f"{str(base).rstrip('/')}/roder-rollout-{secrets.token_hex(6)}"
        await runtime.set_thread_runner(thread_id, name, runner_workspace=remote)
        session = runtime.runners.session_for(name, workspace)
        if session is None:
            raise RuntimeError(f"runner {name!r} did not open")
        await session.push(workspace)
        self.result["runner"] = {"name": name, "kind": definition.kind, **session.describe()}

        async def pull() -> None:
            await session.pull(workspace)
            if remote is not None:
                await session.run_internal(["rm", "-rf", remote])

        return pull

    def _conclude(self, agent: _AgentRun, score: ShellOutcome | None) -> None:
        thread = agent.thread
        assert thread is not None
        turn: Turn = thread.turns[-1]
        results = [i for i in turn.items if isinstance(i, ToolResultItem)]
        denials = sum(1 for i in results if isinstance(i.data, dict) and i.data.get("policy_denied"))
        usage = thread.usage
        self.result.update(
            thread_id=thread.id,
            turn_status=turn.status,
            stop_reason=turn.stop_reason,
            model_calls=turn.model_calls,
            tool_calls=sum(1 for i in turn.items if isinstance(i, ToolCallItem)),
            policy_denials=denials,
            usage=usage.model_dump(mode="json"),
            tokens=usage.total_tokens,
            cost_usd=usage.cost_usd,
            #: The agent's last message: the answer, for tasks scored on what it says.
            final_message=next((i.text for i in reversed(turn.items) if isinstance(i, AgentMessageItem)), ""),
        )
        self.result["deadline_reserve_hit"] = agent.reserve_hit
        error = turn.error.wire() if turn.error else None
        agent_cause = _agent_failure(turn, agent.timed_out, denials)
        exit_reason = "timeout" if agent.timed_out else turn.status
        if score is not None:
            passed = self._score_passed(score)
            cause = agent_cause or _score_cause(score, self.result["score"])
        else:
            passed = turn.status == "completed" and not agent.timed_out
            cause = agent_cause or "error"
        self.result.setdefault("reward", 1.0 if passed else 0.0)
        self._record(passed=passed, cause=cause, exit_reason=exit_reason, error=error)
        if agent.thread_file is not None and agent.thread_file.exists():
            self.files["thread.jsonl"] = agent.thread_file.read_bytes()
        outcome = {k: self.result.get(k) for k in ("task_id", "rollout", "passed", "failure_cause", "score", "reward")}
        trajectory = build_trajectory(thread, agent.events, agent.context or None)
        trajectory["exitReason"] = exit_reason
        trajectory["rollout"] = outcome
        self.files["trajectory.json"] = json.dumps(trajectory, indent=2, ensure_ascii=False).encode()
        atif = build_atif(
            thread, agent.events, context=agent.context or None, extra={"exit_reason": exit_reason, "rollout": outcome}
        )
        self.files["atif.json"] = json.dumps(atif, indent=2, ensure_ascii=False).encode()

    def _score_passed(self, score: ShellOutcome) -> bool:
        """Never a refused score; full reward when the score wrote one, every listed test when
        the task lists them, otherwise the score's exit code."""
        if "refused" in self.result["score"]:
            return False
        if "reward" in self.result:
            return bool(self.result["reward"] >= 1.0)
        if "tests" in self.result:
            return bool(self.result["tests"]["resolved"]) and not score.timed_out
        return score.ok


#: The installed extensions' factories, by the extension index's folder (``installed_factories``).
_FACTORIES: dict[Path, list[tuple[str, ExtensionFactory]]] = {}


def _why(outcome: ShellOutcome, timeout: float) -> str:
    """How a command failed, for an error line (``setup.log`` holds its output)."""
    if outcome.timed_out:
        return f"timed out after {timeout:g} s"
    return f"failed (exit {outcome.exit_code})"


def _score_cause(score: ShellOutcome, recorded: dict[str, Any]) -> str:
    """Why a score failed: it hung, it was refused (the workspace could not be made the base
    plus the prediction), or it ran and failed."""
    if score.timed_out:
        return "score_timeout"
    return "score_refused" if "refused" in recorded else "score_failure"


def _record_base(baseline: Baseline, runner: RunnerGuard | None) -> None:
    """Before the agent: the baseline, then (with a score to guard) the state of the base's
    environments and of what it holds that git ignores."""
    baseline.record()
    if runner is not None:
        runner.keep(baseline.ignored() if runner.ignores_some() else [])


def installed_factories(env: dict[str, str]) -> list[tuple[str, ExtensionFactory]]:
    """The installed extensions' factories, listed and imported once per worker process (a
    worker lives for one batch, whose installation does not change) instead of once per
    rollout. Only the factories are kept: every rollout's runtime calls them again, so each
    gets extensions of its own. A rollout never trusts its workspace, so no project
    extension is ever among them."""
    from roder_core.kernel.distribution import discovered_factories
    from roder_core.settings.paths import RoderPaths

    paths = RoderPaths.from_env(env)
    factories = _FACTORIES.get(paths.cache_dir)
    if factories is None:
        factories = _FACTORIES[paths.cache_dir] = discovered_factories(paths)
    return factories


def _record_requests(runtime: Any) -> dict[str, Any]:
    """Keep the system prompt and tool schemas of the rollout's first model call (what a trainer
    needs to reproduce the prompt): the runtime's context assembler is wrapped for this runtime."""
    context: dict[str, Any] = {}
    assembler = runtime.context
    build = assembler.build

    async def recording_build(*args: Any, **kwargs: Any) -> Any:
        request = await build(*args, **kwargs)
        if not context:
            context.update(system=request.system, tools=[tool.model_dump(mode="json") for tool in request.tools])
        return request

    assembler.build = recording_build
    return context


def _redacted_files(redactor: SecretRedactor, files: dict[str, bytes]) -> dict[str, bytes]:
    """A rollout's output files with every known secret value and token format removed (the one
    pass every file of ``RolloutOutcome.files`` goes through, ``roder.log`` included)."""
    clean: dict[str, bytes] = {}
    for name, data in files.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            clean[name] = data
        else:
            clean[name] = redactor(text).encode()
    return clean


def worker_host() -> dict[str, Any]:
    """Where this rollout runs: the machine, the process and, under Ray, the node."""
    host: dict[str, Any] = {"hostname": socket.gethostname(), "pid": os.getpid()}
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            host["ray_node"] = ray.get_runtime_context().get_node_id()
        except Exception:  # outside a Ray task there is no node to name
            pass
    return host


def _agent_failure(turn: Turn, timed_out: bool, denials: int) -> str | None:
    """What went wrong on the agent's side, if anything (None: the turn itself was fine)."""
    if timed_out:
        return "timeout"
    if turn.status == "failed":
        kind = turn.error.kind if turn.error else ""
        if kind in PROVIDER_ERROR_KINDS:
            return "provider_failure"
        return "policy_denial" if kind == "hook_denied" else "agent_failure"
    if turn.status == "interrupted":
        return "error"
    return "policy_denial" if denials else None


def node_preflight(settings: RunSettings, declared_env: dict[str, str]) -> dict[str, Any]:
    """Whether this machine can run the batch's rollouts: its provider key must be in its own
    environment (or stored there, or declared by every task). Run on each Ray node before any
    rollout, so a node without the key fails here, by name, instead of failing every rollout
    sent to it. Returns the host and the problem (None: ready)."""
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    inherited = {k: v for k, v in os.environ.items() if not k.startswith(FORWARDED_ENV_PREFIX)}
    problem = None
    with tempfile.TemporaryDirectory(prefix="roder-preflight-") as scratch:
        try:
            runtime = start_runtime(
                StartSettings(
                    cwd=Path(scratch),
                    provider=settings.provider,
                    model=settings.model,
                    mode=settings.mode,
                    profile=settings.profile,
                    trust=False,
                    interactive=False,
                    data_dir=Path(scratch) / "data",
                    scratch_data=True,
                    env={**inherited, **declared_env},
                    **settings.start_tables(),
                )
            ).runtime
        except Exception as exc:  # any reason the runtime cannot start is this node's problem
            return {"host": worker_host(), "problem": f"{type(exc).__name__}: {exc}"}
        engine = runtime.engine(runtime.provider)
        needs_key = getattr(engine, "needs_key", False) and not getattr(engine, "key", None)
        if needs_key:
            name = getattr(getattr(engine, "spec", None), "api_key_env", None) or "its API key"
            problem = f"{name} is not set for provider {runtime.provider!r}"
        asyncio.run(runtime.close())
    return {"host": worker_host(), "problem": problem}


async def _check_runner(runtime: Runtime, name: str) -> None:
    """``--runner NAME`` names a defined runner that can run here (else the batch does not start)."""
    table = runtime.runners
    availability = await table.availability(table.definition(name))
    if not availability.available:
        raise ValueError(f"runner {name!r} cannot be used: {availability.reason}")


def resolve_settings(settings: RunSettings) -> tuple[RunSettings, list[str]]:
    """Check provider, model and profile once before any rollout (a typo fails at once, not
    in every worker) and pin the provider and model the configuration picked, so a resumed batch
    cannot drift to another model. Returns the pinned settings and notices for the user."""
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    log = _LogCapture()  # skipped extensions are reported below, once, instead of logged
    logging.getLogger().addHandler(log)
    try:
        with tempfile.TemporaryDirectory(prefix="roder-preflight-") as scratch:
            started = start_runtime(
                StartSettings(
                    cwd=Path(scratch),
                    provider=settings.provider,
                    model=settings.model,
                    mode=settings.mode,
                    sandbox=settings.sandbox,
                    profile=settings.profile,
                    trust=False,
                    interactive=False,
                    data_dir=Path(scratch) / "data",
                    scratch_data=True,
                )
            )
            runtime = started.runtime
            try:
                if settings.runner:
                    asyncio.run(_check_runner(runtime, settings.runner))
            finally:
                asyncio.run(runtime.close())
    finally:
        logging.getLogger().removeHandler(log)
    notices = list(started.distribution.warnings)
    notices += started.notices
    notices += [line.strip() for line in log.lines.lines() if " not loaded: " not in line]
    if started.fell_back_to_mock:
        notices.append("no provider configured: using the offline mock model (set --provider)")
    table, models = provider_tables(runtime.options.config, runtime.provider, runtime.model)
    runner = runtime.options.config.runners.get(settings.runner) if settings.runner else None
    pinned = replace(
        settings,
        provider=runtime.provider,
        model=runtime.model,
        provider_table=table,
        model_tables=models,
        runner_table=runner.model_dump(mode="json", exclude_none=True) if runner is not None else None,
    )
    return pinned, notices


def provider_tables(config: Any, provider: str, model: str | None) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """The chosen provider's ``[providers.NAME]`` table (None: a built-in left as is) without
    headers that carry credentials, and the ``[models]`` tables that describe its model."""
    from roder_core.brokers.secrets import is_secret_name

    raw = config.providers.get(provider)
    table = None
    if raw is not None:
        table = raw.model_dump(mode="json", exclude_none=True)
        table["headers"] = {k: v for k, v in table.get("headers", {}).items() if not _credential_header(k, is_secret_name)}
    names = {f"{provider}/{model}", str(model)} if model else set()
    models = {name: dict(value) for name, value in config.models_override.items() if name in names}
    return table, models


def _credential_header(name: str, is_secret_name: Callable[[str], bool]) -> bool:
    lowered = name.lower()
    return lowered in {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"} or is_secret_name(
        name.replace("-", "_")
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
