"""What a workflow is: its definition (validated, from a model's plan or a file) and its state.

A workflow is a graph of steps. A step is run by an agent (an agent definition and a prompt) or
by a script (a shell command: a "workflow script method"); it may wait for other steps
(``depends_on``), read their outputs (``inputs``, placed in its prompt or, quoted, in its
command), and be scored by commands that must all succeed (``score``). The definition is one
pydantic model, so a planned workflow, a file and a client's edit are checked by the same rules:
unique step ids, known dependencies, no cycle, inputs only from steps that run before.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from roder_core.errors import RoderError
from roder_core.ir import IRModel, empty_list, new_id, now

#: Step ids name placeholders (``{step.ID}``) and rows in every client: short and plain.
STEP_ID = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
MAX_STEPS = 40
MAX_SCORE_COMMANDS = 8


class WorkflowError(RoderError):
    """A workflow method that does not apply (unknown id, wrong state, bad definition)."""


#: Definitions refuse unknown keys: a misspelt ``depends-on`` must be an error, not ignored.
_STRICT = ConfigDict(extra="forbid")


class StepDefinition(IRModel):
    model_config = _STRICT

    id: str = Field(description="short unique id: lowercase letters, digits, - or _; starts with a letter")
    title: str = Field(default="", description="one line for people")
    agent: str = Field(default="general", description="the agent definition that runs the step (agents/list)")
    prompt: str = Field(default="", description="the task for the agent; {step.ID} is replaced by that step's output")
    run: str = Field(
        default="",
        description="instead of an agent, this shell command runs; its output is the step's output; "
        "{step.ID} is replaced by that step's output, shell-quoted",
    )
    depends_on: list[str] = Field(default_factory=empty_list, description="steps that must complete before this one starts")
    inputs: list[str] | None = Field(
        default=None, description="steps whose outputs this step receives (default: depends_on); each must run before"
    )
    score: list[str] = Field(
        default_factory=empty_list,
        description="shell commands run after the step; all must exit 0 for the step to pass; {output} is its output",
    )

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if not STEP_ID.match(value):
            raise ValueError(f"step id {value!r} must be 1-40 lowercase letters, digits, - or _, starting with a letter")
        return value

    @field_validator("score")
    @classmethod
    def _few_scores(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_SCORE_COMMANDS:
            raise ValueError(f"at most {MAX_SCORE_COMMANDS} score commands per step")
        if any(not c.strip() for c in value):
            raise ValueError("a score command is empty")
        return value

    @model_validator(mode="after")
    def _agent_or_script(self) -> StepDefinition:
        if bool(self.prompt.strip()) == bool(self.run.strip()):
            raise ValueError(f"step {self.id!r} needs exactly one of prompt (an agent step) or run (a script step)")
        return self

    @property
    def kind(self) -> Literal["agent", "script"]:
        return "script" if self.run.strip() else "agent"

    @property
    def input_ids(self) -> list[str]:
        return list(self.depends_on) if self.inputs is None else list(self.inputs)


class WorkflowDefinition(IRModel):
    model_config = _STRICT

    name: str = Field(min_length=1, max_length=80, description="short name of the workflow")
    description: str = Field(default="", description="what the workflow achieves")
    mode: Literal["plan", "ask", "auto-edit", "bypass"] | None = Field(
        default=None, description="policy mode of its steps; never looser than the session's"
    )
    steps: list[StepDefinition] = Field(min_length=1, max_length=MAX_STEPS)

    @model_validator(mode="after")
    def _graph(self) -> WorkflowDefinition:
        ids = [s.id for s in self.steps]
        seen: set[str] = set()
        for step_id in ids:
            if step_id in seen:
                raise ValueError(f"step id {step_id!r} is used twice")
            seen.add(step_id)
        for step in self.steps:
            for dep in step.depends_on:
                if dep not in seen:
                    raise ValueError(f"step {step.id!r} depends on unknown step {dep!r}")
                if dep == step.id:
                    raise ValueError(f"step {step.id!r} depends on itself")
        topological_order(self.steps)  # raises on a cycle
        for step in self.steps:
            before = ancestors(self, step.id)
            for source in step.input_ids:
                if source not in before:
                    raise ValueError(f"step {step.id!r} takes input from {source!r}, which does not run before it")
        return self

    def step(self, step_id: str) -> StepDefinition:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise WorkflowError(f"workflow {self.name!r} has no step {step_id!r}")


def topological_order(steps: list[StepDefinition]) -> list[str]:
    """Step ids, each after everything it depends on (file order among equals); a cycle is an error."""
    deps = {s.id: set(s.depends_on) for s in steps}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(steps):
        ready = [s.id for s in steps if s.id not in done and deps[s.id] <= done]
        if not ready:
            stuck = sorted(set(deps) - done)
            raise ValueError(f"steps {', '.join(stuck)} depend on each other in a cycle")
        order.extend(ready)
        done.update(ready)
    return order


def levels(definition: WorkflowDefinition) -> list[list[str]]:
    """Step ids by depth: a level's steps may run at once, each after steps of earlier levels."""
    depth: dict[str, int] = {}
    deps = {s.id: s.depends_on for s in definition.steps}
    for step_id in topological_order(definition.steps):
        depth[step_id] = 1 + max((depth[d] for d in deps[step_id]), default=-1)
    rows: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
    for step in definition.steps:
        rows[depth[step.id]].append(step.id)
    return rows


def ancestors(definition: WorkflowDefinition, step_id: str) -> set[str]:
    """Every step that must complete before ``step_id`` starts (dependencies, transitively)."""
    deps = {s.id: s.depends_on for s in definition.steps}
    found: set[str] = set()
    todo = list(deps.get(step_id, []))
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(deps.get(current, []))
    return found


def descendants(definition: WorkflowDefinition, step_id: str) -> set[str]:
    """Every step that waits on ``step_id``, directly or not."""
    return {s.id for s in definition.steps if step_id in ancestors(definition, s.id)}


# --------------------------------------------------------------------------- state


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    #: Stopped mid-run (pause, stop, a crash); runs again on resume, in the same thread.
    INTERRUPTED = "interrupted"


class WorkflowStatus(StrEnum):
    #: Planned or imported, waiting for ``workflows/approve``.
    DRAFT = "draft"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"


class ScoreResult(IRModel):
    command: str
    exit_code: int | None = None
    #: The last line of its output (a number there is the step's score ``value``).
    last_line: str = ""
    passed: bool = False


class StepState(IRModel):
    id: str
    status: StepStatus = StepStatus.PENDING
    thread_id: str | None = None
    output: str = ""
    error: str = ""
    scores: list[ScoreResult] = Field(default_factory=empty_list)
    #: The number a passing score printed last, if any (to compare attempts).
    value: float | None = None
    attempts: int = 0
    #: A person's instruction for the next run (``workflows/restartAgent``).
    instruction: str = ""
    started_at: float | None = None
    finished_at: float | None = None


class WorkflowSource(IRModel):
    kind: Literal["plan", "file", "client"]
    #: The workflow file (``.roder/workflows/NAME.toml``) or the planning thread.
    path: str | None = None
    thread_id: str | None = None
    goal: str = ""


class WorkflowRun(IRModel):
    """One workflow as its journal tells it (``workflows/get``)."""

    id: str = Field(default_factory=lambda: new_id("wf"))
    definition: WorkflowDefinition
    source: WorkflowSource
    cwd: str
    status: WorkflowStatus = WorkflowStatus.DRAFT
    #: The policy mode its steps run in (fixed at approval).
    mode: str | None = None
    steps: list[StepState] = Field(default_factory=empty_list)
    error: str = ""
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    #: Whether this process is running it now; a ``running`` workflow nobody runs was cut off
    #: (a crash) and continues with ``workflows/resume``.
    live: bool = False
    #: Another Roder process runs it now (its lock is held): resume there, not here.
    elsewhere: bool = False

    def state(self, step_id: str) -> StepState:
        for state in self.steps:
            if state.id == step_id:
                return state
        raise WorkflowError(f"workflow {self.id} has no step {step_id!r}")

    def outputs(self) -> dict[str, str]:
        return {s.id: s.output for s in self.steps if s.status is StepStatus.COMPLETED}


def fresh_steps(definition: WorkflowDefinition) -> list[StepState]:
    return [StepState(id=s.id) for s in definition.steps]


def definition_schema() -> dict[str, Any]:
    """The JSON Schema a planning model must follow (shown to it, and checked on its answer)."""
    return WorkflowDefinition.model_json_schema(by_alias=False)
