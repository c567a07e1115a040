"""Class 2, Roder's own git: every git command Roder runs (the environment block, the
git/changes methods, batch workspaces) ignores config-driven programs a planted config names:
fsmonitor, hooks, pager, external diff, textconv and clean/smudge filters. The control run
shows the planted config does run code under a plain ``git``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from roder_ext_context.environment import git_state

from roder_core.batch.workspace import git as batch_git
from roder_core.brokers.safe_git import git_argv, git_env
from roder_core.server.dispatcher import Dispatcher
from roder_core.server.methods.changes import git_changes_list, git_changes_read
from roder_core.server.protocol_changes import GitChangesListParams, GitChangesReadParams
from tests.tools.harness import start

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _run(ws: Path, *args: str) -> None:
    env = {**git_env(), "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


@pytest.fixture
def planted(workspace: Path, tmp_path: Path) -> Path:
    """A repository whose config runs ``evil.sh`` from every hook point git offers; returns the
    marker file evil.sh appends to."""
    marker = tmp_path / "ran.txt"
    _run(workspace, "init", "-q", "-b", "main")
    (workspace / "a.txt").write_text("one\n")
    _run(workspace, "add", "a.txt")
    _run(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    evil = workspace / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat "$@" 2>/dev/null || cat\n')
    evil.chmod(0o755)
    (workspace / "hooks").mkdir()
    for hook in ("post-index-change", "pre-commit", "reference-transaction"):
        (workspace / "hooks" / hook).write_text(f"#!/bin/sh\necho hook >> {marker}\n")
        (workspace / "hooks" / hook).chmod(0o755)
    with open(workspace / ".git" / "config", "a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {evil}\n\thooksPath = hooks\n\tpager = {evil}\n"
            f"[diff]\n\texternal = {evil}\n"
            f'[diff "evil"]\n\ttextconv = {evil}\n'
            f'[filter "evil"]\n\tclean = {evil}\n\tsmudge = {evil}\n'
        )
    (workspace / ".gitattributes").write_text("* diff=evil filter=evil\n")
    (workspace / "a.txt").write_text("two\n")
    os.utime(workspace / "a.txt", (1, 1))  # stat-dirty, so status must look (and would filter)
    return marker


def test_the_planted_config_runs_code_under_plain_git(workspace: Path, planted: Path) -> None:
    subprocess.run(["git", "status"], cwd=workspace, capture_output=True)
    subprocess.run(["git", "diff", "HEAD"], cwd=workspace, capture_output=True)
    assert planted.exists()  # the attack is real; the tests below must stop it


async def test_environment_block_runs_no_planted_program(workspace: Path, planted: Path) -> None:
    state = await git_state(workspace)
    assert "branch main" in state
    assert "uncommitted" in state
    assert not planted.exists(), planted.read_text()


async def test_changes_methods_run_no_planted_program(workspace: Path, planted: Path) -> None:
    started = start(workspace, [{"text": "hi"}], sandbox="off")
    app = Dispatcher(started.runtime, started=started)
    listed = await git_changes_list(app, GitChangesListParams(workspace=str(workspace)), None)  # type: ignore[arg-type]
    assert {f.path for f in listed.files} >= {"a.txt"}
    read = await git_changes_read(app, GitChangesReadParams(workspace=str(workspace), path="a.txt"), None)  # type: ignore[arg-type]
    assert "+two" in read.patch
    assert not planted.exists(), planted.read_text()


def test_batch_git_runs_no_planted_program(workspace: Path, planted: Path) -> None:
    batch_git("status", cwd=workspace)
    assert "+two" in batch_git("diff", "HEAD", cwd=workspace)
    assert not planted.exists(), planted.read_text()


def test_outside_git_variables_do_not_reach_git(workspace: Path, tmp_path: Path) -> None:
    env = git_env(
        {
            "PATH": os.environ["PATH"],
            "GIT_DIR": str(tmp_path / "elsewhere"),
            "GIT_EXTERNAL_DIFF": "/bin/false",
            "GIT_CONFIG_COUNT": "1",
        }
    )
    assert not any(k in env for k in ("GIT_DIR", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_COUNT"))
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    argv = git_argv(["-c", "core.quotepath=off", "diff", "HEAD"])
    assert argv[argv.index("diff") + 1 : argv.index("diff") + 3] == ["--no-ext-diff", "--no-textconv"]
    assert "core.fsmonitor=false" in argv
    assert "core.hooksPath=/dev/null" in argv
    assert "core.pager=cat" in argv
