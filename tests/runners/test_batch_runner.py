"""``roder batch --runner NAME``: the same task file runs with the agent's tools on an ssh host,
unchanged. The rollout gets a folder of its own there holding the prepared workspace; the
result, diff and score come back to this machine as for a local run, and the folder is removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.batch.conftest import result, write_jsonl, write_script
from tests.runners.sshd import Sshd

pytestmark = pytest.mark.e2e


async def test_a_batch_runs_its_tools_on_the_ssh_host(tmp_path: Path, sshd: Sshd, roder_home: Path) -> None:
    import asyncio

    from roder_tui.cli import main

    remote_base = tmp_path / "remote-base"
    remote_base.mkdir()
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote_base))
    source = tmp_path / "calc"
    source.mkdir()
    (source / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    steps = [
        {"text": "Where am I?", "tool_calls": [{"name": "bash", "arguments": {"command": "pwd > where.txt"}}]},
        {
            "text": "Fixing.",
            "tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}],
        },
        {"text": "Fixed."},
    ]
    tasks = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "fix",
                "prompt": "Fix add.",
                "workspace": str(source),
                "score": "grep -q 'a + b' calc.py",
                "env": {"RODER_MOCK_SCRIPT": str(write_script(tmp_path / "fix.json", steps))},
            }
        ],
    )
    out = tmp_path / "out"
    args = ["batch", str(tasks), "--out", str(out), "--workers", "1", "--no-progress", "--provider", "mock", "--runner", "box"]
    code = await asyncio.to_thread(main, args)
    assert code == 0
    fix = result(out, "fix")
    assert fix["passed"], fix
    assert fix["runner"]["name"] == "box" and fix["runner"]["kind"] == "ssh"
    rollout_dir = fix["runner"]["runnerWorkspace"]
    assert rollout_dir.startswith(str(remote_base.resolve()) + "/roder-rollout-")
    diff = (out / "rollouts/fix/0/workspace.diff").read_text()
    assert "+    return a + b" in diff and "where.txt" in diff
    # the command ran in the rollout's folder on the host, which is gone afterwards
    assert f"+{rollout_dir}" in diff
    assert list(remote_base.iterdir()) == []
    assert (source / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_an_unknown_runner_stops_the_batch_before_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from roder_tui.cli import main

    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{"id": "t", "prompt": "hi"}])
    code = main(
        ["batch", str(tasks), "--out", str(tmp_path / "out"), "--no-progress", "--provider", "mock", "--runner", "nowhere"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown runner 'nowhere'" in err, err
    assert not (tmp_path / "out" / "rollouts").exists()
