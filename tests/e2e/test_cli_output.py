"""What the `roder` program prints around its answers: a reader that leaves early (`| head`) ends
it quietly, warnings come once with one prefix, and a profile's expected skips are not warnings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ecosystem.harness import FIXTURE_SERVER

pytestmark = pytest.mark.e2e


def roder(*args: str, home: Path, cwd: Path, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RODER_HOME": str(home)}
    env.pop("RODER_MOCK_SCRIPT", None)
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "hello", "--provider", "mock"],
        ["-p", "hello", "--provider", "mock", "--output-format", "stream-json"],
        ["tools", "list"],
        ["models"],
        ["providers", "list"],
        ["sessions", "list"],
        ["trust", "--list"],
        ["--help"],
    ],
)
def test_a_closed_stdout_ends_quietly(args: list[str], workspace: Path, roder_home: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, like `| head -0`
    try:
        done = roder(*args, home=roder_home, cwd=workspace, stdout=write_end)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr
    assert "Errno 32" not in done.stderr
    assert "Broken pipe" not in done.stderr
    assert done.stderr == "", done.stderr
    assert done.returncode in (0, 141)


def test_warnings_once_with_one_prefix_and_no_profile_skips(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(
        f"[mcp.servers.noisy]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(FIXTURE_SERVER))}, "noisy-stdio"]\n'
    )
    offline = roder("--profile", "offline", "-p", "hello", "--provider", "mock", home=roder_home, cwd=workspace)
    assert offline.returncode == 0, offline.stderr
    assert "not loaded" not in offline.stderr  # the offline profile dropping network providers is expected
    done = roder("-p", "hello", "--provider", "mock", home=roder_home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    noise = [line for line in lines if "not JSON-RPC" in line]
    assert len(noise) == 1
    assert noise[0].startswith("roder: MCP server 'noisy'")
    assert "roder: roder:" not in noise[0]
    assert len(lines) == len(set(lines)), lines


def test_batch_runs_do_not_warn_about_the_profile(tmp_path: Path, roder_home: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "one", "prompt": "say hi"}) + "\n")
    done = roder(
        "batch", str(tasks), "--out", str(tmp_path / "out"), "--provider", "mock", "--no-progress", home=roder_home, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "not loaded" not in done.stderr, done.stderr


def test_trust_list_says_when_nothing_is_recorded(workspace: Path, roder_home: Path) -> None:
    empty = roder("trust", "--list", home=roder_home, cwd=workspace)
    assert empty.returncode == 0 and empty.stdout.startswith("no trust decisions recorded yet"), empty.stdout
    assert roder("trust", str(workspace), home=roder_home, cwd=workspace).returncode == 0
    listed = roder("trust", "--list", home=roder_home, cwd=workspace)
    assert listed.stdout.split() == ["trusted", str(workspace.resolve())]
    assert json.loads(roder("trust", "--list", "--json", home=roder_home, cwd=workspace).stdout) == {
        str(workspace.resolve()): True
    }
