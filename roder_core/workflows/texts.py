"""The words of a workflow: a step's prompt and commands with earlier outputs put in, the
planning prompt, and reading a model's planned workflow out of its answer.

Placeholders: ``{step.ID}`` is the output of step ID (one of the step's inputs); in commands it
is shell-quoted, so an output is always one argument and never code; ``{output}`` (score
commands only) is the step's own output, quoted too; ``{goal}`` is the planned workflow's goal.
In a command, trailing newlines are dropped first, as a shell's ``$(...)`` drops them. An agent
step also gets its inputs appended under a heading each, so a prompt without placeholders still
sees them. Outputs put into a command are capped (MAX_COMMAND_INPUT).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pydantic import ValidationError

from roder_core.workflows.model import StepDefinition, WorkflowDefinition, definition_schema

PLACEHOLDER = re.compile(r"\{(step\.[a-z][a-z0-9_-]{0,39}|output|goal)\}")
#: Longest output placed into a command line (the rest is cut, with a marker).
MAX_COMMAND_INPUT = 8_000


def _capped(text: str) -> str:
    if len(text) <= MAX_COMMAND_INPUT:
        return text
    return text[:MAX_COMMAND_INPUT] + "\n[... cut: the output is longer]"


def expand(template: str, outputs: dict[str, str], *, goal: str = "", output: str | None = None, quote: bool) -> str:
    """``template`` with its placeholders replaced; unknown names stay as written."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "goal":
            text = goal
        elif name == "output":
            if output is None:
                return match.group(0)
            text = output
        else:
            step_id = name.removeprefix("step.")
            if step_id not in outputs:
                return match.group(0)
            text = outputs[step_id]
        return shlex.quote(_capped(text.rstrip("\n"))) if quote else text

    return PLACEHOLDER.sub(value, template)


def step_prompt(step: StepDefinition, outputs: dict[str, str], *, goal: str, agent_prompt: str, instruction: str) -> str:
    """What an agent step's thread is told: the agent's instructions, the task, its inputs."""
    parts = [agent_prompt.strip()] if agent_prompt.strip() else []
    parts.append("Your task:\n" + expand(step.prompt, outputs, goal=goal, quote=False).strip())
    inputs = [(i, outputs[i]) for i in step.input_ids if i in outputs]
    if inputs:
        parts.append("Outputs of earlier steps:\n" + "\n\n".join(f"### {i}\n{text.strip()}" for i, text in inputs))
    if instruction.strip():
        parts.append("Instruction for this run:\n" + instruction.strip())
    parts.append("End with your result as your final answer: it is this step's output, passed on to later steps.")
    return "\n\n".join(parts)


def rerun_prompt(instruction: str, interrupted: bool) -> str:
    """What a step's own thread is told when the step runs again in it."""
    why = (
        "This step was interrupted before it finished (paused, stopped or a crash)."
        if interrupted
        else "This step runs again: its last result was not good enough."
    )
    text = f"{why} Do the task again from where things stand and end with the complete result as your final answer."
    return f"{text}\n\nInstruction for this run:\n{instruction.strip()}" if instruction.strip() else text


def step_command(step: StepDefinition, outputs: dict[str, str], goal: str) -> str:
    return expand(step.run, outputs, goal=goal, quote=True)


def score_command(command: str, outputs: dict[str, str], output: str, goal: str) -> str:
    return expand(command, outputs, goal=goal, output=output, quote=True)


# --------------------------------------------------------------------------- planning


def planning_prompt(goal: str, agents: list[tuple[str, str]]) -> str:
    listing = "\n".join(f"- {name}: {description}" for name, description in agents)
    schema = json.dumps(definition_schema(), indent=1)
    return (
        "Plan a workflow that achieves the goal below. A workflow is a graph of steps; each step is run "
        "by an agent in its own thread (prompt) or is a shell command (run). Steps that do not depend on "
        "each other run in parallel; a step receives the outputs of the steps in its inputs (default: "
        "its depends_on). Add score commands (shell commands that must exit 0) where a result can be "
        "checked mechanically. Keep it small: only the steps the goal needs.\n\n"
        f"Goal:\n{goal.strip()}\n\nAgents:\n{listing}\n\n"
        "Answer with only one JSON object that follows this JSON Schema (no prose, no code fence):\n"
        f"{schema}"
    )


def correction_prompt(problem: str) -> str:
    return (
        f"That answer is not a valid workflow: {problem}\nAnswer again with only the corrected JSON object, following the schema."
    )


def parse_plan(answer: str) -> WorkflowDefinition:
    """The workflow in a model's answer: the JSON object it holds (a code fence around it is
    fine), checked against the definition. Raises ValueError saying what is wrong."""
    data = _json_object(answer)
    try:
        return WorkflowDefinition.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:8]:
            where = ".".join(str(p) for p in err["loc"]) or "workflow"
            problems.append(f"{where}: {err['msg']}")
        raise ValueError("; ".join(problems)) from None


def _json_object(answer: str) -> Any:
    text = answer.strip()
    fenced = re.search(r"```(?:json)?\s*\n(.*?)\n```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    start = text.find("{")
    if start < 0:
        raise ValueError("the answer holds no JSON object")
    try:
        value, _end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the JSON does not parse ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError("the answer's JSON is not an object")
    return value
