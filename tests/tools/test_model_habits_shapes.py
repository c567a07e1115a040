"""Argument shapes real models send, through the real loop: what has one reading is taken as
meant (numbers and booleans as strings, ``null`` for an optional argument, a list sent as a JSON
string, camelCase or ``file_path`` names, a quoted path, ``"30s"`` for a timeout), and the rest is
refused in one line that names the argument. Policy judges the same path the tool uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ToolCallItem, ToolResultItem
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import DIALECTS, calls_of, collect, make_engine, make_request
from tests.tools.harness import call, run_script, start

LINES = "".join(f"line {n}\n" for n in range(1, 11))


def _one(workspace: Path, name: str, **arguments: Any) -> Any:
    return run_script(workspace, [{"tool_calls": [call(name, **arguments)]}, {"text": "ok"}])


@pytest.mark.parametrize(
    ("arguments", "first_line"),
    [
        ({"offset": "3", "limit": "2"}, "     3\tline 3"),
        ({"offset": None, "limit": None}, "     1\tline 1"),
        ({"offset": 3.0}, "     3\tline 3"),
        ({"offset": "3", "limit": 2, "bogus": True}, "     3\tline 3"),
    ],
    ids=["numbers-as-strings", "null-for-optional", "whole-float", "unknown-extra"],
)
async def test_read_takes_unambiguous_argument_shapes(workspace: Path, arguments: dict[str, Any], first_line: str) -> None:
    (workspace / "a.txt").write_text(LINES)
    _rt, [result] = await _one(workspace, "read", path="a.txt", **arguments)
    assert not result.is_error, result.text
    assert result.text.splitlines()[0] == first_line


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"path": "a.txt", "offset": "two"}, "invalid arguments for read: offset: input should be a valid integer"),
        ({"path": "a.txt", "offset": 2.5}, "invalid arguments for read: offset: input should be a valid integer"),
        ({"path": "a.txt", "offset": -1}, "invalid arguments for read: offset: input should be greater than or equal to 1"),
        ({}, "invalid arguments for read: missing required argument 'path'"),
        ({"path": None}, "invalid arguments for read: path: input should be a valid string (got None)"),
        ({"path": "  "}, "invalid arguments for read: path: must not be empty"),
        ({"path": "a.txt", "offset": [1]}, "invalid arguments for read: offset: input should be a valid integer"),
    ],
    ids=["word", "fraction", "negative", "missing", "null-required", "blank", "list"],
)
async def test_read_refuses_the_rest_naming_the_argument(workspace: Path, arguments: dict[str, Any], error: str) -> None:
    (workspace / "a.txt").write_text(LINES)
    _rt, [result] = await _one(workspace, "read", **arguments)
    assert result.is_error
    assert result.text.startswith(error), result.text
    assert "\n" not in result.text


@pytest.mark.parametrize(
    "path",
    ["a.txt ", " a.txt", '"a.txt"', "'a.txt'", "`a.txt`", "' a.txt '", "\ta.txt\n"],
    ids=["trailing-space", "leading-space", "double-quotes", "single-quotes", "backticks", "quotes-and-spaces", "tab-newline"],
)
async def test_a_path_with_spaces_or_quotes_around_it_is_the_file_meant(workspace: Path, path: str) -> None:
    (workspace / "a.txt").write_text(LINES)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("read", path=path, limit=1)]},
        {"tool_calls": [call("edit", path=path, old_string="line 2\n", new_string="line two\n")]},
        {"tool_calls": [call("write", path=path.replace("a.txt", "b.txt"), content="new\n")]},
        {"tool_calls": [call("ls", path=path.replace("a.txt", "."))]},
        {"tool_calls": [call("grep", pattern="two", path=path)]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False] * 5, [r.text for r in results]
    assert (workspace / "a.txt").read_text().splitlines()[1] == "line two"
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "b.txt"]  # no "b.txt " or "'b.txt'"
    assert results[4].text.startswith("a.txt:2:line two")


async def test_policy_judges_the_unquoted_path(workspace: Path, roder_home: Path) -> None:
    """A deny rule on a file holds when the model quotes the path or pads it with spaces."""
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["write(secret.txt)", "edit(secret.txt)"]\n')
    (workspace / "secret.txt").write_text("keep\n")
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("read", path="secret.txt")]},
        {"tool_calls": [call("write", path="'secret.txt' ", content="gone\n")]},
        {"tool_calls": [call("edit", path=' "secret.txt"', old_string="keep", new_string="gone")]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False, True, True], [r.text for r in results]
    assert all(r.text.startswith("denied by policy") for r in results[1:]), [r.text for r in results]
    assert (workspace / "secret.txt").read_text() == "keep\n"


async def test_policy_judges_a_path_quoted_twice_as_the_tool_writes_it(workspace: Path, roder_home: Path) -> None:
    """The tool reads the checked arguments again: a path quoted twice (``"'secret.txt'"``) must
    be the file the deny rule names at the policy check too, not ``'secret.txt'`` there and
    ``secret.txt`` when the tool writes."""
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["write(secret.txt)"]\n')
    (workspace / "secret.txt").write_text("keep\n")
    _rt, [result] = await _one(workspace, "write", path="\"'secret.txt'\"", content="gone\n")
    assert result.is_error and result.text.startswith("denied by policy"), result.text
    assert (workspace / "secret.txt").read_text() == "keep\n"


@pytest.mark.parametrize(
    "arguments",
    [
        {"filePath": "a.txt", "oldString": "line 2", "newString": "line two"},
        {"file_path": "a.txt", "old_string": "line 2", "new_string": "line two"},
        {"path": "a.txt", "old_string": "line 2", "new_string": "line two", "replace_all": "false"},
        {"path": "a.txt", "old_string": "line 2", "new_string": "line two", "replace_all": None},
    ],
    ids=["camel-case", "file_path", "bool-as-string", "null-bool"],
)
async def test_edit_takes_other_agents_argument_names_and_shapes(workspace: Path, arguments: Any) -> None:
    (workspace / "a.txt").write_text(LINES)
    step = {"tool_calls": [{"name": "edit", "arguments": arguments}]}
    _rt, [result] = await run_script(workspace, [step, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "a.txt").read_text() == LINES.replace("line 2\n", "line two\n")


async def test_a_name_sent_in_both_spellings_keeps_the_schemas(workspace: Path) -> None:
    (workspace / "a.txt").write_text(LINES)
    arguments = {"path": "a.txt", "filePath": "other.txt", "old_string": "line 3", "oldString": "line 4", "new_string": "x"}
    _rt, [result] = await _one(workspace, "edit", **arguments)
    assert not result.is_error, result.text
    assert (workspace / "a.txt").read_text() == LINES.replace("line 3\n", "x\n")


@pytest.mark.parametrize(
    "todos",
    [
        '[{"content": "write the test", "status": "in_progress"}]',
        [{"content": "write the test", "status": "in_progress"}],
    ],
    ids=["list-as-json-string", "list"],
)
async def test_a_list_argument_sent_as_a_json_string_is_read_as_the_list(workspace: Path, todos: Any) -> None:
    from roder_ext_task_ledger import TodoTool

    from roder_core.kernel.tool_args import parse_arguments
    from roder_core.kernel.tools import ToolCall, argument_problem

    tool = TodoTool(None)  # type: ignore[arg-type]
    todo_call = ToolCall(id="c", name="todo", arguments={"todos": todos})
    assert argument_problem(tool, todo_call) is None
    assert todo_call.arguments["todos"][0]["content"] == "write the test"
    assert parse_arguments(tool.arguments_model, todo_call).todos[0].content == "write the test"
    bad = ToolCall(id="c", name="todo", arguments={"todos": "[not json"})
    problem = argument_problem(tool, bad)
    assert problem is not None and problem.text.startswith("invalid arguments for todo: todos: input should be a valid list")


@pytest.mark.parametrize(
    ("timeout", "ran"),
    [("30s", True), ("2m", True), ("1.5 min", True), ("10", True), (" 45 sec ", True), (None, True), ("2h", False)],
    ids=["30s", "2m", "1.5min", "digits", "spaced-sec", "null", "2h-over-the-maximum"],
)
async def test_bash_timeouts_with_units(workspace: Path, timeout: Any, ran: bool) -> None:
    _rt, [result] = await _one(workspace, "bash", command="echo hi", timeout=timeout)
    if ran:
        assert not result.is_error, result.text
        assert result.text.startswith("hi\n")
    else:
        assert result.is_error
        assert result.text == (
            "not run: timeout is in seconds, at most 3600; if 7200 was meant as milliseconds, send timeout=7.2; "
            "use run_in_background for commands that run longer than 3600 seconds"
        )


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        ("soon", "invalid arguments for bash: timeout: input should be a valid number"),
        (0, "invalid arguments for bash: timeout: timeout must be a positive number of seconds (got 0)"),
        (-5, "invalid arguments for bash: timeout: timeout must be a positive number of seconds (got -5)"),
        ("0s", "invalid arguments for bash: timeout: timeout must be a positive number of seconds"),
        (30000, "not run: timeout is in seconds, at most 3600; 30000 looks like milliseconds; for 30 seconds send timeout=30"),
    ],
    ids=["word", "zero", "negative", "zero-with-unit", "milliseconds"],
)
async def test_bash_timeouts_that_have_no_reading_are_refused_in_one_line(workspace: Path, timeout: Any, error: str) -> None:
    _rt, [result] = await _one(workspace, "bash", command="echo ran > ran.txt", timeout=timeout)
    assert result.is_error
    assert result.text.startswith(error), result.text
    assert "\n" not in result.text
    assert not (workspace / "ran.txt").exists()


async def test_the_recorded_call_keeps_what_the_model_sent(workspace: Path) -> None:
    """The transcript replays the model's own arguments (the prompt cache needs the exact
    history); only the call the tool runs is read as meant."""
    (workspace / "a.txt").write_text(LINES)
    sent = {"path": "'a.txt' ", "limit": "1"}
    runtime = start(workspace, [{"tool_calls": [call("read", **sent)]}, {"text": "ok"}]).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    items = runtime.thread(thread.id).items()
    [recorded] = [i for i in items if isinstance(i, ToolCallItem)]
    [result] = [i for i in items if isinstance(i, ToolResultItem)]
    assert not result.is_error, result.text
    assert recorded.arguments == sent


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_arguments_encoded_twice_are_the_object_in_every_dialect(dialect: str) -> None:
    """Some models send the arguments object as a JSON string holding it; it has one reading.
    Any other JSON that is no object stays an error naming what came."""
    twice = json.dumps(json.dumps({"command": "ls"}))
    step = {"tool_calls": [{"name": "bash", "arguments": twice}, {"name": "bash", "arguments": '"ls -la"'}]}
    async with FakeModelServer([step]) as server:
        engine = make_engine(dialect, server.base_url)
        events = await collect(engine, make_request())
        await engine.aclose()
    first, second = calls_of(events)
    assert (first.arguments, first.arguments_error) == ({"command": "ls"}, None)
    assert (second.arguments, second.arguments_error) == ({}, "expected a JSON object, got str")


@pytest.mark.parametrize(
    ("arguments", "note"),
    [
        (
            {"command": "pwd", "folder": "sub"},
            "[ignored unknown argument 'folder': bash takes command, timeout, workdir, run_in_background]",
        ),
        (
            {"command": "pwd", "timeout_ms": 5000, "shell": "zsh"},
            "[ignored unknown arguments 'timeout_ms', 'shell': bash takes command, timeout, workdir, run_in_background]",
        ),
        ({"command": "pwd", "description": "Print the folder"}, None),
        ({"command": "pwd", "explanation": "to see where we are"}, None),
    ],
    ids=["folder", "two-unknown", "claude-description", "cursor-explanation"],
)
async def test_unknown_arguments_are_named_in_the_result_not_dropped_silently(
    workspace: Path, arguments: dict[str, Any], note: str | None
) -> None:
    (workspace / "sub").mkdir()
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("bash", **arguments)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert result.text.startswith(f"{workspace.resolve()}\n")  # run where the schema says: the workspace
    last = result.text.splitlines()[-1]
    if note is None:
        assert "ignored unknown argument" not in result.text
    else:
        assert last == note


@pytest.mark.parametrize(
    ("command", "output"),
    [
        (["bash", "-lc", "echo hi; echo there"], "hi\nthere\n"),
        (["/bin/sh", "-c", "echo $((1 + 2))"], "3\n"),
        (["echo", "two words", "$HOME"], "two words $HOME\n"),
        ('["bash", "-lc", "echo from json"]', "from json\n"),
        ('["printf", "%s-", "a", "b"]', "a-b-"),
    ],
    ids=["bash-lc", "sh-c", "argv-quoted", "json-string-shell", "json-string-argv"],
)
async def test_a_command_sent_as_an_argument_vector_runs_as_that_command(workspace: Path, command: Any, output: str) -> None:
    """Codex's shell tool takes ``["bash", "-lc", "..."]``; models trained on it send that list
    (or the list as a JSON string), which ran as ``[bash,: command not found``."""
    _rt, [result] = await _one(workspace, "bash", command=command)
    assert not result.is_error, result.text
    assert result.text.split("\n[exit code")[0].rstrip("\n") == output.rstrip("\n")


@pytest.mark.parametrize(
    ("command", "output", "code"),
    [
        ('[ "$HOME" ]', "(no output)", 0),
        ('[ "" ]', "(no output)", 1),
        ("[ 1 ]", "(no output)", 0),
    ],
    ids=["test-of-a-variable", "test-of-an-empty-word", "test-of-a-number"],
)
async def test_a_shell_test_command_that_reads_as_json_runs_as_written(
    workspace: Path, command: str, output: str, code: int
) -> None:
    """``[ "$HOME" ]`` is the shell's test command, which happens to be a JSON list too: it runs
    as written, not as a program named ``$HOME`` (nor refused as a list that is no command)."""
    _rt, [result] = await _one(workspace, "bash", command=command)
    assert result.text.split("\n[exit code")[0].rstrip("\n") == output, result.text
    assert result.is_error == (code != 0), result.text


async def test_policy_judges_the_command_an_argument_vector_stands_for(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["bash(rm *)"]\n')
    (workspace / "keep.txt").write_text("keep\n")
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=["bash", "-lc", "rm keep.txt"])]},
        {"tool_calls": [call("bash", command='["rm", "keep.txt"]')]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [True, True], [r.text for r in results]
    assert all(r.text.startswith("denied by policy") for r in results), [r.text for r in results]
    assert (workspace / "keep.txt").read_text() == "keep\n"
