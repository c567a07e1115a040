"""Formats users already have: SWE-bench instance files against a local repo cache (per-test
status, preds.jsonl), Harbor / Terminal-Bench task folders (float rewards, tests copied in after
the agent, a Dockerfile task whose image cannot be built reported as not run) and ATIF trajectories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.batch.swebench import is_scratch, parse_test_statuses
from roder_core.batch.tasks import load_tasks
from roder_core.threads.atif import validate_atif
from tests.batch.conftest import result, run_cli, write_script

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
OLD_TESTS = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
NEW_TESTS = OLD_TESTS + "\n\ndef test_add():\n    from calc import add\n    assert add(2, 3) == 5\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def instance(tmp_path: Path) -> dict[str, Any]:
    """A repository in a repo cache at its base commit, and the SWE-bench instance for it."""
    repo = tmp_path / "cache" / "acme__calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text("*.egg-info/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "tests" / "test_calc.py").write_text(NEW_TESTS)
    test_patch = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", ".")
    return {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": base,
        "problem_statement": "add() subtracts instead of adding.",
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),  # as the HF datasets store it
        "PASS_TO_PASS": ["tests/test_calc.py::test_sub"],
        "patch": "the gold patch: never used",
        "hints_text": "",
        "version": "1.0",
    }


def test_swe_bench_instances_run_from_a_repo_cache_and_write_predictions(
    tmp_path: Path, instance: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def script(name: str, calls: list[dict[str, Any]]) -> dict[str, str]:
        path = write_script(tmp_path / f"{name}.json", [{"text": "On it.", "tool_calls": calls}, {"text": "Done."}])
        return {"RODER_MOCK_SCRIPT": str(path)}

    fix = [
        {
            "name": "edit",
            "arguments": {
                "path": "calc.py",
                "old_string": "    return a - b\n\n\ndef sub",
                "new_string": "    return a + b\n\n\ndef sub",
            },
        },
        {"name": "write", "arguments": {"path": "reproduce_issue.py", "content": "print(1)\n"}},
        {"name": "write", "arguments": {"path": "calc_helpers.py", "content": "HELP = 1\n"}},
        {"name": "bash", "arguments": {"command": "mkdir -p calc.egg-info && touch calc.egg-info/PKG-INFO"}},
    ]
    # Rewrites the test file so test_add passes without a fix: the test patch resets it first.
    cheat = [
        {
            "name": "write",
            "arguments": {"path": "tests/test_calc.py", "content": "def test_add():\n    pass\n\n\ndef test_sub():\n    pass\n"},
        }
    ]
    instances = tmp_path / "instances.json"  # a JSON array, as SWE-bench files often are
    instances.write_text(
        json.dumps(
            [
                {**instance, "env": script("fix", fix)},
                {**instance, "instance_id": "acme__calc-2", "env": script("cheat", cheat)},
            ]
        )
    )
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys,
        "batch",
        instances,
        "--repo-cache",
        tmp_path / "cache",
        "--out",
        out,
        "--workers",
        "2",
        "--no-progress",
        "--provider",
        "mock",
    )
    assert code == 0, err

    fixed = result(out, "acme__calc-1")
    assert fixed["passed"], (out / "rollouts/acme__calc-1/0/score.log").read_text()
    assert fixed["tests"] == {
        "FAIL_TO_PASS": {"success": ["tests/test_calc.py::test_add"], "failure": []},
        "PASS_TO_PASS": {"success": ["tests/test_calc.py::test_sub"], "failure": []},
        "resolved": True,
    }
    assert fixed["metadata"]["format"] == "swe-bench"
    cheated = result(out, "acme__calc-2")
    assert not cheated["passed"]
    assert cheated["tests"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]
    assert cheated["tests"]["PASS_TO_PASS"]["success"] == ["tests/test_calc.py::test_sub"]

    predictions = [json.loads(line) for line in (out / "preds.jsonl").read_text().splitlines()]
    assert [p["instance_id"] for p in predictions] == ["acme__calc-1", "acme__calc-2"]
    assert {p["model_name_or_path"] for p in predictions} == {"roder/mock/mock"}
    patch = predictions[0]["model_patch"]
    assert "+    return a + b" in patch
    assert "calc_helpers.py" in patch
    assert "reproduce_issue.py" not in patch
    assert "egg-info" not in patch  # scratch and ignored files
    assert "reproduce_issue.py" in (out / "rollouts/acme__calc-1/0/workspace.diff").read_text()
    # The prediction applies to the base commit, as SWE-bench's harness will apply it.
    check = tmp_path / "check"
    _git(tmp_path, "clone", "-q", str(tmp_path / "cache" / "acme__calc"), str(check))
    (check / "pred.patch").write_text(patch)
    _git(check, "apply", "pred.patch")
    assert "return a + b" in (check / "calc.py").read_text()


def test_swe_bench_lines_are_checked(tmp_path: Path, instance: dict[str, Any]) -> None:
    from roder_core.batch.tasks import TaskFileError

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({**instance, "FAIL_TO_PASS": ["test_add (tests.CalcTests)"], "PASS_TO_PASS": []})
        + "\n"
        + json.dumps({k: v for k, v in instance.items() if k != "base_commit"})
        + "\n"
    )
    with pytest.raises(TaskFileError) as caught:
        load_tasks(bad)
    assert "bad.jsonl:1: its tests are not pytest node ids" in str(caught.value)
    assert "bad.jsonl:2: SWE-bench instance lacks base_commit" in str(caught.value)
    [task] = load_tasks(_one(tmp_path, instance), repo_cache=None)
    assert task.workspace is not None
    assert task.workspace.git == "https://github.com/acme/calc.git"


def _one(tmp_path: Path, instance: dict[str, Any]) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(instance) + "\n")
    return path


def test_per_test_status_and_scratch_rules() -> None:
    output = "\n".join(
        [
            "tests/a.py::test_x PASSED                                                [ 50%]",
            "PASSED tests/a.py::test_y",
            "FAILED tests/a.py::test_z - assert 1 == 2",
            "ERROR tests/b.py::test_w",
            "test_add (calc.tests.CalcTests) ... ok",
            "test_sub (calc.tests.CalcTests) ... FAIL",
        ]
    )
    assert parse_test_statuses(output) == {
        "tests/a.py::test_x": "PASSED",
        "tests/a.py::test_y": "PASSED",
        "tests/a.py::test_z": "FAILED",
        "tests/b.py::test_w": "ERROR",
        "test_add (calc.tests.CalcTests)": "ok",
        "test_sub (calc.tests.CalcTests)": "FAIL",
    }
    assert is_scratch("reproduce_bug.py")
    assert is_scratch("pkg/__pycache__/m.pyc")
    assert is_scratch("test_mine.py")
    assert not is_scratch("pkg/reproduce.py")
    assert not is_scratch("tests/test_new.py")
    assert not is_scratch("new.py")


def _harbor_task(root: Path, name: str, *, dockerfile: bool = False, reward: str = "") -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "solution").mkdir()
    (folder / "task.toml").write_text(
        'version = "1.0"\n[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 90.0\n'
        "[verifier]\ntimeout_sec = 30.0\n[environment]\nbuild_timeout_sec = 120.0\n"
    )
    (folder / "instruction.md").write_text("Write the answer to answer.txt.\n")
    (folder / "solution" / "solve.sh").write_text("echo 42 > answer.txt\n")
    (folder / "environment" / "README").write_text("the app\n")
    if dockerfile:
        (folder / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (folder / "tests" / "expected.txt").write_text("42\n")
    (folder / "tests" / "test.sh").write_text(
        reward
        or (
            '#!/bin/bash\nmkdir -p "$LOGS_DIR/verifier"\n'
            'if cmp -s answer.txt "$TESTS_DIR/expected.txt"; then echo 1 > "$LOGS_DIR/verifier/reward.txt"\n'
            'elif [ -f answer.txt ]; then echo 0.25 > "$LOGS_DIR/verifier/reward.txt"\n'
            'else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi\n'
        )
    )
    return folder


def test_harbor_task_folders_with_float_rewards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "tasks"
    _harbor_task(root, "close-answer")
    _harbor_task(
        root,
        "json-reward",
        reward=(
            '#!/bin/bash\nls "$TESTS_DIR" > /dev/null\n'
            'echo \'{"correctness": 0.5, "style": 1.0}\' > "$LOGS_DIR/verifier/reward.json"\n'
        ),
    )
    _harbor_task(root, "needs-image", dockerfile=True)
    answer = write_script(
        tmp_path / "answer.json",
        [
            {
                "text": "Looking.",
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "ls; ls tests solution 2>&1 | head -3"}},
                    {"name": "write", "arguments": {"path": "answer.txt", "content": "41\n"}},
                ],
            },
            {"text": "Answered."},
        ],
    )
    tasks = load_tasks(root)
    assert [t.id for t in tasks] == ["close-answer", "json-reward", "needs-image"]
    assert (tasks[0].deadline, tasks[0].score_timeout, tasks[0].setup_timeout) == (90.0, 30.0, 120.0)
    out = tmp_path / "out"
    os.environ["RODER_MOCK_SCRIPT"] = str(answer)
    try:
        code, _, err = run_cli(capsys, "batch", root, "--out", out, "--workers", "2", "--no-progress", "--provider", "mock")
    finally:
        del os.environ["RODER_MOCK_SCRIPT"]
    assert code == 0, err
    close = result(out, "close-answer")
    assert close["reward"] == 0.25
    assert not close["passed"]
    assert close["failure_cause"] == "score_failure"
    assert close["metadata"]["difficulty"] == "easy"
    assert close["metadata"]["format"] == "harbor"
    listing = next(
        s
        for s in json.loads((out / "rollouts/close-answer/0/trajectory.json").read_text())["turns"][0]["steps"]
        if s["type"] == "tool_call"
    )["result"]["text"]
    assert "README" in listing
    assert "No such file" in listing
    assert "expected" not in listing  # tests came later
    assert result(out, "json-reward")["reward"] == 0.75
    image = result(out, "needs-image")  # its base image is not on this machine (never pulled)
    assert image["failure_cause"] == "environment_unavailable"
    assert image["exit_reason"] == "not_run"
    assert "podman" in image["error"]["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_reward"] == round((0.25 + 0.75) / 2, 4)  # what could not run is apart
    assert summary["rollouts"] == 2
    assert summary["not_run"]["rollouts"] == 1


def test_atif_export_per_rollout_and_from_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "text": "Two things at once.",
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "a.txt", "content": "a\n"}},
                    {"name": "write", "arguments": {"path": "b.txt", "content": "b\n"}},
                ],
            },
            {"text": "Both written."},
        ],
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "two", "prompt": "Write a and b.", "env": {"RODER_MOCK_SCRIPT": str(script)}}))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "mock")
    assert code == 0, err
    atif = json.loads((out / "rollouts/two/0/atif.json").read_text())
    assert validate_atif(atif) == []
    assert [s["source"] for s in atif["steps"]] == ["system", "user", "agent", "agent"]
    assert atif["steps"][0]["message"]  # the system prompt the model saw
    names = {t["name"] for t in atif["agent"]["extra"]["tool_definitions"]}
    assert {"write", "bash", "read"} <= names
    both = atif["steps"][2]  # one model response, both of its tool calls, both results
    assert [c["function_name"] for c in both["tool_calls"]] == ["write", "write"]
    assert [r["source_call_id"] for r in both["observation"]["results"]] == [c["tool_call_id"] for c in both["tool_calls"]]
    assert both["metrics"]["prompt_tokens"] > 0
    assert atif["steps"][3]["metrics"]["completion_tokens"] > 0
    assert atif["final_metrics"]["total_steps"] == 4
    assert atif["extra"]["rollout"]["passed"] is True
    trajectory = json.loads((out / "rollouts/two/0/trajectory.json").read_text())
    assert [r["toolCalls"] for r in trajectory["turns"][0]["responses"]] == [2, 0]
    assert all("usage" in r for r in trajectory["turns"][0]["responses"])
    assert trajectory["system"]

    broken = {**atif, "steps": [{**atif["steps"][1], "step_id": 2, "tool_calls": []}]}
    assert validate_atif(broken) == [
        "steps[0].step_id must be 1 (sequential from 1)",
        "steps[0].tool_calls is only allowed on agent steps",
    ]

    # The same export from the session store of an interactive thread.
    home = tmp_path / "home"
    env = {**os.environ, "RODER_HOME": str(home), "RODER_MOCK_SCRIPT": str(script)}
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", "Write a and b.", "--provider", "mock", "--mode", "bypass"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    listed = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "sessions", "list", "--json"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    thread_id = json.loads(listed)[0]["id"]
    exported = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "sessions", "export", thread_id, "--format", "atif"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    document = json.loads(exported.stdout)
    assert validate_atif(document) == []
    assert document["session_id"] == thread_id
    assert [s["source"] for s in document["steps"]] == ["user", "agent", "agent"]


def test_logprobs_asked_for_by_a_task_reach_the_trajectories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roder_home: Path
) -> None:
    """Both OpenAI dialects, over loopback SSE: the request asks for logprobs, the stream's
    per-token logprobs are kept per model call in trajectory.json and atif.json."""
    from roder_core.testing.fake_server import ThreadedFakeServer

    script = [{"text": "Hello there, friend.", "chunk_size": 6}]
    pieces = ["Hello ", "there,", " frien", "d."]
    with ThreadedFakeServer(script) as chat, ThreadedFakeServer(script) as responses:
        (roder_home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{chat.base_url}"\nmodels = ["m"]\n'
        )
        line = {
            "id": "lp",
            "prompt": "Say hi.",
            "logprobs": 2,
            "env": {"OPENAI_BASE_URL": responses.base_url, "OPENAI_API_KEY": "sk-test-loopback"},
        }
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(json.dumps(line) + "\n")
        for provider, model in (("local", "m"), ("openai", "fake-model")):
            code, _, err = run_cli(
                capsys,
                "batch",
                tasks,
                "--out",
                tmp_path / provider,
                "--workers",
                "1",
                "--no-progress",
                "--provider",
                provider,
                "--model",
                model,
            )
            assert code == 0, err
    assert chat.calls[0].json["logprobs"] is True
    assert chat.calls[0].json["top_logprobs"] == 2
    assert "message.output_text.logprobs" in responses.calls[0].json["include"]
    assert responses.calls[0].json["top_logprobs"] == 2
    for provider in ("local", "openai"):
        rollout = tmp_path / provider / "rollouts/lp/0"
        [response] = json.loads((rollout / "trajectory.json").read_text())["turns"][0]["responses"]
        assert [t["token"] for t in response["logprobs"]] == pieces, provider
        assert [len(t["top_logprobs"]) for t in response["logprobs"]] == [2] * 4
        atif = json.loads((rollout / "atif.json").read_text())
        assert validate_atif(atif) == []
        metrics = atif["steps"][-1]["metrics"]
        assert metrics["logprobs"] == [-0.01, -0.02, -0.03, -0.04]
        assert metrics["extra"]["tokens"] == pieces


def test_token_ids_a_server_returns_are_kept_per_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roder_home: Path
) -> None:
    """vLLM's ``return_token_ids`` over loopback SSE: each call's prompt and answer token ids
    (tool-call arguments included) land in trajectory.json and in atif.json's metrics."""
    from roder_core.testing.fake_server import ThreadedFakeServer, token_id

    script = [
        {"text": "Looking.", "chunk_size": 4, "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "Said hi.", "chunk_size": 4},
    ]
    with ThreadedFakeServer(script) as server:
        (roder_home / "config.toml").write_text(
            f'[providers.vllm]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\nmodels = ["m"]\n'
        )
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(json.dumps({"id": "ids", "prompt": "Say hi.", "token_ids": True}) + "\n")
        out = tmp_path / "out"
        code, _, err = run_cli(
            capsys, "batch", tasks, "--out", out, "--workers", "1", "--no-progress", "--provider", "vllm", "--model", "m"
        )
        assert code == 0, err
    assert [call.json.get("return_token_ids") for call in server.calls] == [True, True]
    rollout = out / "rollouts/ids/0"
    responses = json.loads((rollout / "trajectory.json").read_text())["turns"][0]["responses"]
    first, second = (r["tokenIds"]["completion"] for r in responses)
    arguments = json.loads(server.calls[1].json["messages"][2]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"command": "echo hi"}
    assert first[:2] == [token_id("Look"), token_id("ing.")] and len(first) > 2  # then the call's arguments
    assert second == [token_id("Said"), token_id(" hi.")]
    first_prompt, second_prompt = (r["tokenIds"]["prompt"] for r in responses)
    assert first_prompt and all(isinstance(i, int) for i in first_prompt)
    assert len(second_prompt) > len(first_prompt)  # the second call's prompt holds the first answer
    atif = json.loads((rollout / "atif.json").read_text())
    assert validate_atif(atif) == []
    metrics = [step["metrics"] for step in atif["steps"] if "metrics" in step]
    assert [m["completion_token_ids"] for m in metrics] == [r["tokenIds"]["completion"] for r in responses]
    assert [m["prompt_token_ids"] for m in metrics] == [first_prompt, second_prompt]
