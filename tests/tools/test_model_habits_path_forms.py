"""Paths in the forms models copy from elsewhere, through the real loop: Windows separators,
a shell's escaped space, ``file://`` URLs, ``$HOME``, a trailing line break, and paths inside a
patch. Each names the file meant (``write`` never creates an odd name such as ``sub\\new.py``
or a ``file:`` folder); a Windows drive, which has no reading here, is refused in one line and
creates nothing. Policy judges the same path the tool writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import call, run_script

BODY = "x = 1\n"


def _files(workspace: Path) -> set[str]:
    return {str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "path",
    [
        "sub\\a.py",
        ".\\sub\\a.py",
        "file://{ws}/sub/a.py",
        "file://localhost{ws}/sub/a.py",
        "file:sub/a.py",
        "$HOME/ws/sub/a.py",
        "${{HOME}}/ws/sub/a.py",
        "sub/a.py\n",
        "'sub\\a.py'",
    ],
    ids=[
        "backslashes",
        "dot-backslash",
        "file-url",
        "file-url-localhost",
        "file-relative",
        "home",
        "home-braces",
        "newline",
        "quoted",
    ],
)
async def test_read_and_write_take_the_path_as_meant(workspace: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("HOME", str(workspace.parent))
    path = path.format(ws=workspace)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("write", path=path, content=BODY)]},
        {"tool_calls": [call("read", path=path)]},
        {"tool_calls": [call("edit", path=path, old_string="x = 1", new_string="x = 2")]},
        {"text": "ok"},
    ]
    _rt, [write, read, edit] = await run_script(workspace, steps)
    assert write.text == "created sub/a.py (1 lines, 6 bytes)", write.text
    assert read.text == "     1\tx = 1"
    assert edit.text.startswith("edited sub/a.py: 1 replacement"), edit.text
    assert _files(workspace) == {"sub/a.py"}
    assert (workspace / "sub" / "a.py").read_text() == "x = 2\n"


async def test_a_shell_escaped_space_names_the_file_with_the_space(workspace: Path) -> None:
    (workspace / "my file.py").write_text(BODY)
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("read", path="my\\ file.py")]}, {"text": "ok"}])
    assert result.text == "     1\tx = 1"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("C:\\ws\\a.py", "is a Windows drive path"),
        ("d:/ws/a.py", "is a Windows drive path"),
        ("file://server/share/a.py", "is a file URL on another host (server)"),
    ],
    ids=["backslashes", "slashes", "file-url-of-another-host"],
)
async def test_a_path_with_no_reading_here_is_refused_in_one_line_and_creates_nothing(
    workspace: Path, path: str, why: str
) -> None:
    """A Windows drive, or a ``file://`` URL naming another machine (as written it would create
    a ``file:`` folder)."""
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("write", path=path, content=BODY)]}, {"text": "ok"}])
    assert result.is_error
    assert result.text.startswith(
        f"invalid arguments for write: path: {why}, which no file here has; "
        "send the path relative to the workspace (or absolute, with /)"
    ), result.text
    assert "\n" not in result.text
    assert _files(workspace) == set()


async def test_grep_ls_and_bash_take_windows_folders(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.py").write_text(BODY)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("grep", pattern="x", path="sub\\")]},
        {"tool_calls": [call("ls", path=".\\sub")]},
        {"tool_calls": [call("bash", command="ls", workdir="sub\\")]},
        {"text": "ok"},
    ]
    _rt, [grep, ls, bash] = await run_script(workspace, steps)
    assert grep.text == "sub/a.py:1:x = 1"
    assert ls.text.startswith("sub:\na.py"), ls.text
    assert bash.text.startswith("a.py\n"), bash.text


async def test_a_patch_names_files_the_same_way(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.py").write_text(BODY)
    patch = "*** Begin Patch\n*** Update File: sub\\a.py\n@@\n-x = 1\n+x = 2\n*** Add File: file:sub/b.py\n+b = 1\n*** End Patch"
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=patch)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert _files(workspace) == {"sub/a.py", "sub/b.py"}
    assert (workspace / "sub" / "a.py").read_text() == "x = 2\n"
    drive = "*** Begin Patch\n*** Add File: C:\\b.py\n+b = 1\n*** End Patch"
    _rt, [refused] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=drive)]}, {"text": "ok"}])
    assert refused.is_error
    assert refused.text.startswith("line 2: 'C:\\\\b.py' is a Windows drive path"), refused.text


async def test_policy_judges_the_path_as_meant(workspace: Path, roder_home: Path) -> None:
    """A deny rule on ``conf/secret.txt`` holds for ``conf\\secret.txt``, its ``file://`` URL
    and a patch naming it either way."""
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["write(conf/secret.txt)", "edit(conf/secret.txt)"]\n')
    (workspace / "conf").mkdir()
    (workspace / "conf" / "secret.txt").write_text("keep\n")
    patch = "*** Begin Patch\n*** Update File: conf\\secret.txt\n@@\n-keep\n+gone\n*** End Patch"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("read", path="conf/secret.txt")]},
        {"tool_calls": [call("write", path="conf\\secret.txt", content="gone\n")]},
        {"tool_calls": [call("edit", path=f"file://{workspace}/conf/secret.txt", old_string="keep", new_string="gone")]},
        {"tool_calls": [call("apply_patch", patch=patch)]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False, True, True, True], [r.text for r in results]
    assert all(r.text.startswith("denied by policy") for r in results[1:]), [r.text for r in results]
    assert (workspace / "conf" / "secret.txt").read_text() == "keep\n"
