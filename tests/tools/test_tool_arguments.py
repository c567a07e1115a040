"""Tool arguments as pydantic models: the schemas providers see, and clear errors for bad calls.

``tool_schemas.json`` is the snapshot of every first-party tool's schema. When a tool's
arguments change on purpose, regenerate it with
``python -m tests.tools.test_tool_arguments > tests/tools/tool_schemas.json`` and review the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import pytest
import roder_ext_builtin_coding_tools as coding_tools
from pydantic import Field
from roder_ext_ask_user import AskUserTool
from roder_ext_ask_user.arguments import AskUserArguments
from roder_ext_background_tasks.tools import TaskKillTool, TaskOutputTool
from roder_ext_memory.tools import MemorySave, MemorySearch
from roder_ext_plan_mode import ExitPlanTool
from roder_ext_skills import SkillTool
from roder_ext_subagents import TaskTool
from roder_ext_task_ledger import TodoTool

from roder_core.ir import ToolResultItem
from roder_core.kernel.tool_args import NonBlank, ToolArgumentError, ToolArguments, arguments_schema, parse_arguments
from roder_core.kernel.tools import Tool, ToolCall, ToolExecutionContext, ToolResult, argument_problem, validate_spec
from roder_core.threads.events import ApprovalRequested
from tests.tools.harness import call, start

SNAPSHOT = Path(__file__).with_name("tool_schemas.json")


def first_party_tools() -> list[Any]:
    skills = SimpleNamespace(skills={"alpha": None, "beta": None})
    general = SimpleNamespace(name="general", description="g")
    explore = SimpleNamespace(name="explore", description="e")
    agents = SimpleNamespace(agents={"general": general, "explore": explore})
    return [
        coding_tools.ReadTool(),
        coding_tools.WriteTool(),
        coding_tools.EditTool(),
        coding_tools.ApplyPatchTool(),
        coding_tools.BashTool(),
        coding_tools.GrepTool(),
        coding_tools.GlobTool(),
        coding_tools.LsTool(),
        coding_tools.WebFetchTool(),
        MemorySave(None),  # type: ignore[arg-type]
        MemorySearch(None),  # type: ignore[arg-type]
        ExitPlanTool(),
        TodoTool(None),  # type: ignore[arg-type]
        SkillTool(skills),  # type: ignore[arg-type]
        TaskTool(agents),  # type: ignore[arg-type]
        TaskOutputTool(),
        TaskKillTool(),
        AskUserTool(),
    ]


def current_schemas() -> dict[str, Any]:
    return {tool.name: tool.spec().parameters for tool in sorted(first_party_tools(), key=lambda t: t.name)}


def test_schemas_match_the_snapshot() -> None:
    assert current_schemas() == json.loads(SNAPSHOT.read_text())


def test_every_first_party_tool_declares_an_argument_model() -> None:
    assert [t.name for t in first_party_tools() if t.arguments_model is None] == []


def test_schemas_use_only_keywords_every_provider_accepts() -> None:
    allowed = {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "description",
        "items",
        "enum",
        "minimum",
        "maximum",
        # ask_user bounds its questions and options (every provider Roder speaks to accepts these)
        "minItems",
        "maxItems",
    }

    def keywords(node: Any) -> set[str]:
        if isinstance(node, list):
            return set().union(*(keywords(n) for n in node)) if node else set()
        if not isinstance(node, dict):
            return set()
        found = set(node) - {"properties"}
        for value in node.get("properties", {}).values():
            found |= keywords(value)
        for key, value in node.items():
            if key != "properties":
                found |= keywords(value)
        return found

    for tool in first_party_tools():
        spec = tool.spec()
        validate_spec(spec)
        assert keywords(spec.parameters) <= allowed, tool.name


class Nested(ToolArguments):
    title: str = Field(description="a field named like a schema keyword")


class Sample(ToolArguments):
    path: NonBlank = Field(description="where")
    count: int = Field(3, ge=1, le=9, description="how many")
    mode: Literal["a", "b"] = "a"
    label: str | None = None
    items: list[Nested] = Field(default_factory=list)


def test_the_schema_is_plain_json_schema() -> None:
    assert arguments_schema(Sample) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "where"},
            "count": {"type": "integer", "minimum": 1, "maximum": 9, "description": "how many"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "label": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"title": {"type": "string", "description": "a field named like a schema keyword"}},
                    "required": ["title"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_choices_add_an_enum_without_touching_the_cached_schema() -> None:
    with_choices = arguments_schema(Sample, choices={"path": ["x", "y"]})
    assert with_choices["properties"]["path"]["enum"] == ["x", "y"]
    assert "enum" not in arguments_schema(Sample)["properties"]["path"]


def test_a_caller_changing_its_schema_deep_inside_leaves_the_next_one_intact() -> None:
    first = arguments_schema(Sample)
    first["properties"]["items"]["items"]["properties"]["title"]["type"] = "number"
    first["properties"]["items"]["items"]["required"].append("extra")
    first["required"].clear()
    assert arguments_schema(Sample)["properties"]["items"]["items"] == {
        "type": "object",
        "properties": {"title": {"type": "string", "description": "a field named like a schema keyword"}},
        "required": ["title"],
        "additionalProperties": False,
    }
    assert arguments_schema(Sample)["required"] == ["path"]


def test_errors_name_every_wrong_field() -> None:
    bad = ToolCall(id="c1", name="sample", arguments={"path": "  ", "count": 0, "mode": "c"})
    with pytest.raises(ToolArgumentError) as caught:
        parse_arguments(Sample, bad)
    message = str(caught.value)
    assert message.startswith("invalid arguments for sample: ")
    assert "path: must not be empty (got '  ')" in message
    assert "count: input should be greater than or equal to 1 (got 0)" in message
    assert "mode: input should be 'a' or 'b' (got 'c')" in message
    with pytest.raises(ToolArgumentError, match="missing required argument 'path'"):
        parse_arguments(Sample, ToolCall(id="c2", name="sample", arguments={}))
    nested = ToolCall(id="c3", name="sample", arguments={"path": "p", "items": [{"title": 5}]})
    with pytest.raises(ToolArgumentError, match=r"items\.0\.title: input should be a valid string \(got 5\)"):
        parse_arguments(Sample, nested)


def test_unknown_arguments_are_ignored() -> None:
    args = parse_arguments(Sample, ToolCall(id="c1", name="sample", arguments={"path": "p", "colour": "red"}))
    assert args.path == "p"
    assert args.count == 3


class Greet(Tool):
    """A third-party style tool: the argument model is the whole declaration."""

    name = "greet"
    description = "Greet someone."

    class Arguments(ToolArguments):
        who: NonBlank = Field(description="whom to greet")
        times: int = Field(1, ge=1, le=3)

    arguments_model = Arguments

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(self.Arguments, call)
        return ToolResult(id=call.id, name=call.name, text=" ".join([f"hello {args.who}"] * args.times))


def test_a_tool_spec_comes_from_its_model() -> None:
    spec = Greet().spec()
    assert spec.parameters["required"] == ["who"]
    assert spec.parameters["properties"]["times"] == {"type": "integer", "minimum": 1, "maximum": 3}


async def test_a_bad_call_in_the_loop_is_an_error_result_and_asks_nobody(workspace: Path) -> None:
    """Wrong arguments never reach policy (no approval prompt) nor the tool; the model gets an
    error naming each wrong field, and its corrected call runs."""
    (workspace / "a.txt").write_text("one\n")
    steps = [
        {"tool_calls": [call("read", path="a.txt", offset=0), call("bash", command="")]},
        {"tool_calls": [call("read", path="a.txt", offset=1)]},
        {"text": "done"},
    ]
    started = start(workspace, steps, mode="ask", interactive=True)
    runtime = started.runtime
    asked: list[ApprovalRequested] = []
    runtime.bus.add_listener(lambda event: asked.append(event) if isinstance(event, ApprovalRequested) else None)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "completed"
    results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    bad_read, bad_bash, good_read = results
    assert bad_read.is_error
    assert bad_read.text == "invalid arguments for read: offset: input should be greater than or equal to 1 (got 0)"
    assert bad_bash.is_error
    assert bad_bash.text == "invalid arguments for bash: command: must not be empty (got '')"
    assert not good_read.is_error
    assert good_read.text == "     1\tone"
    assert asked == []  # the empty bash command would have asked in ask mode
    await runtime.close()


def test_nested_arguments_are_checked_before_the_tool_runs() -> None:
    todo = TodoTool(None)  # type: ignore[arg-type]  # never reached: the check fails first
    bad = ToolCall(id="c1", name="todo", arguments={"todos": [{"content": "write it", "status": "doing"}]})
    problem = argument_problem(todo, bad)
    assert problem is not None
    assert problem.is_error
    assert problem.text == (
        "invalid arguments for todo: todos.0.status: input should be 'pending', 'in_progress' or 'completed' (got 'doing')"
    )
    good = ToolCall(id="c2", name="todo", arguments={"todos": [{"content": "write it", "status": "pending"}]})
    assert argument_problem(todo, good) is None


def test_background_task_tools_check_their_arguments_before_running() -> None:
    output, kill = TaskOutputTool(), TaskKillTool()
    negative = argument_problem(output, ToolCall(id="c1", name="task_output", arguments={"task_id": "task_1", "since": -1}))
    assert negative is not None
    assert negative.text == "invalid arguments for task_output: since: input should be greater than or equal to 0 (got -1)"
    assert argument_problem(output, ToolCall(id="c2", name="task_output", arguments={})) is None  # lists the tasks
    blank = argument_problem(kill, ToolCall(id="c3", name="task_kill", arguments={"task_id": " "}))
    assert blank is not None
    assert blank.text == "invalid arguments for task_kill: task_id: must not be empty (got ' ')"
    missing = argument_problem(kill, ToolCall(id="c4", name="task_kill", arguments={}))
    assert missing is not None
    assert missing.text == "invalid arguments for task_kill: missing required argument 'task_id'"


def test_ask_user_arguments_become_questions() -> None:
    questions = {
        "questions": [
            {
                "question": "Which database? ",
                "header": "A header longer than twenty characters",
                "options": ["Postgres", {"label": "SQLite", "description": "a file"}],
                "multiSelect": True,
            }
        ]
    }
    parsed = parse_arguments(AskUserArguments, ToolCall(id="c1", name="ask_user", arguments=questions))
    (question,) = parsed.to_questions()
    assert question.id == "q1"
    assert question.question == "Which database?"
    assert question.header == "A header longer than"
    assert [(o.label, o.description) for o in question.options] == [("Postgres", ""), ("SQLite", "a file")]
    assert question.multi_select is True
    assert question.allow_free_text is True


@pytest.mark.parametrize(
    ("questions", "expected"),
    [
        ([], "questions: list should have at least 1 item after validation, not 0"),
        ([{"question": "Q?", "options": ["only one"]}], "questions.0.options: list should have at least 2 items"),
        ([{"question": "Q?", "options": ["same", "same"]}], "questions.0: options must have different labels"),
        ([{"question": " ", "options": ["a", "b"]}], "questions.0.question: must not be empty"),
    ],
)
def test_ask_user_refuses_questions_a_dialog_cannot_show(questions: list[Any], expected: str) -> None:
    problem = argument_problem(AskUserTool(), ToolCall(id="c1", name="ask_user", arguments={"questions": questions}))
    assert problem is not None
    assert problem.is_error
    assert problem.text.startswith("invalid arguments for ask_user: ")
    assert expected in problem.text


if __name__ == "__main__":
    json.dump(current_schemas(), sys.stdout, indent=2, sort_keys=True)
    print()
