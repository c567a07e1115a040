"""Runs workflows: each step a turn in a thread of its own, independent steps at once.

Every step is an ordinary stored thread (a child thread as subagents have: its agent's tools,
a policy mode never looser than the session's), so its transcript, approvals and policy work as
anywhere else; a script step and the score commands are scripted turns of that thread
(``turn.scripted``): the same ``bash`` call a model would make, through policy and the sandbox.
A step starts once every step it depends on has completed, with their outputs put into its
prompt or command (``workflows.texts``); steps whose dependencies are met run in parallel.

Every change is appended to the workflow's journal before anything depends on it (a step's
thread id before its turn starts, its output once it ends), so after a crash the workflow is
``running`` with nobody running it (``live`` false) and ``resume`` takes it up at the step where
it stopped: finished steps keep their outputs, a cut-off step runs again in its own thread.
Pause and stop interrupt the running steps (they become ``interrupted``); a step that failed
(its turn failed or a score command did not pass) stops new steps from starting, and
``restart_step`` runs it again, with an optional instruction, along with every step after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.customization.definitions import AgentDefinition, split_model
from roder_core.customization.subagents import agent_tools, child_mode
from roder_core.errors import RoderError, ThreadNotFoundError
from roder_core.ir import AgentMessageItem, CommandExecutionItem, ToolResultItem, TurnStatus, new_id, now
from roder_core.kernel.tools import ToolCall
from roder_core.workflows import texts
from roder_core.workflows.journal import WorkflowJournal
from roder_core.workflows.model import (
    ScoreResult,
    StepDefinition,
    StepState,
    StepStatus,
    WorkflowDefinition,
    WorkflowError,
    WorkflowRun,
    WorkflowSource,
    WorkflowStatus,
    descendants,
    fresh_steps,
)

if TYPE_CHECKING:
    from roder_core.ir import Mode, Thread, Turn
    from roder_core.runtime.options import RuntimeOptions

log = logging.getLogger(__name__)

#: A planning model gets this many chances to correct an invalid workflow.
PLAN_CORRECTIONS = 2
#: Longest step output kept in the journal (the thread has all of it).
MAX_OUTPUT_CHARS = 200_000
#: Seconds a script step or a score command may run (the bash tool's own limit applies above).
COMMAND_TIMEOUT = 600

#: ``(run, change, step id)`` after every change: what ``workflows/updated`` carries.
Listener = Callable[[WorkflowRun, str, str | None], None]


class WorkflowHost(Protocol):
    """The runtime as the workflow engine drives it (``Runtime`` provides it)."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def start_thread(
        self, cwd: Path | None = None, provider: str | None = None, model: str | None = None, *, title: str = ""
    ) -> Thread: ...

    async def resume_thread(self, thread_id: str) -> Thread: ...

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None, agent: str | None = None
    ) -> None: ...

    async def run_turn(self, thread_id: str, text: str, **kw: Any) -> Turn: ...

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool: ...

    async def close_thread(self, thread_id: str) -> None: ...

    def tool_names(self) -> list[str]: ...


AgentLister = Callable[[Path], list[AgentDefinition]]


class WorkflowEngine:
    def __init__(self, host: WorkflowHost, journal: WorkflowJournal, agents: AgentLister) -> None:
        self._host = host
        self.journal = journal
        self._agents = agents
        #: Workflows this process has loaded or runs, by id.
        self._runs: dict[str, WorkflowRun] = {}
        #: The task driving each workflow this process runs.
        self._drivers: dict[str, asyncio.Task[None]] = {}
        #: Set to make a driver look for steps to start again (a step restarted while it runs).
        self._wakes: dict[str, asyncio.Event] = {}
        self._listeners: list[Listener] = []

    # ------------------------------------------------------------------ observing

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self, run: WorkflowRun, change: str, step_id: str | None = None) -> None:
        run.updated_at = now()
        for listener in list(self._listeners):
            try:
                listener(run, change, step_id)
            except Exception:
                log.exception("workflow listener failed")

    # ------------------------------------------------------------------ reading

    def get(self, workflow_id: str) -> WorkflowRun:
        run = self._runs.get(workflow_id)
        if run is None or workflow_id not in self._drivers:
            run = self.journal.load(workflow_id)
            self._runs[workflow_id] = run
        run.live = workflow_id in self._drivers
        run.elsewhere = not run.live and run.status is WorkflowStatus.RUNNING and self.journal.held_elsewhere(workflow_id)
        return run

    def runs(self, *, status: WorkflowStatus | None = None, limit: int | None = None) -> list[WorkflowRun]:
        runs = []
        for workflow_id in self.journal.ids():
            try:
                runs.append(self.get(workflow_id))
            except WorkflowError as exc:
                log.warning("%s", exc)
        runs = [r for r in runs if status is None or r.status is status]
        runs.sort(key=lambda r: r.updated_at, reverse=True)
        return runs[:limit] if limit else runs

    def agents(self, cwd: Path) -> dict[str, AgentDefinition]:
        return {a.name: a for a in self._agents(cwd)}

    def check_agents(self, definition: WorkflowDefinition, cwd: Path) -> None:
        known = self.agents(cwd)
        for step in definition.steps:
            if step.kind == "agent" and step.agent not in known:
                raise WorkflowError(f"step {step.id!r} names unknown agent {step.agent!r}; agents: {', '.join(sorted(known))}")

    # ------------------------------------------------------------------ creating

    def create(self, definition: WorkflowDefinition, source: WorkflowSource, cwd: Path) -> WorkflowRun:
        """A draft workflow, waiting for ``approve``."""
        self.check_agents(definition, cwd)
        run = WorkflowRun(definition=definition, source=source, cwd=str(cwd), steps=fresh_steps(definition))
        self.journal.create(run)
        self._runs[run.id] = run
        self._changed(run, "created")
        return run

    async def plan(self, goal: str, cwd: Path) -> WorkflowRun:
        """Ask the model for a workflow reaching ``goal`` (in a read-only planning thread), check
        it against the schema, and keep it as a draft. An invalid answer is sent back with what
        is wrong, up to PLAN_CORRECTIONS times."""
        if not goal.strip():
            raise WorkflowError("the goal is empty")
        host = self._host
        thread = await host.start_thread(cwd, title=f"Workflow plan: {' '.join(goal.split())[:60]}")
        host.restrict_thread(thread.id, tools=agent_tools(host.tool_names(), None), mode=child_mode(host.mode, "plan"))
        agents = sorted(self.agents(cwd).values(), key=lambda a: a.name)
        prompt = texts.planning_prompt(goal, [(a.name, a.description) for a in agents])
        try:
            for attempt in range(PLAN_CORRECTIONS + 1):
                turn = await host.run_turn(thread.id, prompt)
                if turn.status is not TurnStatus.COMPLETED:
                    reason = turn.error.message if turn.error else turn.status
                    raise WorkflowError(f"the planning turn {turn.status}: {reason} (thread {thread.id})")
                try:
                    definition = texts.parse_plan(_final_answer(turn))
                    self.check_agents(definition, cwd)
                except (ValueError, WorkflowError) as exc:
                    if attempt == PLAN_CORRECTIONS:
                        raise WorkflowError(f"the model did not plan a valid workflow: {exc} (thread {thread.id})") from None
                    prompt = texts.correction_prompt(str(exc))
                    continue
                source = WorkflowSource(kind="plan", thread_id=thread.id, goal=goal.strip())
                return self.create(definition, source, cwd)
        finally:
            await host.close_thread(thread.id)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ controlling

    async def approve(
        self, workflow_id: str, *, definition: WorkflowDefinition | None = None, mode: str | None = None
    ) -> WorkflowRun:
        """Start a draft, optionally with an edited definition and a mode for its steps (never
        looser than the session's)."""
        run = self.get(workflow_id)
        if run.status is not WorkflowStatus.DRAFT:
            raise WorkflowError(f"workflow {workflow_id} is {run.status}, not a draft waiting for approval")
        if definition is not None:
            self.check_agents(definition, Path(run.cwd))
            run.definition, run.steps = definition, fresh_steps(definition)
            self.journal.edited(run)
        run.mode = child_mode(self._host.mode, mode or run.definition.mode)
        await self._start(run, "approved")
        return run

    async def resume(self, workflow_id: str) -> WorkflowRun:
        """Take a paused workflow, or one cut off by a crash, up again where it stopped."""
        run = self.get(workflow_id)
        if run.live:
            raise WorkflowError(f"workflow {workflow_id} is already running")
        if run.status not in (WorkflowStatus.PAUSED, WorkflowStatus.RUNNING):
            raise WorkflowError(f"workflow {workflow_id} is {run.status}; only a paused or cut-off workflow resumes")
        await self._start(run, "resumed")
        return run

    async def pause(self, workflow_id: str) -> WorkflowRun:
        return await self._halt(workflow_id, WorkflowStatus.PAUSED)

    async def stop(self, workflow_id: str) -> WorkflowRun:
        """End a workflow for good (a draft is rejected this way too)."""
        return await self._halt(workflow_id, WorkflowStatus.STOPPED)

    async def restart_step(self, workflow_id: str, step_id: str, instruction: str = "") -> WorkflowRun:
        """Run one step again (in its own thread, told ``instruction``), and every step after it."""
        run = self.get(workflow_id)
        run.definition.step(step_id)
        state = run.state(step_id)
        if state.status in (StepStatus.RUNNING, StepStatus.PENDING):
            raise WorkflowError(f"step {step_id} is {state.status}; only a finished, failed or interrupted step restarts")
        if run.status is WorkflowStatus.DRAFT:
            raise WorkflowError(f"workflow {workflow_id} is a draft; approve it first")
        busy = sorted(s for s in descendants(run.definition, step_id) if run.state(s).status is StepStatus.RUNNING)
        if busy:
            raise WorkflowError(f"step {', '.join(busy)} after {step_id} is running; pause the workflow first")
        was_live = run.live
        if not was_live:
            self.journal.claim(run.id)
        try:
            redo = StepState(id=step_id, thread_id=state.thread_id, attempts=state.attempts, instruction=instruction)
            self._put_step(run, redo, "restarted")
            for later in descendants(run.definition, step_id):
                old = run.state(later)
                if old.status is not StepStatus.PENDING:
                    self._put_step(run, StepState(id=later, thread_id=old.thread_id, attempts=old.attempts), "reset")
        finally:
            if not was_live:
                self.journal.release(run.id)
        if not was_live and run.status is not WorkflowStatus.PAUSED:
            await self._start(run, "resumed")
        elif was_live:
            self._wake(run.id)
        return run

    async def aclose(self) -> None:
        """Stop driving every workflow (they stay ``running`` on disk and resume later)."""
        drivers = list(self._drivers.values())
        for task in drivers:
            task.cancel()
        await asyncio.gather(*drivers, return_exceptions=True)
        for workflow_id in list(self._drivers):
            self._drivers.pop(workflow_id)
            self._wakes.pop(workflow_id, None)
            self._runs[workflow_id].live = False
        self.journal.close()

    # ------------------------------------------------------------------ driving

    async def _start(self, run: WorkflowRun, change: str) -> None:
        self.journal.claim(run.id)
        self._runs[run.id] = run
        for state in run.steps:  # cut off mid-run by a crash: run again in the same thread
            if state.status is StepStatus.RUNNING:
                state.status = StepStatus.INTERRUPTED
                self.journal.step(run, state)
        run.error = ""
        run.status = WorkflowStatus.RUNNING
        self.journal.status(run)
        wake = self._wakes[run.id] = asyncio.Event()
        self._drivers[run.id] = asyncio.create_task(self._drive(run, wake), name=f"workflow {run.id}")
        run.live = True
        self._changed(run, change)

    def _wake(self, workflow_id: str) -> None:
        wake = self._wakes.get(workflow_id)
        if wake is not None:
            wake.set()

    async def _halt(self, workflow_id: str, status: WorkflowStatus) -> WorkflowRun:
        """Pause or stop: a running workflow's steps are interrupted; one cut off by a crash (or
        paused, for stop) only changes status."""
        run = self.get(workflow_id)
        task = self._drivers.get(workflow_id)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if workflow_id in self._drivers:  # not finished on its own just before
                self._finish(run, status)
            return run
        allowed = {WorkflowStatus.RUNNING} | (
            {WorkflowStatus.PAUSED, WorkflowStatus.DRAFT} if status is WorkflowStatus.STOPPED else set()
        )
        if run.status not in allowed:
            raise WorkflowError(f"workflow {workflow_id} is {run.status}; it cannot be {status}")
        self.journal.claim(run.id)  # refused while another process runs it
        try:
            for state in run.steps:
                if state.status is StepStatus.RUNNING:
                    self._put_step(run, state.model_copy(update={"status": StepStatus.INTERRUPTED}), "stepInterrupted")
            self._set_status(run, status)
        finally:
            self.journal.release(run.id)
        return run

    async def _drive(self, run: WorkflowRun, wake: asyncio.Event) -> None:
        running: dict[asyncio.Task[None], str] = {}
        try:
            while True:
                failed = any(s.status is StepStatus.FAILED for s in run.steps)
                if not failed:
                    for step in self._ready(run, set(running.values())):
                        running[asyncio.create_task(self._run_step(run, step), name=f"step {step.id}")] = step.id
                if not running:
                    break
                waker = asyncio.create_task(wake.wait())
                await asyncio.wait({*running, waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                wake.clear()
                for task in [t for t in running if t.done()]:
                    running.pop(task)
            if all(s.status is StepStatus.COMPLETED for s in run.steps):
                self._finish(run, WorkflowStatus.COMPLETED)
            else:
                failed_steps = [s.id for s in run.steps if s.status is StepStatus.FAILED]
                run.error = f"step {', '.join(failed_steps)} failed" if failed_steps else "no step can start"
                self._finish(run, WorkflowStatus.FAILED)
        except asyncio.CancelledError:  # paused, stopped or closing: _halt and aclose settle the rest
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    def _ready(self, run: WorkflowRun, running: set[str]) -> list[StepDefinition]:
        done = {s.id for s in run.steps if s.status is StepStatus.COMPLETED}
        return [
            step
            for step in run.definition.steps
            if step.id not in running
            and run.state(step.id).status in (StepStatus.PENDING, StepStatus.INTERRUPTED)
            and set(step.depends_on) <= done
        ]

    def _finish(self, run: WorkflowRun, status: WorkflowStatus) -> None:
        self._drivers.pop(run.id, None)
        self._wakes.pop(run.id, None)
        run.live = False
        self._set_status(run, status)
        self.journal.release(run.id)

    def _set_status(self, run: WorkflowRun, status: WorkflowStatus) -> None:
        run.status = status
        self.journal.status(run)
        self._changed(run, status.value)

    def _put_step(self, run: WorkflowRun, state: StepState, change: str) -> None:
        run.steps = [state if s.id == state.id else s for s in run.steps]
        self.journal.step(run, state)
        self._changed(run, change, state.id)

    # ------------------------------------------------------------------ one step

    async def _run_step(self, run: WorkflowRun, step: StepDefinition) -> None:
        previous = run.state(step.id)
        state = previous.model_copy(deep=True)
        state.status, state.attempts, state.started_at = StepStatus.RUNNING, state.attempts + 1, now()
        state.output, state.error, state.scores, state.value, state.finished_at = "", "", [], None, None
        thread_id: str | None = None
        try:
            thread_id, fresh = await self._step_thread(run, step, state)
            state.thread_id = thread_id
            self._put_step(run, state, "stepStarted")
            rerun = None if fresh else previous.status is StepStatus.INTERRUPTED
            output = await self._execute(run, step, state, thread_id, rerun)
            if output is not None:
                state.output = output[:MAX_OUTPUT_CHARS]
                if step.score and not state.error:
                    await self._score(run, step, state, thread_id)
            state.status = StepStatus.FAILED if state.error else StepStatus.COMPLETED
            state.instruction = ""
        except asyncio.CancelledError:
            if thread_id is not None:
                await asyncio.shield(self._host.interrupt(thread_id))
            state.status, state.finished_at = StepStatus.INTERRUPTED, now()
            self._put_step(run, state, "stepInterrupted")
            raise
        except (RoderError, OSError) as exc:
            state.status, state.error = StepStatus.FAILED, str(exc)
        finally:
            if thread_id is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._host.close_thread(thread_id))
        state.finished_at = now()
        self._put_step(run, state, "stepCompleted" if state.status is StepStatus.COMPLETED else "stepFailed")

    async def _step_thread(self, run: WorkflowRun, step: StepDefinition, state: StepState) -> tuple[str, bool]:
        """The step's thread: the one it ran in before (resumed), else a new one."""
        host = self._host
        agent = self.agents(Path(run.cwd)).get(step.agent) if step.kind == "agent" else None
        if step.kind == "agent" and agent is None:
            raise WorkflowError(f"agent {step.agent!r} of step {step.id!r} is not defined here")
        thread_id, fresh = state.thread_id, False
        if thread_id is not None:
            try:
                await host.resume_thread(thread_id)
            except ThreadNotFoundError:  # never saved (cut off before its first event was written)
                thread_id = None
        if thread_id is None:
            provider, model = split_model(agent.model if agent else None, host.provider)
            thread = await host.start_thread(Path(run.cwd), provider, model, title=f"{run.definition.name} · {step.id}")
            thread_id, fresh = thread.id, True
        tools = frozenset({"bash"}) if agent is None else agent_tools(host.tool_names(), agent)
        mode = child_mode(run.mode or str(host.mode), agent.mode if agent else None)
        host.restrict_thread(thread_id, tools=tools, mode=mode, agent=f"{run.definition.name}/{step.id}")
        return thread_id, fresh

    async def _execute(
        self, run: WorkflowRun, step: StepDefinition, state: StepState, thread_id: str, rerun: bool | None
    ) -> str | None:
        """Run the step's agent or script; its output, or None (with ``state.error``) on failure."""
        outputs = {i: o for i, o in run.outputs().items() if i in step.input_ids}
        goal = run.source.goal
        if step.kind == "script":
            command = texts.step_command(step, outputs, goal)
            turn = await self._host.run_turn(thread_id, f"Workflow step {step.id} runs: {command}", scripted=[_bash(command)])
            commands = _commands(turn)
            if turn.status is not TurnStatus.COMPLETED or not commands:
                state.error = _turn_problem(turn)
                return None
            if commands[-1].exit_code != 0:
                state.error = f"the script exited with {_exit(commands[-1])}"
                return commands[-1].output
            return commands[-1].output
        agent = self.agents(Path(run.cwd))[step.agent]
        text = texts.step_prompt(step, outputs, goal=goal, agent_prompt=agent.prompt, instruction=state.instruction)
        if rerun is not None:
            text = texts.rerun_prompt(state.instruction, rerun) + "\n\n" + text
        turn = await self._host.run_turn(thread_id, text)
        if turn.status is not TurnStatus.COMPLETED:
            state.error = _turn_problem(turn)
            return None
        return _final_answer(turn)

    async def _score(self, run: WorkflowRun, step: StepDefinition, state: StepState, thread_id: str) -> None:
        outputs = {i: o for i, o in run.outputs().items() if i in step.input_ids}
        commands = [texts.score_command(c, outputs, state.output, run.source.goal) for c in step.score]
        calls = [_bash(c) for c in commands]
        turn = await self._host.run_turn(thread_id, f"Workflow step {step.id}: scoring", scripted=calls)
        seen = {item.call_id: item for item in _commands(turn)}
        results = {item.call_id: item for item in turn.items if isinstance(item, ToolResultItem)}
        for call, command in zip(calls, step.score, strict=True):
            ran = seen.get(call.id)
            if ran is None:
                result = results.get(call.id)
                text = result.text if result is not None else _turn_problem(turn)
                state.scores.append(ScoreResult(command=command, last_line=_last_line(text)))
                continue
            state.scores.append(
                ScoreResult(command=command, exit_code=ran.exit_code, last_line=_last_line(ran.output), passed=ran.exit_code == 0)
            )
        failing = [s for s in state.scores if not s.passed]
        if failing:
            first = failing[0]
            how = f"exit code {first.exit_code}" if first.exit_code is not None else first.last_line or "not run"
            state.error = f"score failed: {first.command} ({how})"
        state.value = next((v for s in reversed(state.scores) if (v := _number(s.last_line)) is not None), None)


def _bash(command: str) -> ToolCall:
    return ToolCall(id=new_id("call"), name="bash", arguments={"command": command, "timeout": COMMAND_TIMEOUT})


def _commands(turn: Turn) -> list[CommandExecutionItem]:
    return [i for i in turn.items if isinstance(i, CommandExecutionItem)]


def _final_answer(turn: Turn) -> str:
    answers = [i.text for i in turn.items if isinstance(i, AgentMessageItem) and i.text.strip()]
    return answers[-1] if answers else ""


def _turn_problem(turn: Turn) -> str:
    if turn.error is not None:
        return f"the step's turn {turn.status}: {turn.error.message}"
    refused = [i.text for i in turn.items if isinstance(i, ToolResultItem) and i.is_error]
    if refused:
        return refused[-1].splitlines()[0] if refused[-1] else "the command was refused"
    return f"the step's turn {turn.status}"


def _exit(item: CommandExecutionItem) -> str:
    return "a timeout" if item.timed_out else f"exit code {item.exit_code}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
