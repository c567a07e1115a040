"""What git ignores is in no prediction, so the score never reads the agent's change to it: an
ignored file the base had is put back before the score (a vendored module edited to fake the
fix scores failed), an honest fix beside such an edit still passes, and where the ignored part
is too large to keep a copy of, the score log says it was not put back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.batch import runner_guard
from roder_core.batch.runner_guard import RunnerGuard
from tests.batch.conftest import result, run_cli, write_script

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
    rows = []
    for name, calls in cases.items():
        script = write_script(tmp_path / f"{name}.json", [{"text": "Working.", "tool_calls": calls}, {"text": "Done."}])
        rows.append(
            {
                "id": name,
                "prompt": "Make add add.",
                "workspace": str(source),
                "score": SCORE,
                "env": {"RODER_MOCK_SCRIPT": str(script)},
            }
        )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "mock")
    assert code == 0, err
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


def test_ignored_content_too_large_to_copy_is_said_not_put_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = _source(tmp_path)
    (workspace / "vendor" / "__pycache__").mkdir()
    guard = RunnerGuard(workspace, tmp_path / "store", score=SCORE)
    guard.record()
    monkeypatch.setattr(runner_guard, "IGNORED_COPY_FILES", 1)  # build/ fits, vendor/ (two files) does not
    (workspace / "vendor" / "more.py").write_text("")
    guard.keep_ignored(["build/", "vendor/"])
    assert guard.ignored_copied == {"build"}
    # Bytecode the tests leave is not a change (the sweep removes it); an edit is.
    (workspace / "vendor" / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"cache")
    log, reset = guard.reset()
    assert (log, reset) == ([], set())
    before = os.stat(workspace / "vendor" / "helper.py")
    (workspace / "vendor" / "helper.py").write_text("def op(a, b):\n    return a + b\n")
    os.utime(workspace / "vendor" / "helper.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    log, reset = guard.reset()
    assert reset == set()
    assert log == [
        "not restored: vendor changed; git ignores it, and it was too large to keep a copy of "
        "(the score reads it as the agent left it)"
    ]


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
    guard.keep_ignored(["build/", "vendor/"])
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
    guard.keep_ignored(["build/", "vendor/"])
    (workspace / "vendor" / "compiled.pyc").write_bytes(b"fake bytecode")
    log, reset = guard.reset()
    assert reset == {"vendor"}, log
    assert (workspace / "vendor" / "compiled.pyc").read_bytes() == b"base bytecode"
