"""The task file: what a line may hold, and the errors a wrong file gets (with line numbers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.batch.tasks import TaskFileError, load_tasks, parse_tasks, task_dir_name


def _write(path: Path, *lines: object) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_a_full_line_and_the_shorthands(tmp_path: Path) -> None:
    (tmp_path / "repos" / "calc").mkdir(parents=True)
    tasks = load_tasks(
        _write(
            tmp_path / "tasks.jsonl",
            "# comment lines and blank lines are skipped",
            "",
            {
                "id": "fix-add",
                "prompt": "Make the tests pass.",
                "workspace": "repos/calc",
                "setup": "make deps",
                "score": "pytest -q",
                "deadline": 600,
                "mode": "auto-edit",
                "metadata": {"difficulty": "easy"},
                "taskLedgerRequired": True,
            },
            {"id": "from-git", "prompt": "p", "workspace": {"git": "repos/calc", "ref": "v1"}, "setup": ["a", "b"]},
            {"id": "remote", "prompt": "p", "workspace": {"git": "https://example.invalid/x.git"}},
            {"id": "empty", "prompt": "p"},
        )
    )
    full, git, remote, empty = tasks
    assert full.workspace is not None
    assert full.workspace.path == str((tmp_path / "repos" / "calc").resolve())
    assert full.setup == ["make deps"]
    assert full.score == "pytest -q"
    assert full.deadline == 600
    assert full.mode == "auto-edit"
    assert full.metadata == {"difficulty": "easy"}
    assert full.task_ledger_required is True
    assert git.workspace is not None
    assert git.workspace.git == str((tmp_path / "repos" / "calc").resolve())
    assert git.workspace.ref == "v1"
    assert git.setup == ["a", "b"]
    assert remote.workspace is not None
    assert remote.workspace.git == "https://example.invalid/x.git"
    assert empty.workspace is None
    assert empty.score is None
    assert empty.deadline is None


def test_errors_name_the_line_and_the_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tasks.jsonl",
        {"id": "ok", "prompt": "p"},
        "{not json",
        {"id": "typo", "prompt": "p", "scoer": "pytest"},
        {"id": "ok", "prompt": "again"},
        {"prompt": "no id"},
        {"id": "bad-deadline", "prompt": "p", "deadline": -1},
        {"id": "bad-ws", "prompt": "p", "workspace": {"path": "a", "git": "b"}},
        {"id": "bad-mode", "prompt": "p", "mode": "yolo"},
        "[1, 2]",
        {"id": "no-image", "prompt": "p", "image": ""},
        {"id": "protect-string", "prompt": "p", "protect": "conftest.py"},
    )
    with pytest.raises(TaskFileError) as caught:
        load_tasks(path)
    message = str(caught.value)
    assert f"{path}:2: not valid JSON" in message
    assert f"{path}:3: scoer: Extra inputs are not permitted" in message
    assert f"{path}:4: duplicate id 'ok' (first on line 1)" in message
    assert f"{path}:5: id: Field required" in message
    assert f"{path}:6: deadline:" in message
    assert f"{path}:7:" in message
    assert "exactly one of 'path' or 'git'" in message
    assert f"{path}:8: mode:" in message
    assert f"{path}:9: expected a JSON object" in message
    assert f"{path}:10: image: String should have at least 1 character" in message  # not "image  is not on this machine"
    assert f"{path}:11: protect: Value error, expected a list of globs" in message  # a diff is for "tests" alone


def test_an_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="no tasks"):
        load_tasks(_write(tmp_path / "empty.jsonl", "# nothing"))
    with pytest.raises(TaskFileError, match="cannot read task file"):
        load_tasks(tmp_path / "missing.jsonl")


def test_digest_changes_with_what_the_task_asks() -> None:
    [a, b, c] = parse_tasks(
        [
            json.dumps({"id": "t", "prompt": "p"}),
            json.dumps({"id": "u", "prompt": "p"}),
            json.dumps({"id": "v", "prompt": "p", "score": "true"}),
        ],
        "x",
        Path("/"),
    )
    again = parse_tasks([json.dumps({"prompt": "p", "id": "t"})], "x", Path("/"))[0]
    assert a.digest() == again.digest()
    assert len({a.digest(), b.digest(), c.digest()}) == 3


def test_task_folder_names_are_safe_and_distinct() -> None:
    assert task_dir_name("django__django-11099") == "django__django-11099"
    odd = [task_dir_name(i) for i in ("owner/repo#1", "owner_repo#1", "../etc", ".hidden", "a b")]
    assert len(set(odd)) == len(odd)
    for name in odd:
        assert "/" not in name
        assert not name.startswith(".")
        assert " " not in name
