"""A Harbor task's ``[verifier] env`` reaches the score alone: the agent's commands never see it,
and no output file (trajectories, thread, logs, diffs, results, summary, predictions) holds it,
even when the agent hunts for it and the score prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.batch.conftest import result, run_cli, steps, write_script

SECRET = "verifier-only-9f3c2a7b5d1e"
#: Not secret-looking at all: the verifier's env is the verifier's whatever it is called.
PLAIN_NAME = "EXPECTED_ANSWER"
PLAIN_VALUE = "forty-two-and-a-half"


@pytest.mark.timeout(300)
def test_verifier_env_reaches_only_the_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "tasks" / "judge"
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "task.toml").write_text(
        f'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[verifier.env]\nJUDGE_TOKEN = "{SECRET}"\n'
        f'{PLAIN_NAME} = "{PLAIN_VALUE}"\n'
    )
    (folder / "instruction.md").write_text("Write the answer to answer.txt.\n")
    (folder / "environment" / "README").write_text("the app\n")
    # The score needs both values (and prints them, as a careless verifier would).
    (folder / "tests" / "test.sh").write_text(
        '#!/bin/bash\necho "judge=$JUDGE_TOKEN expected=$EXPECTED_ANSWER"\n'
        f'if [ "$JUDGE_TOKEN" = "{SECRET}" ] && [ "$(cat answer.txt)" = "$EXPECTED_ANSWER" ]; then\n'
        '  echo 1 > "$LOGS_DIR/verifier/reward.txt"\nelse\n  echo 0 > "$LOGS_DIR/verifier/reward.txt"\nfi\n'
    )
    hunt = (
        'echo "token=[$JUDGE_TOKEN] expected=[$EXPECTED_ANSWER]"; env | grep -c -e JUDGE -e EXPECTED; '
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c JUDGE_TOKEN; echo hunted"
    )
    script = write_script(
        tmp_path / "agent.json",
        [
            {
                "text": "Looking for the verifier's settings.",
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": hunt}},
                    {"name": "write", "arguments": {"path": "answer.txt", "content": PLAIN_VALUE}},
                ],
            },
            {"text": f"Done; I wrote {PLAIN_VALUE}."},
        ],
    )
    out = tmp_path / "out"
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(script))  # forwarded to the worker as a RODER_* setting
    code, _, err = run_cli(
        capsys, "batch", tmp_path / "tasks", "--out", out, "--workers", "1", "--no-progress", "--provider", "mock"
    )
    assert code == 0, err
    judged = result(out, "judge")
    assert judged["passed"], (out / "rollouts/judge/0/score.log").read_text()  # the score had both values
    listing = next(s for s in steps(out, "judge") if s["type"] == "tool_call")["result"]["text"]
    assert "token=[] expected=[]" in listing
    assert "hunted" in listing
    assert [line for line in listing.splitlines() if line.strip().isdigit()] == ["0", "0"]
    assert "[redacted:JUDGE_TOKEN]" in (out / "rollouts/judge/0/score.log").read_text()
    written = [path for path in out.rglob("*") if path.is_file()]
    assert {p.name for p in written} >= {"result.json", "trajectory.json", "atif.json", "thread.jsonl", "score.log"}
    for path in written:
        data = path.read_bytes()
        assert SECRET.encode() not in data, path
        assert f"JUDGE_TOKEN={SECRET}".encode() not in data, path
    # The plain value is the agent's own answer too, so it may appear; its variable never does.
    trajectory = json.loads((out / "rollouts/judge/0/trajectory.json").read_text())
    assert "JUDGE_TOKEN=" not in json.dumps(trajectory)
