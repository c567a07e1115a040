"""`roder batch` end to end: several tasks against the mock engine and against the loopback
provider server, on the local process pool and on a local Ray instance, with identical outputs;
a task whose score fails, one denied by policy, one that hits its deadline, one that finishes
within the deadline's reserve, a git workspace at a ref with setup commands, and --repeat."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from roder_core.turn.runner import LEDGER_NOTICE, RESERVE_NOTICE
from tests.batch.conftest import normalized_outputs, result, run_cli, steps, write_jsonl, write_script

# Usage is given: otherwise the model (mock or loopback server) counts about a token per four
# prompt characters, and the prompt holds the rollout's scratch path, whose length follows the
# worker's pid (pids wrap at pid_max, so a local and a Ray worker can differ by a digit).
USAGE = {"input_tokens": 1000, "output_tokens": 10}
FIX = [
    {
        "text": "Fixing add.",
        "tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}],
        "usage": USAGE,
    },
    {"text": "Fixed: add now adds.", "usage": USAGE},
]
WRONG = [
    {
        "text": "Taking notes.",
        "tool_calls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "looked\n"}}],
        "usage": USAGE,
    },
    {"text": "Done.", "usage": USAGE},
]
SCORE = "grep -q 'a + b' calc.py"


@pytest.fixture
def calc(tmp_path: Path) -> Path:
    repo = tmp_path / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return repo


def mock_tasks(tmp_path: Path, calc: Path) -> Path:
    def script(name: str, steps: list[dict[str, Any]]) -> dict[str, str]:
        return {"RODER_MOCK_SCRIPT": str(write_script(tmp_path / f"{name}.json", steps))}

    # Timings leave room for a loaded machine: what matters is which side of a deadline a step
    # lands on, and every step is far to one side (the slow answer would stream for 45 s).
    slow = [{"text": "thinking " * 200, "chunk_size": 4, "delay_ms": 100}]
    reserve = [
        {
            "text": "x" * 60,
            "chunk_size": 1,
            "delay_ms": 100,
            "tool_calls": [{"name": "write", "arguments": {"path": "partial.txt", "content": "half\n"}}],
        },
        {"text": "Wrapping up."},
    ]
    clamped = [
        {"text": "Waiting.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30", "timeout": 60}}]},
        {"text": "Stopped waiting."},
    ]
    return write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "fix",
                "prompt": "Fix add.",
                "workspace": str(calc),
                "score": SCORE,
                "env": script("fix", FIX),
                "metadata": {"kind": "bugfix"},
            },
            {"id": "wrong-fix", "prompt": "Fix add.", "workspace": str(calc), "score": SCORE, "env": script("wrong", WRONG)},
            {
                "id": "denied",
                "prompt": "Fix add.",
                "workspace": str(calc),
                "score": SCORE,
                "mode": "plan",
                "env": script("denied", FIX),
            },
            {"id": "slow", "prompt": "Think hard.", "deadline": 1, "env": script("slow", slow)},
            {
                "id": "reserve",
                "prompt": "Work until told.",
                "deadline": 15,
                "reserve": 12,  # the reserve begins 3 s in, while the first answer streams for 6 s
                "env": script("reserve", reserve),
                "taskLedgerRequired": True,
            },
            {"id": "clamped", "prompt": "Wait for it.", "deadline": 16, "reserve": 10, "env": script("clamped", clamped)},
        ],
    )


def _batch(capsys: pytest.CaptureFixture[str], tasks: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "batch", tasks, "--out", out, "--workers", "2", "--no-progress", *extra)


def _check_mock_batch(out: Path, stdout: str) -> None:
    fix = result(out, "fix")
    assert fix["passed"] and fix["failure_cause"] is None and fix["exit_reason"] == "completed", fix
    assert fix["score"] == {"command": SCORE, "exit_code": 0, "timed_out": False}
    assert fix["tool_calls"] == 1
    assert fix["model_calls"] == 2
    assert fix["tokens"] > 0
    assert fix["metadata"] == {"kind": "bugfix"}
    assert fix["provider"] == "mock"
    assert fix["final_message"] == "Fixed: add now adds."
    diff = (out / "rollouts/fix/0/workspace.diff").read_text()
    assert "-    return a - b" in diff
    assert "+    return a + b" in diff
    trajectory = json.loads((out / "rollouts/fix/0/trajectory.json").read_text())
    assert trajectory["exitReason"] == "completed"
    assert trajectory["rollout"]["passed"] is True
    call = next(s for s in steps(out, "fix") if s["type"] == "tool_call")
    assert call["name"] == "edit"
    assert call["arguments"]["new_string"] == "a + b"
    assert call["result"]["isError"] is False
    assert "durationMs" in call["result"]
    assert [m["role"] for m in trajectory["messages"]] == ["user", "assistant", "tool", "assistant"]
    thread_lines = (out / "rollouts/fix/0/thread.jsonl").read_text().splitlines()
    assert json.loads(thread_lines[0])["type"] == "header"
    assert any(json.loads(line).get("method") == "turn/completed" for line in thread_lines[1:])

    wrong = result(out, "wrong-fix")
    assert not wrong["passed"]
    assert wrong["failure_cause"] == "score_failure"
    assert wrong["score"]["exit_code"] == 1
    assert "[exit 1]" in (out / "rollouts/wrong-fix/0/score.log").read_text()
    assert "+looked" in (out / "rollouts/wrong-fix/0/workspace.diff").read_text()

    denied = result(out, "denied")
    assert not denied["passed"]
    assert denied["failure_cause"] == "policy_denial"
    assert denied["policy_denials"] == 1
    assert (out / "rollouts/denied/0/workspace.diff").read_text() == ""

    slow = result(out, "slow")
    assert not slow["passed"]
    assert slow["failure_cause"] == "timeout"
    assert slow["exit_reason"] == "timeout"
    assert slow["turn_status"] == "interrupted"
    assert slow["timings"]["agent_s"] < 30  # cut at its 1 s deadline, not streamed for 45 s

    reserve = result(out, "reserve")
    assert reserve["exit_reason"] == "completed", (reserve["exit_reason"], reserve["failure_cause"], reserve["timings"])
    assert reserve["passed"], (reserve["failure_cause"], reserve["score"])
    assert reserve["reserve_s"] == 12
    told = [s["text"] for s in steps(out, "reserve") if s["type"] == "user"]
    assert told[1] == RESERVE_NOTICE + LEDGER_NOTICE  # told to finish (and checkpoint) once the reserve began

    # A command that would outlive the deadline is cut short so the model keeps its reserve.
    clamped = result(out, "clamped")
    assert clamped["passed"], clamped
    assert clamped["exit_reason"] == "completed", clamped
    assert clamped["timings"]["agent_s"] < 16, clamped
    bash = next(s for s in steps(out, "clamped") if s["type"] == "tool_call")
    cut = re.search(r"timed out after (\d+\.\d) s", bash["result"]["text"])
    assert cut is not None, bash["result"]["text"]
    assert float(cut.group(1)) < 12  # at the reserve, 6 s in, not after its own 30 s
    assert [s["text"] for s in steps(out, "clamped") if s["type"] == "user"][1] == RESERVE_NOTICE

    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"] == 6
    assert summary["passed"] == 3
    assert summary["pass_rate"] == 0.5
    assert summary["failures_by_cause"] == {
        "timeout": 1,
        "policy_denial": 1,
        "provider_failure": 0,
        "score_failure": 1,
        "score_refused": 0,
        "score_timeout": 0,
        "setup_failure": 0,
        "agent_failure": 0,
        "environment_unavailable": 0,
        "infra_failure": 0,
        "error": 0,
    }
    assert result(out, "reserve")["deadline_reserve_hit"]
    assert not fix["deadline_reserve_hit"]
    assert summary["tokens"]["total_tokens"] == sum(result(out, t)["tokens"] for t in summary["per_task"])
    assert "pass rate" in stdout
    assert "50.0%" in stdout
    assert "failed: score failure" in stdout


def test_mock_batch_locally_and_on_ray_gives_identical_outputs(
    tmp_path: Path, calc: Path, capsys: pytest.CaptureFixture[str], ray_instance: None
) -> None:
    tasks = mock_tasks(tmp_path, calc)
    code, stdout, _ = _batch(capsys, tasks, tmp_path / "local", "--provider", "mock")
    assert code == 0
    _check_mock_batch(tmp_path / "local", stdout)
    code, stdout, _ = _batch(capsys, tasks, tmp_path / "ray", "--provider", "mock", "--backend", "ray")
    assert code == 0
    _check_mock_batch(tmp_path / "ray", stdout)
    # Everything but the rollouts the clock cuts is identical: their output holds timings, and
    # how much of a long answer had streamed at each checkpoint depends on the machine's speed.
    timed = frozenset({"slow", "clamped", "reserve"})
    local = normalized_outputs(tmp_path / "local", skip_tasks=timed)
    assert local == normalized_outputs(tmp_path / "ray", skip_tasks=timed)
    # result, thread, trajectory, atif, diff and model.patch per rollout; score.log for three; no
    # roder.log, since a clean rollout logs nothing (the profile leaving out network extensions is
    # not a warning)
    assert len(local) == 3 * 6 + 3
    assert not any(key.endswith("roder.log") for key in local)
    assert (calc / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # the source is untouched


def _loopback_batch(
    tmp_path: Path, calc: Path, capsys: pytest.CaptureFixture[str], name: str, *extra: str
) -> tuple[Path, list[Any]]:
    """The same tasks against a real provider engine (OpenAI Responses wire) talking to one
    loopback server per task (each server plays its task's script)."""
    refused = {"status": 401, "error": {"message": "bad key"}}
    # An infrastructure failure (a refused key) is tried again: "flaky" passes on its second
    # attempt, "broken" is recorded after its third.
    scripts = {"fix": FIX, "wrong-fix": WRONG, "broken": [refused] * 3, "flaky": [refused, *FIX]}
    out = tmp_path / name
    with contextlib.ExitStack() as stack:
        servers = {task: stack.enter_context(ThreadedFakeServer(steps)) for task, steps in scripts.items()}
        tasks = write_jsonl(
            tmp_path / f"tasks-{name}.jsonl",
            [
                {
                    "id": task,
                    "prompt": "Fix add.",
                    "workspace": str(calc),
                    "score": SCORE,
                    "env": {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-loopback"},
                    # the key is for the runtime; setup and score commands never see it
                    "setup": 'test -z "$OPENAI_API_KEY" && test -n "$OPENAI_BASE_URL"',
                }
                for task, server in servers.items()
            ],
        )
        code, _, err = _batch(capsys, tasks, out, "--provider", "openai", "--model", "fake-model", *extra)
    assert code == 0, err
    return out, [server.calls for server in servers.values()]


def test_loopback_provider_batch_locally_and_on_ray_gives_identical_outputs(
    tmp_path: Path, calc: Path, capsys: pytest.CaptureFixture[str], ray_instance: None
) -> None:
    local, calls = _loopback_batch(tmp_path, calc, capsys, "local")
    assert [len(c) for c in calls][:2] == [2, 2]  # two model calls per scripted task, over HTTP
    assert result(local, "fix")["passed"]
    assert result(local, "fix")["provider"] == "openai"
    assert result(local, "wrong-fix")["failure_cause"] == "score_failure"
    broken = result(local, "broken")
    assert broken["failure_cause"] == "provider_failure"
    assert broken["error"]["kind"] == "auth"
    assert broken["attempts"] == 3
    assert [a["cause"] for a in broken["discarded_attempts"]] == ["provider_failure"] * 2
    assert [len(c) for c in calls][2:] == [3, 3]
    flaky = result(local, "flaky")
    assert flaky["passed"]
    assert flaky["attempts"] == 2
    assert flaky["discarded_attempts"][0]["attempt"] == 1
    assert "bad key" in flaky["discarded_attempts"][0]["error"]
    assert flaky["host"]["hostname"]
    ray, _ = _loopback_batch(tmp_path, calc, capsys, "ray", "--backend", "ray")
    # The task lines differ only in their server's port, hence in their digest.
    strip = {"task_digest"}
    normalized = [
        {
            k: ({kk: vv for kk, vv in v.items() if kk not in strip} if isinstance(v, dict) else v)
            for k, v in normalized_outputs(out).items()
        }
        for out in (local, ray)
    ]
    assert normalized[0] == normalized[1]


def test_git_workspace_at_a_ref_with_setup_and_repeat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    (repo / "version.txt").write_text("one\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD")
    (repo / "version.txt").write_text("two\n")
    git("commit", "-qam", "two")
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "at-ref",
                "prompt": "Look around.",
                "workspace": {"git": str(repo), "ref": first},
                "setup": ["echo prepared > setup.txt"],
                "score": "grep -q one version.txt && test -f setup.txt",
            },
            {"id": "bad-setup", "prompt": "p", "setup": "exit 3"},
            {"id": "bad-ref", "prompt": "p", "workspace": {"git": str(repo), "ref": "no-such-ref"}},
        ],
    )
    out = tmp_path / "out"
    code, _, err = _batch(capsys, tasks, out, "--provider", "mock", "--repeat", "2")
    assert code == 0, err
    for index in (0, 1):
        at_ref = result(out, "at-ref", index)
        assert at_ref["passed"], at_ref
        assert (out / f"rollouts/at-ref/{index}/workspace.diff").read_text() == ""  # setup is not the agent's work
        assert (out / f"rollouts/at-ref/{index}/setup.log").read_text() == "$ echo prepared > setup.txt\n[exit 0]\n"
    bad_setup = result(out, "bad-setup")
    assert bad_setup["failure_cause"] == "setup_failure"
    assert "[exit 3]" in (out / "rollouts/bad-setup/0/setup.log").read_text()
    bad_ref = result(out, "bad-ref")
    assert bad_ref["failure_cause"] == "setup_failure"
    assert "no-such-ref" in bad_ref["error"]["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"] == 6
    assert summary["pass_at_k"] == round(1 / 3, 4)
    assert summary["per_task"]["at-ref"] == {"rollouts": 2, "passed": 2, "pass_rate": 1.0, "mean_reward": 1.0}
    # More rollouts per task later: only the new ones run.
    code, _, err = _batch(capsys, tasks, out, "--provider", "mock", "--repeat", "3")
    assert code == 0
    assert "6 already recorded, 3 to run" in err


def test_bad_input_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"id": "t", "prompt": "p"}])
    code, _, err = _batch(capsys, tmp_path / "missing.jsonl", tmp_path / "out")
    assert code == 2
    assert "cannot read task file" in err
    code, _, err = _batch(capsys, tasks, tmp_path / "out", "--provider", "nope")
    assert code == 2
    assert "unknown provider 'nope'" in err
    code, _, err = _batch(capsys, tasks, tmp_path / "out", "--profile", "nope")
    assert code == 2
    assert "unknown capability profile" in err
    code, _, err = _batch(capsys, tasks, tmp_path / "out", "--repeat", "0")
    assert code == 2
    assert "at least 1" in err
    assert not (tmp_path / "out" / "rollouts").exists()
    code, _, _ = _batch(capsys, tasks, tmp_path / "out", "--provider", "mock")
    assert code == 0
    code, _, err = _batch(capsys, tasks, tmp_path / "out", "--provider", "mock", "--deadline", "30")
    assert code == 2
    assert "deadline: None before, 30.0 now" in err


def test_network_only_when_the_task_grants_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Commands run in their own network namespace (no network) unless the task says otherwise."""
    probe = write_script(
        tmp_path / "probe.json",
        [
            {"text": "Checking.", "tool_calls": [{"name": "bash", "arguments": {"command": "readlink /proc/self/ns/net"}}]},
            {"text": "Checked."},
        ],
    )
    env = {"RODER_MOCK_SCRIPT": str(probe)}
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {"id": "offline", "prompt": "p", "env": env},
            {"id": "online", "prompt": "p", "env": env, "network": True},
        ],
    )
    code, _, err = _batch(capsys, tasks, tmp_path / "out", "--provider", "mock")
    assert code == 0, err

    def command_output(task: str) -> str:
        return next(s["result"]["text"] for s in steps(tmp_path / "out", task) if s["type"] == "tool_call")

    host_namespace = os.readlink("/proc/self/ns/net")
    online, offline = command_output("online"), command_output("offline")
    assert host_namespace in online
    if "sandbox workspace-write" not in offline:
        pytest.skip(f"bubblewrap is unavailable here, so commands are not isolated: {offline}")
    assert host_namespace not in offline
    assert "net:[" in offline


def test_a_ray_node_without_the_provider_key_fails_preflight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, ray_instance: None
) -> None:
    """The key is in the driver's environment only (keys are never forwarded): the node has none."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-driver-only-0123456789abcdef0123456789")
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"id": "t", "prompt": "p"}])
    out = tmp_path / "out"
    code, _, err = _batch(capsys, tasks, out, "--provider", "openai", "--model", "fake-model", "--backend", "ray")
    assert code == 2, err
    assert "preflight failed on 1 of 1 Ray nodes" in err
    assert "OPENAI_API_KEY is not set" in err
    assert "nothing was run" in err
    assert not (out / "rollouts").exists()
