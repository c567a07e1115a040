"""Roder's own git runs unconfined (its environment block every turn, batch baselines, plugin
fetches), so it must never be a program named ``git`` that the agent's commands left in a
workspace folder on Roder's PATH (direnv's ``PATH_add bin`` or ``layout python``,
``./node_modules/.bin``, ``.``), whatever the PATH's order."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from roder_ext_context.environment import git_state

from roder_core.batch.workspace import Baseline
from roder_core.brokers.host_programs import SYSTEM_FOLDERS
from roder_core.brokers.safe_git import host_git


def plant_git(workspace: Path, marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``git`` in ``workspace/bin`` that leaves ``marker`` and then behaves, first on the PATH
    (relative and absolute), with the workspace as the working folder."""
    real = shutil.which("git")
    assert real is not None
    planted = workspace / "bin" / "git"
    planted.parent.mkdir()
    planted.write_text(f'#!/bin/sh\ntouch {marker}\nexec {real} "$@"\n')
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)


def test_roders_git_is_the_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plant_git(workspace, tmp_path / "escaped", monkeypatch)
    found = host_git()
    assert found is not None and os.path.dirname(found) in SYSTEM_FOLDERS


async def test_the_environment_block_never_runs_a_planted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(workspace)], check=True)
    marker = tmp_path / "escaped"
    plant_git(workspace, marker, monkeypatch)
    state = await git_state(workspace)
    assert "trunk" in state, state
    assert not marker.exists()


def test_a_batch_baseline_never_runs_a_planted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("x = 1\n")
    marker = tmp_path / "escaped"
    plant_git(workspace, marker, monkeypatch)
    baseline = Baseline(tmp_path / "baseline.git", workspace)
    baseline.record()
    (workspace / "calc.py").write_text("x = 2\n")
    diff, changes = baseline.compare()
    assert changes == [("M", "calc.py")] and "+x = 2" in diff
    assert not marker.exists()
