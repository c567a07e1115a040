"""MCP servers that misbehave, as real processes: one stuck before its handshake and one that
ignores the end of its stdin and SIGTERM at shutdown must not hold up `roder -p`'s exit (both are
killed), one writing non-JSON to stdout is reported in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.ecosystem.harness import FIXTURE_SERVER

HANGING_SERVER = Path(__file__).with_name("mcp_hanging_server.py")


def roder(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RODER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_print_mode_exits_and_kills_a_server_hung_in_initialize(workspace: Path, roder_home: Path) -> None:
    pid_file = roder_home / "hung.pid"
    (roder_home / "config.toml").write_text(
        f"[mcp]\nstartup_wait = 1\n\n[mcp.servers.hung]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(HANGING_SERVER))}, {json.dumps(str(pid_file))}]\n"
    )
    done = roder("-p", "hello", "--provider", "mock", home=roder_home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "Mock reply" in done.stdout
    pid = int(pid_file.read_text())
    assert not alive(pid), "the hung server outlived roder"
    assert "Traceback" not in done.stderr


def test_print_mode_exits_and_kills_a_connected_server_that_ignores_shutdown(workspace: Path, roder_home: Path) -> None:
    pid_file = roder_home / "hung.pid"
    (roder_home / "config.toml").write_text(
        f"[mcp]\nstartup_wait = 25\n\n[mcp.servers.stuck]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(HANGING_SERVER))}, {json.dumps(str(pid_file))}, "at-exit"]\n'
    )
    done = roder("-p", "hello", "--provider", "mock", home=roder_home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "Mock reply" in done.stdout
    pid = int(pid_file.read_text())
    assert not alive(pid), "the server that ignored SIGTERM outlived roder"
    [log] = roder_home.rglob("stuck.log")
    assert "hanging server: stdin closed; not exiting" in log.read_text()  # it was connected, then told to stop
    assert "Traceback" not in done.stderr


def test_non_json_stdout_is_one_clear_line_naming_the_server(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(
        f"[mcp.servers.noisy]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(FIXTURE_SERVER))}, "noisy-stdio"]\n'
    )
    listed = roder("mcp", "list", "--json", home=roder_home, cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    servers = json.loads(listed.stdout)["servers"]
    assert [(s["name"], s["status"]) for s in servers] == [("noisy", "connected")]  # the junk line is skipped
    lines = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, listed.stderr
    assert "'noisy'" in lines[0]
    assert "not JSON-RPC" in lines[0]
    assert "Fixture MCP server v1 ready!" in lines[0]
    assert "Traceback" not in listed.stderr
    assert "pydantic" not in listed.stderr.lower()


def test_print_mode_runs_mcp_prompts_and_attaches_mentioned_resources(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(
        f'[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(FIXTURE_SERVER))}, "stdio"]\n'
    )
    prompted = roder("-p", "/mcp__fixture__review src/app.py speed", "--provider", "mock", home=roder_home, cwd=workspace)
    assert prompted.returncode == 0, prompted.stderr
    assert 'starting with "Please review src/app.py, focusing on speed."' in prompted.stdout  # the mock echoes its input
    mentioned = roder(
        "-p",
        "what does @fixture:fixture://notes/readme say?",
        "--provider",
        "mock",
        "--output-format",
        "json",
        home=roder_home,
        cwd=workspace,
    )
    assert mentioned.returncode == 0, mentioned.stderr
    stored = next(roder_home.rglob(f"{json.loads(mentioned.stdout)['thread_id']}.jsonl")).read_text()
    assert "The answer is 42." in stored  # the resource went to the model as an attached file
    missing = roder("-p", "what does @fixture:fixture://nope say?", "--provider", "mock", home=roder_home, cwd=workspace)
    assert missing.returncode == 2
    assert "fixture://nope" in missing.stderr
    app_command = roder("-p", "/new", "--provider", "mock", home=roder_home, cwd=workspace)
    assert app_command.returncode == 2
    assert "app command" in app_command.stderr
