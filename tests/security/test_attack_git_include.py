"""A file a repository's git config includes is git config too, so as able to run programs.

``git config include.path ../tools/git.inc`` (or an ``includeIf``) makes git read that file of
the working tree as config. Writing ``core.fsmonitor`` into it runs a program at the user's next
``git status``, outside any sandbox. The sandbox already kept such files read-only; the file
tools wrote them, in bypass and auto-edit alike. Through the real loop (the loopback model
server, the default distribution), every file tool is refused on an included file, existing or
not yet made, and on a file that an included file includes; in the sandbox a command finds
them read-only (the nested ones too) and what it creates of them is moved out. The user's
``git status`` runs nothing afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.brokers.safe_git import git_env
from roder_core.ir import ToolResultItem
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**git_env(), "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True, text=True)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def _turn(ws: Path, home: Path, steps: list[dict[str, Any]], mode: str) -> list[ToolResultItem]:
    return (await turn_and_requests(ws, home, steps, mode))[0]


async def turn_and_requests(
    ws: Path, home: Path, steps: list[dict[str, Any]], mode: str
) -> tuple[list[ToolResultItem], list[bytes]]:
    """One turn through the real runtime against the loopback model server: the tool results
    and the bodies of the model requests it made."""
    async with FakeModelServer([*steps, {"text": "done"}]) as server:
        (home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
        )
        env = {**os.environ, "RODER_HOME": str(home), "LOCAL_API_KEY": "sk-local-1"}
        runtime = start_runtime(StartSettings(cwd=ws, provider="local", mode=mode, interactive=False, env=env)).runtime
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "go")
            results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
            return results, [r.body for r in server.calls]
        finally:
            await runtime.close()


@pytest.mark.parametrize("mode", ["bypass", "auto-edit"])
async def test_the_file_tools_never_write_a_file_git_config_includes(
    workspace: Path, roder_home: Path, tmp_path: Path, mode: str
) -> None:
    ran = tmp_path / "ran.txt"
    payload = f'[core]\n\tfsmonitor = "touch {ran}; false"\n'
    _git(workspace, "init", "-q")
    (workspace / "tools").mkdir()
    (workspace / "tools" / "git.inc").write_text("[user]\n\tname = t\n[include]\n\tpath = nested.inc\n")
    (workspace / "tools" / "nested.inc").write_text("[user]\n")
    _git(workspace, "config", "include.path", "../tools/git.inc")
    _git(workspace, "config", "includeIf.gitdir:/.path", "../local.gitconfig")  # not made yet
    steps = [
        _call("read", path="tools/git.inc"),
        _call("write", path="tools/git.inc", content=payload),
        _call("edit", path="tools/git.inc", old_string="[user]", new_string=payload),
        _call("read", path="tools/nested.inc"),
        _call("write", path="tools/nested.inc", content=payload),
        _call("write", path="local.gitconfig", content=payload),
        _call("write", path="tools/ordinary.txt", content="fine\n"),
    ]
    results = await _turn(workspace, roder_home, steps, mode)
    writes = [r for r in results if r.name in ("write", "edit")]
    assert [r.is_error for r in writes] == [True, True, True, True, False], [r.text for r in writes]
    for refused in writes[:4]:
        assert "includes" in refused.text, refused.text
    assert "fsmonitor" not in (workspace / "tools" / "git.inc").read_text()
    assert "fsmonitor" not in (workspace / "tools" / "nested.inc").read_text()
    assert not (workspace / "local.gitconfig").exists()
    _git(workspace, "status")  # the user's next git
    assert not ran.exists()


@needs_bwrap
async def test_a_command_never_changes_or_plants_a_file_git_config_includes(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    """In the sandbox the included files, and the files they include, are read-only; one not
    made yet that a command creates is moved to the quarantine."""
    ran = tmp_path / "ran.txt"
    _git(workspace, "init", "-q")
    (workspace / "tools").mkdir()
    (workspace / "tools" / "git.inc").write_text("[include]\n\tpath = nested.inc\n")
    (workspace / "tools" / "nested.inc").write_text("[user]\n")
    _git(workspace, "config", "include.path", "../tools/git.inc")
    _git(workspace, "config", "includeIf.gitdir:/.path", "../local.gitconfig")
    plant = workspace / "plant.py"
    plant.write_text(
        "import sys\n"
        f"payload = '[core]\\n\\tfsmonitor = \"touch {ran}; false\"\\n'\n"
        "for path in ('tools/nested.inc', 'tools/git.inc', 'local.gitconfig'):\n"
        "    try:\n"
        "        open(path, 'w').write(payload)\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.strerror)\n"
    )
    (result,) = await _turn(workspace, roder_home, [_call("bash", command=f"{sys.executable} plant.py")], "bypass")
    assert "refused tools/nested.inc" in result.text, result.text
    assert "refused tools/git.inc" in result.text, result.text
    assert not (workspace / "local.gitconfig").exists(), result.text
    _git(workspace, "status")
    assert not ran.exists()


@needs_bwrap
async def test_a_hooks_folder_the_users_global_config_names_cannot_be_planted(
    workspace: Path, roder_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``git config --global core.hooksPath .githooks`` names a folder of every repository: a
    command that makes ``.githooks/pre-commit`` has it moved out, so the next commit runs nothing."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    ran = tmp_path / "ran.txt"
    _git(workspace, "init", "-q")
    plant = workspace / "plant.py"
    plant.write_text(
        "import os\n"
        "os.makedirs('.githooks', exist_ok=True)\n"
        f"open('.githooks/pre-commit', 'w').write('#!/bin/sh\\ntouch {ran}\\n')\n"
        "os.chmod('.githooks/pre-commit', 0o755)\n"
    )
    (result,) = await _turn(workspace, roder_home, [_call("bash", command=f"{sys.executable} plant.py")], "bypass")
    assert not (workspace / ".githooks").exists(), result.text
    assert "protected-path guard" in result.text, result.text


@needs_bwrap
async def test_a_command_never_rewrites_a_script_the_repository_config_runs(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    """``diff.img.textconv = ./scripts/textconv.sh`` (or a filter, a merge driver, an fsmonitor)
    names a script of the working tree git runs: the file tools refused it, and now the sandbox
    keeps it read-only too (one reading of the config, ``git_dirs.config_references``)."""
    ran = tmp_path / "ran.txt"
    _git(workspace, "init", "-q")
    script = workspace / "scripts" / "textconv.sh"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\ncat "$1"\n')
    _git(workspace, "config", "diff.img.textconv", "./scripts/textconv.sh")
    _git(workspace, "config", "merge.ours.driver", "./scripts/merge.sh %O %A %B")  # not made yet
    plant = workspace / "plant.py"
    plant.write_text(
        "for path in ('scripts/textconv.sh', 'scripts/merge.sh'):\n"
        "    try:\n"
        f"        open(path, 'w').write('#!/bin/sh\\ntouch {ran}\\n')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.strerror)\n"
    )
    (result,) = await _turn(workspace, roder_home, [_call("bash", command=f"{sys.executable} plant.py")], "bypass")
    assert "refused scripts/textconv.sh" in result.text, result.text
    assert "touch" not in script.read_text()
    assert not (workspace / "scripts" / "merge.sh").exists(), result.text


async def test_a_fifo_where_git_config_points_never_hangs_roder(workspace: Path, roder_home: Path) -> None:
    """An include not made yet, made a FIFO (by a command in the background, or in a cloned
    tree): Roder reads git config before every command, every file write and every turn's
    environment block, and an open of a FIFO waits for a writer forever. It is read without
    blocking and taken for no config; the turn runs to its end."""
    _git(workspace, "init", "-q")
    _git(workspace, "config", "include.path", "../local.gitconfig")
    os.mkfifo(workspace / "local.gitconfig")
    steps = [_call("write", path="notes.txt", content="hi\n"), _call("bash", command="echo ran")]
    results = await _turn(workspace, roder_home, steps, "bypass")
    assert [r.is_error for r in results] == [False, False], [r.text for r in results]
    assert (workspace / "notes.txt").read_text() == "hi\n"


def test_roders_own_git_empties_the_filters_an_included_config_defines(workspace: Path) -> None:
    """A filter defined in a file the repository's config includes is a filter of the
    repository: Roder's own git runs it with empty commands, like one in ``.git/config``."""
    from roder_core.brokers.safe_git import git_argv

    _git(workspace, "init", "-q")
    (workspace / "shared.gitconfig").write_text('[include]\n\tpath = more.inc\n[filter "outer"]\n\tclean = ./x\n')
    (workspace / "more.inc").write_text('[filter "inner"]\n\tsmudge = ./y\n')
    _git(workspace, "config", "include.path", "../shared.gitconfig")
    argv = git_argv(["status"], cwd=workspace)
    assert "filter.outer.clean=" in argv and "filter.inner.smudge=" in argv, argv
