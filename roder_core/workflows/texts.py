"""The words of a workflow: a step's prompt and commands with earlier outputs put in, the
planning prompt, and reading a model's planned workflow out of its answer.

Placeholders: ``{step.ID}`` is the output of step ID (one of the step's inputs); ``{output}``
(score commands only) is the step's own output; ``{goal}`` is the planned workflow's goal. In a
command the values are never pasted into its text, where the shell would parse them (a quote of
the template's own around a placeholder would undo any quoting): each is assigned to a shell
variable first, and the placeholder becomes a quoted reference to it, so an output is always one
argument and never code. Trailing newlines are dropped first, as a shell's ``$(...)`` drops
them. An agent step also gets its inputs appended under a heading each, so a prompt without
placeholders still sees them. Outputs put into a command are capped (MAX_COMMAND_INPUT).
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


def _value(name: str, outputs: dict[str, str], goal: str, output: str | None) -> str | None:
    """What placeholder ``name`` stands for, or None when it is unknown (left as written)."""
    if name == "goal":
        return goal
    if name == "output":
        return output
    return outputs.get(name.removeprefix("step."))


def expand(template: str, outputs: dict[str, str], *, goal: str = "", output: str | None = None) -> str:
    """A prompt: ``template`` with its placeholders replaced; unknown names stay as written."""

    def value(match: re.Match[str]) -> str:
        found = _value(match.group(1), outputs, goal, output)
        return match.group(0) if found is None else found

    return PLACEHOLDER.sub(value, template)


def command_line(template: str, outputs: dict[str, str], *, goal: str = "", output: str | None = None) -> str:
    """A shell command: each known placeholder's value assigned to a variable of its own ahead of
    the template, whose placeholders become references to it, written for the quotes around
    them (``quoting_at``) so the value stays one word; unknown names stay as written."""
    assigned: dict[str, str] = {}
    values: dict[str, str] = {}
    body: list[str] = []
    last = 0
    for match in PLACEHOLDER.finditer(template):
        name = match.group(1)
        found = _value(name, outputs, goal, output)
        if found is None:
            continue
        if name not in assigned:
            assigned[name] = f"RODER_V{len(assigned) + 1}"
            values[name] = _capped(found.rstrip("\n"))
        variable = "${" + assigned[name] + "}"
        quoting = quoting_at(template, match.start())
        body.append(template[last : match.start()])
        body.append({"double": variable, "single": f"'\"{variable}\"'"}.get(quoting, f'"{variable}"'))
        last = match.end()
    body.append(template[last:])
    prefix = "".join(f"{assigned[name]}={shlex.quote(values[name])}; " for name in assigned)
    return prefix + "".join(body)


def quoting_at(text: str, end: int) -> str:
    """Whether ``text[end]`` lies inside single quotes, double quotes or neither ("plain"), as a
    shell reads ``text[:end]``. A rough reading (no ``$(...)`` nesting) only ever costs a value
    its being one word, never its being data: the value is in a variable either way."""
    state, index = "plain", 0
    while index < end:
        char = text[index]
        if state == "single":
            state = "plain" if char == "'" else state
        elif char == "\\":
            index += 1
        elif char == '"':
            state = "plain" if state == "double" else "double"
        elif char == "'" and state == "plain":
            state = "single"
        index += 1
    return state


def step_prompt(step: StepDefinition, outputs: dict[str, str], *, goal: str, agent_prompt: str, instruction: str) -> str:
    """What an agent step's thread is told: the agent's instructions, the task, its inputs."""
    parts = [agent_prompt.strip()] if agent_prompt.strip() else []
    parts.append("Your task:\n" + expand(step.prompt, outputs, goal=goal).strip())
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
    return command_line(step.run, outputs, goal=goal)


def score_command(command: str, outputs: dict[str, str], output: str, goal: str) -> str:
    return command_line(command, outputs, goal=goal, output=output)


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
