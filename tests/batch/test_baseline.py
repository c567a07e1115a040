"""The rollout's baseline snapshot and its diff, made with fewer git processes, say exactly
what git's own commands say: the snapshot's repository is the one ``git init`` makes, and one
``diff --patch-with-raw`` gives the same patch and the same list of changes as a ``diff`` and a
``diff --name-status --no-renames`` did."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from roder_core.batch.workspace import Baseline, git, git_bytes


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_baseline_repository_is_what_git_init_makes(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    Baseline(tmp_path / "ours.git", workspace).record()
    git(f"--git-dir={tmp_path / 'theirs.git'}", f"--work-tree={workspace}", "init", "--quiet", "--template=")
    theirs = _files(tmp_path / "theirs.git")
    # ``core.worktree`` aside: every command of the baseline names its work tree.
    theirs["config"] = b"".join(line for line in theirs["config"].splitlines(keepends=True) if b"worktree = " not in line)
    ours = {name: data for name, data in _files(tmp_path / "ours.git").items() if name in theirs}
    assert ours == theirs
    assert git(f"--git-dir={tmp_path / 'ours.git'}", "fsck", "--strict") == ""


def test_the_baseline_is_two_git_processes_and_its_comparison_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted by git's own trace: no automatic maintenance after the baseline's commit."""
    from roder_core.batch import workspace as module

    trace = tmp_path / "trace.json"
    environment = module._git_env
    monkeypatch.setattr(module, "_git_env", lambda: {**environment(), "GIT_TRACE2_EVENT": str(trace)})
    tree = tmp_path / "w"
    tree.mkdir()
    (tree / "a.txt").write_text("a\n")
    baseline = Baseline(tmp_path / "ours.git", tree)

    def started() -> list[list[str]]:
        events = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
        trace.unlink(missing_ok=True)
        return [e["argv"] for e in events if e["event"] == "start"]

    baseline.record()
    record = started()
    assert len(record) == 2 and not any("maintenance" in argv for argv in record), record
    (tree / "a.txt").write_text("b\n")
    baseline.compare()
    assert len(started()) == 2


def test_compare_gives_what_gits_own_diff_and_name_status_give(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    (workspace / "pkg").mkdir(parents=True)
    originals = {
        "plain.py": b"def add(a, b):\n    return a - b\n",
        "sp ace.txt": b"space\n",
        'quo"te.txt': b"quote\n",
        "n\u00e9.txt": b"unicode\n",
        "line\nbreak.txt": b"newline in the name\n",
        "binary.bin": bytes(range(256)),
        "pkg/moved.py": b"x = 1\n" * 40,
        "pkg/gone.txt": b"gone\n",
        "to-link.txt": b"becomes a link\n",
        ".gitignore": b"*.log\n",
    }
    for name, data in originals.items():
        (workspace / name).write_bytes(data)
    os.symlink("plain.py", workspace / "link")
    baseline = Baseline(tmp_path / "b.git", workspace)
    baseline.record()

    (workspace / "plain.py").write_bytes(b"def add(a, b):\n    return a + b\n")
    (workspace / "binary.bin").write_bytes(bytes(reversed(range(256))))
    (workspace / "pkg" / "moved.py").rename(workspace / "pkg" / "renamed.py")  # a rename to git's diff
    (workspace / "pkg" / "gone.txt").unlink()
    (workspace / "to-link.txt").unlink()
    os.symlink("plain.py", workspace / "to-link.txt")  # a type change
    (workspace / "new file.txt").write_bytes(b"added\n")
    (workspace / "ignored.log").write_bytes(b"ignored\n")
    (workspace / "a\tb.txt").write_bytes(b"tab\n")
    diff, changes = baseline.compare()

    def ask(*args: str) -> bytes:
        return git_bytes(f"--git-dir={tmp_path / 'b.git'}", f"--work-tree={workspace}", *args)

    assert diff == ask("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "HEAD").decode()
    fields = ask("diff", "--cached", "--name-status", "--no-renames", "-z", "HEAD").decode().split("\0")
    expected = [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]
    assert changes == expected
    assert ("D", "pkg/moved.py") in changes and ("A", "pkg/renamed.py") in changes and ("T", "to-link.txt") in changes
    assert "rename from pkg/moved.py" in diff and "ignored.log" not in diff
    assert baseline.diff(["plain.py"]) == ask("diff", "--cached", "--binary", "--no-color", "HEAD", "--", "plain.py").decode()
    assert baseline.original("pkg/gone.txt") == b"gone\n"
    # Applying the patch to the base reproduces the workspace (a prediction an external grader takes).
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(tmp_path / "b.git"), str(clone)],
        check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull},
    )
    subprocess.run(["git", "apply", "--binary", "-"], input=diff.encode(), cwd=clone, check=True)
    applied = {name: data for name, data in _files(clone).items() if not name.startswith(".git/")}
    assert applied == {name: data for name, data in _files(workspace).items() if name != "ignored.log"}


def test_compare_with_nothing_changed_is_empty(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    baseline = Baseline(tmp_path / "b.git", workspace)
    baseline.record()
    assert baseline.compare() == ("", [])
    assert baseline.diff([]) == ""
