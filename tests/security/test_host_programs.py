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
from roder_core.brokers.host_programs import SYSTEM_FOLDERS, system_program
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


async def test_glob_never_runs_an_rg_a_sandboxed_command_planted(
    workspace: Path, roder_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file listing behind ``glob`` (and ``@file`` completion) runs ``rg`` on the host: a
    sandboxed command writes ``bin/rg`` into the workspace, whose ``bin`` is on the PATH
    (relative and absolute), and the auto-approved ``glob`` that follows must not run it."""
    from tests.security.test_attack_git_include import _call, turn_and_requests

    marker = tmp_path / "escaped"
    real = shutil.which("rg")
    if real is None:
        pytest.skip("ripgrep is not installed")
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)
    (workspace / "a.py").write_text("x = 1\n")
    plant = f"mkdir -p bin && printf '#!/bin/sh\\ntouch {marker}\\nexec {real} \"$@\"\\n' > bin/rg && chmod +x bin/rg"
    results, _requests = await turn_and_requests(
        workspace, roder_home, [_call("bash", command=plant), _call("glob", pattern="**/*.py")], "bypass"
    )
    assert [r.is_error for r in results] == [False, False], [r.text for r in results]
    assert (workspace / "bin" / "rg").exists(), results[0].text
    assert "a.py" in results[1].text, results[1].text
    assert not marker.exists()


def test_a_program_only_the_working_folder_has_is_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system's folders lack a program, the PATH is searched without its relative
    folders and the folders inside the working folder: the one outside is found, never the
    planted one, and with only the planted one there is none."""
    workspace, elsewhere = tmp_path / "ws", tmp_path / "tools"
    for folder in (workspace / "bin", workspace / "node_modules" / ".bin", elsewhere):
        folder.mkdir(parents=True)
        program = folder / "roder-probe-tool"
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.chdir(workspace)
    inside = f"bin:.:{workspace / 'bin'}:{workspace / 'node_modules' / '.bin'}"
    monkeypatch.setenv("PATH", f"{inside}:{elsewhere}")
    assert system_program("roder-probe-tool") == str(elsewhere / "roder-probe-tool")
    monkeypatch.setenv("PATH", inside)
    assert system_program("roder-probe-tool") is None
