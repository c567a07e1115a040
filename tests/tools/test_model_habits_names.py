"""Other agents' argument names, through the real loop: a name with one meaning for the tool is
read as the argument it means (Anthropic's ``old_str``/``new_str``, Codex's ``input`` for a patch,
``cwd`` for ``workdir`` and ``cmd`` for ``command``, OpenCode's ``include`` for ``glob``, Claude Code's ``-i``), so a command
meant for a folder runs there instead of in the workspace; a call refused for a missing argument
names the unknown ones it sent, with the names the tool takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import call, run_script

PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"


async def _one(workspace: Path, name: str, **arguments: Any) -> tuple[bool, str]:
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call(name, **arguments)]}, {"text": "ok"}])
    return result.is_error, result.text


@pytest.mark.parametrize(
    ("name", "arguments", "after"),
    [
        ("edit", {"path": "a.py", "old_str": "x = 1", "new_str": "x = 2"}, "x = 2\n"),
        ("apply_patch", {"input": PATCH}, "x = 2\n"),
        ("apply_patch", {"patchText": PATCH}, "x = 2\n"),
    ],
    ids=["old_str-new_str", "input", "patchText"],
)
async def test_edits_under_other_agents_names_apply(workspace: Path, name: str, arguments: dict[str, Any], after: str) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    _rt, [_read, result] = await run_script(
        workspace, [{"tool_calls": [call("read", path="a.py")]}, {"tool_calls": [call(name, **arguments)]}, {"text": "ok"}]
    )
    assert not result.is_error, result.text
    assert "ignored unknown" not in result.text
    assert (workspace / "a.py").read_text() == after


@pytest.mark.parametrize("key", ["cwd", "working_directory"])
async def test_bash_runs_cmd_in_the_folder_named_by_cwd(workspace: Path, key: str) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "only-here.txt").write_text("")
    error, text = await _one(workspace, "bash", cmd="ls", **{key: "sub"})
    assert not error, text
    assert text.startswith("only-here.txt\n"), text
    assert "ignored" not in text


async def test_a_name_sent_beside_the_argument_it_stands_for_is_named_and_ignored(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "only-here.txt").write_text("")
    error, text = await _one(workspace, "bash", command="ls", workdir="sub", cwd=".")
    assert not error
    assert text.startswith("only-here.txt\n"), text
    assert text.endswith("[ignored unknown argument 'cwd': bash takes command, timeout, workdir, run_in_background]")


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({"pattern": "needle", "include": "*.ts"}, "b.ts:1:needle"),
        ({"pattern": "NEEDLE", "-i": True, "include": "*.py"}, "a.py:1:needle"),
    ],
    ids=["include", "dash-i"],
)
async def test_grep_takes_include_and_dash_i(workspace: Path, arguments: dict[str, Any], found: str) -> None:
    (workspace / "a.py").write_text("needle\n")
    (workspace / "b.ts").write_text("needle\n")
    error, text = await _one(workspace, "grep", **arguments)
    assert (error, text) == (False, found)


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        (
            "edit",
            {"path": "a.py", "edits": [{"old_string": "x = 1", "new_string": "x = 2"}]},
            "invalid arguments for edit: missing required argument 'old_string'; missing required argument 'new_string'; "
            "unknown argument 'edits': edit takes path, old_string, new_string, replace_all",
        ),
        (
            "edit",
            {"path": "a.py", "search": "x = 1", "replace": "x = 2"},
            "invalid arguments for edit: missing required argument 'old_string'; missing required argument 'new_string'; "
            "unknown arguments 'search', 'replace': edit takes path, old_string, new_string, replace_all",
        ),
        ("bash", {"script": "ls"}, "invalid arguments for bash: missing required argument 'command'; unknown argument 'script'"),
    ],
    ids=["edits-list", "search-replace", "script"],
)
async def test_a_missing_argument_names_the_unknown_ones_sent(
    workspace: Path, name: str, arguments: dict[str, Any], error: str
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    failed, text = await _one(workspace, name, **arguments)
    assert failed
    assert text.startswith(error), text
    assert "\n" not in text
    assert (workspace / "a.py").read_text() == "x = 1\n"
