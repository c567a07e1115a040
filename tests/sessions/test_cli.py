"""`roder sessions ...`, `roder replay` and `roder -p -c/-r`, through the real command line."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from roder_core.settings.paths import RoderPaths
from roder_tui.cli import main


@pytest.fixture
def here(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workspace)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # nothing piped
    return workspace


def _script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[dict]) -> None:
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    path.write_text(json.dumps({"steps": steps}))
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(path))


def _ask(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["-p", *args, "--provider", "mock", "--output-format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_continue_resume_and_the_whole_sessions_family(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _script(tmp_path, monkeypatch, [{"text": "one"}])  # each run is a new process: the script restarts
    code, out, _ = _ask(capsys, "first question")
    assert code == 0
    thread_id = json.loads(out)["thread_id"]
    _script(tmp_path, monkeypatch, [{"text": "two"}])
    code, out, _ = _ask(capsys, "-c", "second question")
    assert code == 0
    assert json.loads(out)["thread_id"] == thread_id
    assert json.loads(out)["text"] == "two"
    code, out, _ = _ask(capsys, "-r", thread_id[4:12], "third question", "--model", "mock-large")
    assert code == 0
    assert json.loads(out)["thread_id"] == thread_id

    rows = _json(capsys, "sessions", "list", "--json")
    assert [r["id"] for r in rows] == [thread_id]
    assert rows[0]["turnCount"] == 3
    assert rows[0]["model"] == "mock-large", "the --model given on resume is recorded in the thread"

    assert main(["sessions", "show", thread_id[:10]]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# first question")
    assert "## Turn 3: completed" in shown
    assert "**Assistant**\n\ntwo" in shown

    parent_file = RoderPaths.from_env().threads_dir / f"{thread_id}.jsonl"
    before = hashlib.sha256(parent_file.read_bytes()).hexdigest()
    forked = _json(capsys, "sessions", "fork", thread_id, "--turn", "2", "--json")
    assert forked["parent"]["threadId"] == thread_id
    assert forked["turns"] == 2
    assert hashlib.sha256(parent_file.read_bytes()).hexdigest() == before
    assert main(["sessions", "list"]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith(thread_id)
    assert tree[1].startswith(f"  ↳ {forked['id']}")

    out_file = tmp_path / "t.md"
    assert main(["sessions", "export", forked["id"], "--format", "markdown", "-o", str(out_file)]) == 0
    assert "Forked from: `" + thread_id in out_file.read_text()
    trajectory = _json(capsys, "sessions", "export", thread_id, "--format", "json")
    assert trajectory["schema"] == "roder.trajectory/1"
    assert len(trajectory["turns"]) == 3
    assert trajectory["turns"][0]["steps"][0] == {**trajectory["turns"][0]["steps"][0], "type": "user", "text": "first question"}
    assert all("at" in step for turn in trajectory["turns"] for step in turn["steps"])
    assert trajectory["turns"][0]["calls"][0]["usage"]["outputTokens"] > 0

    assert main(["sessions", "rm", forked["id"]]) == 0
    assert f"deleted {forked['id']}" in capsys.readouterr().out
    assert [r["id"] for r in _json(capsys, "sessions", "list", "--all", "--json")] == [thread_id]


def test_errors_are_clear_and_lose_nothing(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "show", "thr_nothing"]) == 1
    assert "no thread 'thr_nothing'" in capsys.readouterr().err
    code, _, err = _ask(capsys, "-c", "hello")
    assert code == 2
    assert "no earlier thread in this folder" in err
    code, _, err = _ask(capsys, "-r", "", "hello")
    assert code == 2
    assert "-r needs a thread id" in err
    assert main(["sessions", "list"]) == 0
    assert "No threads in" in capsys.readouterr().out
    code, out, _ = _ask(capsys, "hello")
    thread_id = json.loads(out)["thread_id"]
    assert main(["sessions", "fork", thread_id, "--turn", "5"]) == 1
    assert "--turn must be 1..1" in capsys.readouterr().err


def test_replay_reruns_user_turns_and_reports_differences(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _script(tmp_path, monkeypatch, [{"text": "Paris."}])
    code, out, _ = _ask(capsys, "capital of France?")
    assert code == 0
    thread_id = json.loads(out)["thread_id"]
    _script(tmp_path, monkeypatch, [{"text": "Four."}])
    _ask(capsys, "-c", "2+2?")
    _script(
        tmp_path,
        monkeypatch,
        [
            {"text": "Paris."},
            {"text": "Let me compute.", "tool_calls": [{"name": "memory_search", "arguments": {"query": "math"}}]},
            {"text": "It is 4."},
        ],
    )
    report = _json(capsys, "replay", thread_id, "--provider", "mock", "--model", "mock-large", "--json")
    assert report["source"] == thread_id
    assert report["model"] == "mock-large"
    assert report["differ"] == 1
    first, second = report["turns"]
    assert first["sameAnswer"]
    assert first["sameTools"]
    assert not second["sameAnswer"]
    assert second["replay"]["tools"] == ["memory_search"]
    assert second["original"]["answer"] == "Four."
    assert second["replay"]["answer"] == "It is 4."
    replayed = json.loads(json.dumps(_json(capsys, "sessions", "show", report["replay"], "--json")))
    assert replayed["custom"]["roder.replay"]["data"]["source"] == thread_id
    assert replayed["title"].startswith("Replay of capital of France?")

    _script(tmp_path, monkeypatch, [{"text": "Lyon."}, {"text": "Four."}])
    assert main(["replay", thread_id[:12], "--provider", "mock"]) == 0
    text = capsys.readouterr().out
    assert "turn 1 (capital of France?): answer differs" in text
    assert "-Paris." in text
    assert "+Lyon." in text
    assert "turn 2 (2+2?): same answer" in text
    assert text.rstrip().endswith("1 of 2 turn(s) differ")
