"""Roder's own git on a hostile repository runs none of the repository's programs.

A repository unpacked from an archive (or handed over as a folder) brings its own ``.git``:
config the model never wrote and the sandbox never saw. Roder runs ``git status`` on the host,
unconfined, for every turn's environment block, in trusted and untrusted folders alike, and
``git status``/``git diff`` for the changes view. ``safe_git`` empties the clean/smudge filters
the repository defines; these are the places a filter hid from a reading of ``.git/config``:
``config.worktree`` (``extensions.worktreeConfig``), the old ``[filter.name]`` spelling, an
included file starting with a byte-order mark, a filter past the first 256 KiB of the config,
and a submodule (git runs ``status`` inside it, under the submodule's own config). Through the
real loop (the loopback model server, the default distribution, an untrusted folder in ask
mode): the turn's environment block shows the repository's state and the filter never runs;
the control runs the user's plain ``git status`` afterwards and the filter does run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from roder_core.brokers.safe_git import git_env
from roder_core.server.dispatcher import Dispatcher
from roder_core.server.methods.changes import git_changes_list
from roder_core.server.protocol_changes import GitChangesListParams
from tests.security.test_attack_git_include import turn_and_requests
from tests.tools.harness import start

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(ws: Path, *args: str) -> None:
    env = {**git_env(), "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=ws, env=env, check=True, capture_output=True)


def _repository(ws: Path) -> None:
    """A repository with one committed file that every file's ``filter=evil`` covers, the file
    then changed and stat-dirty, so ``git status`` must read it (through the filter)."""
    _git(ws, "init", "-q")
    (ws / ".gitattributes").write_text("* filter=evil\n")
    (ws / "a.txt").write_text("one\n")
    _git(ws, "add", ".")
    _git(ws, "commit", "-q", "-m", "init")
    (ws / "a.txt").write_text("two\n")
    os.utime(ws / "a.txt", (1, 1))


def _filter(program: Path, header: str = '[filter "evil"]') -> str:
    return f"{header}\n\tclean = {program}\n\tsmudge = {program}\n"


def _worktree_config(ws: Path, program: Path) -> Path:
    _repository(ws)
    _git(ws, "config", "extensions.worktreeConfig", "true")
    (ws / ".git" / "config.worktree").write_text(_filter(program))
    return ws


def _dotted_section(ws: Path, program: Path) -> Path:
    _repository(ws)
    with open(ws / ".git" / "config", "a") as config:
        config.write(_filter(program, "[filter.evil]"))
    return ws


def _byte_order_mark(ws: Path, program: Path) -> Path:
    _repository(ws)
    (ws / ".git" / "team.inc").write_bytes(b"\xef\xbb\xbf" + _filter(program).encode())
    _git(ws, "config", "include.path", "team.inc")
    return ws


def _far_down(ws: Path, program: Path) -> Path:
    _repository(ws)
    with open(ws / ".git" / "config", "a") as config:
        config.write("# padding\n" * 40_000 + _filter(program))
    return ws


def _submodule(ws: Path, program: Path) -> Path:
    _git(ws, "init", "-q")
    sub = ws / "vendor"
    sub.mkdir()
    _repository(sub)
    _git(ws, "add", "vendor")
    _git(ws, "commit", "-q", "-m", "vendor")
    with open(sub / ".git" / "config", "a") as config:
        config.write(_filter(program))
    return sub


ATTACKS: dict[str, Callable[[Path, Path], Path]] = {
    "config.worktree": _worktree_config,
    "[filter.evil]": _dotted_section,
    "byte-order mark": _byte_order_mark,
    "past 256 KiB": _far_down,
    "submodule": _submodule,
}


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_roders_own_git_runs_no_filter_of_a_hostile_repository(
    workspace: Path, roder_home: Path, tmp_path: Path, attack: str
) -> None:
    marker = tmp_path / "ran.txt"
    program = tmp_path / "evil.sh"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    program.chmod(0o755)
    where = ATTACKS[attack](workspace, program)

    _results, requests = await turn_and_requests(workspace, roder_home, [], "ask")
    shown = (b"uncommitted change(s)", b"; clean working tree")  # a dirty submodule's tree is not looked into
    assert any(state in body for body in requests for state in shown), "the environment block ran no git status"
    assert not marker.exists(), f"{attack}: the environment block's git ran the repository's filter"

    started = start(workspace, [{"text": "hi"}], sandbox="off")
    app = Dispatcher(started.runtime, started=started)
    listed = await git_changes_list(app, GitChangesListParams(workspace=str(workspace)), None)  # type: ignore[arg-type]
    assert listed.files or where != workspace, "the changes view saw no change"
    assert not marker.exists(), f"{attack}: the changes view's git ran the repository's filter"

    subprocess.run(["git", "status"], cwd=where, env=git_env(), capture_output=True, check=False)
    assert marker.exists(), f"{attack}: the control did not run the filter, so the attack proves nothing"
