"""What git ignores is in no prediction, so the score never reads the agent's change to it: an
ignored file the base had is put back before the score (a vendored module edited to fake the
fix scores failed), an honest fix beside such an edit still passes, and where the ignored part
is too large to keep a copy of, the score log says it was not put back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.batch import runner_guard
from roder_core.batch.runner_guard import RunnerGuard
from tests.batch.conftest import batch_of_scripts, result

BUGGY = "from helper import op\n\n\ndef add(a, b):\n    return op(a, b) + 0\n"
SCORE = f"PYTHONPATH=vendor {sys.executable} -c 'from calc import add; assert add(2, 3) == 5'"
#: The same size as the base's helper: only its change time tells the edit.
FAKE = "printf 'def op(a, b):\\n    return a + b\\n' > vendor/helper.py"
FIX = {"name": "edit", "arguments": {"path": "calc.py", "old_string": "op(a, b) + 0", "new_string": "a + b"}}


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def _source(root: Path) -> Path:
    source = root / "source"
    (source / "vendor").mkdir(parents=True)
    (source / "calc.py").write_text(BUGGY)
    (source / ".gitignore").write_text("vendor/\nbuild/\n")
    (source / "vendor" / "helper.py").write_text("def op(a, b):\n    return a - b\n")
    (source / "build").mkdir()
    (source / "build" / "notes.txt").write_text("built at the base\n")
    return source


def test_an_edit_of_an_ignored_base_file_is_put_back_before_the_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _source(tmp_path)
    cases = {
        "vendored-fake": [_bash(FAKE)],
        "honest-beside-ignored": [FIX, _bash("echo rebuilt > build/notes.txt; rm -f vendor/helper.py")],
    }
    out = batch_of_scripts(capsys, tmp_path, cases, {"workspace": str(source), "score": SCORE})
    fake_log = (out / "rollouts/vendored-fake/0/score.log").read_text()
    assert not result(out, "vendored-fake")["passed"], fake_log
    assert "restored vendor (git ignores it" in fake_log
    # What the agent did is still on record: its own view of the change.
    assert "a + b" in (out / "rollouts/vendored-fake/0/trajectory.json").read_text()
    honest_log = (out / "rollouts/honest-beside-ignored/0/score.log").read_text()
    assert result(out, "honest-beside-ignored")["passed"], honest_log
    assert "restored build" in honest_log and "restored vendor" in honest_log
    predictions = {p["instance_id"]: p["model_patch"] for p in map(json.loads, (out / "preds.jsonl").read_text().splitlines())}
    assert "+    return a + b" in predictions["honest-beside-ignored"]
    assert "vendor" not in predictions["vendored-fake"] and "build" not in predictions["honest-beside-ignored"]


def test_ignored_content_too_large_to_copy_fails_the_score_closed_when_changed(tmp_path: Path) -> None:
    workspace = _source(tmp_path)
    (workspace / "vendor" / "__pycache__").mkdir()
    guard = RunnerGuard(workspace, tmp_path / "store", score=SCORE, copy_files=1)  # build/ fits, vendor/ does not
    guard.record()
    (workspace / "vendor" / "more.py").write_text("")
    guard.keep(["build/", "vendor/"])
    assert guard.kept_copied == {"build"}
    # Bytecode the tests leave is not a change (the sweep removes it); an edit is.
    (workspace / "vendor" / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"cache")
    log, reset = guard.reset()
    assert (log, reset) == ([], set())
    before = os.stat(workspace / "vendor" / "helper.py")
    (workspace / "vendor" / "helper.py").write_text("def op(a, b):\n    return a + b\n")
    os.utime(workspace / "vendor" / "helper.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(runner_guard.UnscorableChange) as refused:
        guard.reset()
    assert str(refused.value) == (
        "vendor/helper.py changed; vendor (git-ignored, in no prediction) is beyond the 1 files / 256 MiB "
        "a rollout keeps a copy of, so the change cannot be put back"
    )


def test_a_workspace_git_cannot_ignore_anything_in_costs_no_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a ``.gitignore`` of the workspace, or the user's own ignore file, makes git ignore
    something: without either, the rollout runs no git process to list what is ignored."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("x = 1\n")
    plain = RunnerGuard(workspace, tmp_path / "store-plain", score=SCORE)
    plain.record()
    assert not plain.ignores_some()
    (tmp_path / "config" / "git").mkdir(parents=True)
    (tmp_path / "config" / "git" / "ignore").write_text("*.log\n")
    assert plain.ignores_some()
    (tmp_path / "config" / "git" / "ignore").unlink()
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".gitignore").write_text("*.tmp\n")
    nested = RunnerGuard(workspace, tmp_path / "store-nested", score=SCORE)
    nested.record()
    assert nested.ignores_some()


def test_a_link_to_a_folder_inside_ignored_content_pointed_elsewhere_is_put_back(tmp_path: Path) -> None:
    workspace = _source(tmp_path)
    (workspace / "real").mkdir()
    (workspace / "fake").mkdir()
    (workspace / "vendor" / "lib").symlink_to("../real")
    guard = RunnerGuard(workspace, tmp_path / "store", score=SCORE)
    guard.record()
    guard.keep(["build/", "vendor/"])
    (workspace / "vendor" / "lib").unlink()
    (workspace / "vendor" / "lib").symlink_to("../fake")
    log, reset = guard.reset()
    assert reset == {"vendor"}, log
    assert os.readlink(workspace / "vendor" / "lib") == "../real"


def test_a_loose_compiled_module_in_ignored_content_is_guarded_like_a_source(tmp_path: Path) -> None:
    """Python imports ``helper.pyc`` where ``helper.py`` is missing: a vendored compiled module
    the agent rewrites is put back, though bytecode in ``__pycache__`` is left to the sweep."""
    workspace = _source(tmp_path)
    (workspace / "vendor" / "compiled.pyc").write_bytes(b"base bytecode")
    guard = RunnerGuard(workspace, tmp_path / "store", score=SCORE)
    guard.record()
    guard.keep(["build/", "vendor/"])
    (workspace / "vendor" / "compiled.pyc").write_bytes(b"fake bytecode")
    log, reset = guard.reset()
    assert reset == {"vendor"}, log
    assert (workspace / "vendor" / "compiled.pyc").read_bytes() == b"base bytecode"


def test_an_ignored_folder_that_holds_an_environment_is_guarded_besides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``build/`` is ignored and holds both a venv (kept on its own) and a module the score
    imports: an edit of the module is put back, and so is one of the venv, each apart."""
    source = tmp_path / "source"
    (source / "build" / "lib").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(source / "build" / "venv")], check=True)
    (source / ".gitignore").write_text("build/\n")
    (source / "calc.py").write_text(BUGGY)
    (source / "build" / "lib" / "helper.py").write_text("def op(a, b):\n    return a - b\n")
    site = f"build/venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    score = "PYTHONPATH=build/lib build/venv/bin/python -c 'from calc import add; assert add(2, 3) == 5'"
    cases = {
        "module-fake": [_bash(FAKE.replace("vendor/", "build/lib/"))],
        "venv-fake": [_bash(f"printf 'import helper\\nhelper.op = lambda a, b: a + b\\n' > {site}/sitecustomize.py")],
        "honest": [FIX],
    }
    out = batch_of_scripts(capsys, tmp_path, cases, {"workspace": str(source), "score": score})
    assert result(out, "honest")["passed"], (out / "rollouts/honest/0/score.log").read_text()
    module_log = (out / "rollouts/module-fake/0/score.log").read_text()
    assert not result(out, "module-fake")["passed"], module_log
    assert "restored build (git ignores it" in module_log
    venv_log = (out / "rollouts/venv-fake/0/score.log").read_text()
    assert not result(out, "venv-fake")["passed"], venv_log
    assert "restored environment build/venv" in venv_log


def test_putting_back_a_folder_leaves_the_environment_inside_it_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "build" / "venv" / "lib").mkdir(parents=True)
    (workspace / "build" / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / "build" / "venv" / "lib" / "kept.py").write_text("x = 1\n")
    (workspace / "build" / "lib").mkdir()
    (workspace / "build" / "lib" / "helper.py").write_text("def op(a, b):\n    return a - b\n")
    guard = RunnerGuard(workspace, tmp_path / "store", score=SCORE)
    guard.record()
    guard.keep(["build/"])
    assert guard.environments == ["build/venv"] and guard.kept_skip == {"build": frozenset({"venv"})}
    assert guard.kept_copied == {"build", "build/venv"}
    (workspace / "build" / "lib" / "helper.py").write_text("def op(a, b):\n    return a + b\n")
    (workspace / "build" / "new.py").write_text("")
    log, reset = guard.reset()
    assert reset == {"build"}, log
    assert "a - b" in (workspace / "build" / "lib" / "helper.py").read_text()
    assert not (workspace / "build" / "new.py").exists()
    assert (workspace / "build" / "venv" / "lib" / "kept.py").read_text() == "x = 1\n"


def test_content_the_agent_stops_ignoring_stays_out_of_the_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An agent that takes ``vendor/`` out of ``.gitignore`` makes git see the base's vendored
    files as new: they are the base's, scored as the base had them, so the prediction leaves
    them out (an external grader would find them already there and refuse the patch)."""
    source = _source(tmp_path)
    cases = {"unignored": [FIX, _bash("printf 'build/\\n' > .gitignore")]}
    out = batch_of_scripts(capsys, tmp_path, cases, {"workspace": str(source), "score": SCORE})
    assert result(out, "unignored")["passed"], (out / "rollouts/unignored/0/score.log").read_text()
    prediction = json.loads((out / "preds.jsonl").read_text())["model_patch"]
    assert "+    return a + b" in prediction and ".gitignore" in prediction
    assert "vendor/helper.py" not in prediction


def test_an_edit_of_ignored_content_beyond_the_copy_budget_is_refused_through_the_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a budget of one file, ``build/`` (one file) is copied and ``vendor/`` (two) is kept
    as stamps: the vendored fake is refused, saying why, and the honest fix still passes."""
    source = _source(tmp_path)
    (source / "vendor" / "more.py").write_text("")
    cases = {"vendored-fake": [_bash(FAKE)], "honest": [FIX, _bash("echo rebuilt > build/notes.txt")]}
    out = batch_of_scripts(capsys, tmp_path, cases, {"workspace": str(source), "score": SCORE, "keep_copy_files": 1})
    assert result(out, "honest")["passed"], (out / "rollouts/honest/0/score.log").read_text()
    refused = result(out, "vendored-fake")
    assert not refused["passed"] and refused["failure_cause"] == "score_refused"
    assert refused["score"]["refused"] == (
        "vendor/helper.py changed; vendor (git-ignored, in no prediction) is beyond the 1 files / 256 MiB "
        "a rollout keeps a copy of, so the change cannot be put back"
    )
