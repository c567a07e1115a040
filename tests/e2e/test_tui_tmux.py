"""End to end: the real ``roder`` app in tmux against the loopback model server.

Types a prompt, approves the model's bash call in the approval dialog, and sees the answer that
was produced from the command's real output.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from roder_core.testing.fake_server import FakeModelServer, ThreadedFakeServer

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


STEPS = [
    {"text": "I will run it.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo tmux-e2e-$((40+2))"}}]},
    {"text": "The command printed tmux-e2e-42. ANSWER-OK"},
]


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    @classmethod
    def start(cls, name: str, command: str, env: dict[str, str], cwd: Path, size: tuple[int, int] = (100, 32)) -> Tmux:
        """``command`` in a new session ``roder`` on a server of its own (``name`` plus a random
        tail), ``size`` columns by rows; the pane stays after the command, printing its exit
        status as ``roder-exited-N``."""
        tmux = cls(f"{name}-{uuid.uuid4().hex[:8]}")
        shell = f"{command}; echo roder-exited-$?; sleep 30"
        width, height = size
        session = ["new-session", "-d", "-s", "roder", "-x", str(width), "-y", str(height), "-c", str(cwd), shell]
        subprocess.run(["tmux", "-L", tmux.socket, *session], env=env, check=True, timeout=10)
        return tmux

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=10).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "roder")

    def wait_until(self, ok: Callable[[str], bool], what: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if ok(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what} never happened; the screen was:\n{screen}")

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        return self.wait_until(lambda screen: text in screen, f"{text!r} appearing", timeout)


def test_prompt_approve_bash_and_see_the_answer(roder_home: Path, workspace: Path) -> None:
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        _run_app_in_tmux(server, roder_home, workspace)


def _start(server: FakeModelServer, roder_home: Path, workspace: Path, *flags: str) -> Tmux:
    """``roder`` on the loopback server in a new tmux session (100x32)."""
    url = server.base_url
    (roder_home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\n'
        'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TMUX")}
    env.update(RODER_HOME=str(roder_home), LOCAL_API_KEY="sk-local-test", TERM="xterm-256color")
    roder = " ".join(
        [
            "env",
            *[f"{k}={v}" for k, v in (("RODER_HOME", str(roder_home)), ("LOCAL_API_KEY", "sk-local-test"))],
            sys.executable,
            "-m",
            "roder_tui.cli",
            "--provider",
            "local",
            "--model",
            "my-model",
            "--sandbox",
            "off",
            *flags,
        ]
    )
    return Tmux.start("roder-e2e", roder, env, workspace)


def _run_app_in_tmux(server: FakeModelServer, roder_home: Path, workspace: Path) -> None:
    tmux = _start(server, roder_home, workspace)
    try:
        tmux.wait_for("idle")  # the status bar: the runtime is up
        tmux.run("send-keys", "-t", "roder", "-l", "please run the command")
        tmux.run("send-keys", "-t", "roder", "Enter")
        screen = tmux.wait_for("Allow bash?")
        assert "echo tmux-e2e-$((40+2))" in screen
        # $((...)) is not a plain command: it can be approved once or for the session, never saved
        # as a rule (no rule could allow it)
        assert "allow once" in screen
        assert "always allow" not in screen
        tmux.run("send-keys", "-t", "roder", "y")
        screen = tmux.wait_for("ANSWER-OK")
        assert "tmux-e2e-42" in screen  # the card shows the command's real output
        calls = server.calls
        assert len(calls) == 2
        assert "tmux-e2e-42" in json.dumps(calls[1].json["messages"])  # the model got the tool result
        tmux.run("send-keys", "-t", "roder", "C-q")
        tmux.wait_for("roder-exited-0", timeout=15)
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)


REWIND_STEPS = [
    {"text": "Writing it.", "tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "version one\n"}}]},
    {"text": "Wrote version one. TURN1-OK"},
    {"text": "Rewriting.", "tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "version two\n"}}]},
    {"text": "Wrote version two. TURN2-OK"},
]


def test_rewind_restores_code_and_conversation(roder_home: Path, workspace: Path) -> None:
    """Two turns edit a file; /rewind to the second prompt with 'code and conversation' puts the
    file back and forks the thread before that prompt, with its text back in the prompt."""
    with ThreadedFakeServer(REWIND_STEPS, models=("my-model",)) as server:
        tmux = _start(server, roder_home, workspace, "--mode", "auto-edit")
        try:
            tmux.wait_for("idle")
            for prompt, done in (("write version one", "TURN1-OK"), ("now write version two", "TURN2-OK")):
                tmux.run("send-keys", "-t", "roder", "-l", prompt)
                tmux.run("send-keys", "-t", "roder", "Enter")
                tmux.wait_for(done)
            assert (workspace / "a.txt").read_text() == "version two\n"
            hint = "go back to an earlier prompt"  # /rewind's line in the completion list
            tmux.run("send-keys", "-t", "roder", "-l", "/rewind")
            tmux.wait_for(hint)
            tmux.run("send-keys", "-t", "roder", "Enter")  # runs it at once (a fully typed command)
            tmux.wait_for("Rewind to before a prompt")
            tmux.run("send-keys", "-t", "roder", "-l", "version two")
            tmux.run("send-keys", "-t", "roder", "Enter")
            tmux.wait_for("Restore the code and the conversation")
            tmux.run("send-keys", "-t", "roder", "Enter")
            screen = tmux.wait_until(lambda s: "TURN1-OK" in s and "TURN2-OK" not in s, "the fork before prompt two")
            assert "now write version two" in screen  # back in the prompt, to edit and resend
            assert (workspace / "a.txt").read_text() == "version one\n"
            tmux.run("send-keys", "-t", "roder", "C-q")
            tmux.wait_for("roder-exited-0", timeout=15)
        finally:
            subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)


def test_palette_and_help_draw_whole_on_every_open(roder_home: Path, workspace: Path) -> None:
    """The palette and help are built once while the app starts and shown again on each open: in
    a real terminal each open draws the whole screen, rows included, without another key (a
    screen built while hidden was once shown with its rows undrawn until a key was pressed)."""
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        tmux = _start(server, roder_home, workspace)
        try:
            tmux.wait_for("idle")
            for _ in range(2):
                tmux.run("send-keys", "-t", "roder", "C-p")
                screen = tmux.wait_until(lambda s: "Search for commands" in s and "New thread" in s, "the palette's rows")
                assert "start an empty thread in this folder" in screen
                tmux.run("send-keys", "-t", "roder", "-l", "Mode: plan")
                tmux.wait_until(lambda s: "read-only: the agent explores" in s and "New thread" not in s, "the search")
                tmux.run("send-keys", "-t", "roder", "Escape")
                tmux.wait_until(lambda s: "Search for commands" not in s and "Mode: plan" not in s, "the palette closed")
                tmux.run("send-keys", "-t", "roder", "F1")
                tmux.wait_until(lambda s: "Keys · esc to close" in s and "this help" in s, "the help screen")
                tmux.run("send-keys", "-t", "roder", "Escape")
                tmux.wait_until(lambda s: "Keys · esc to close" not in s, "the help closed")
            tmux.run("send-keys", "-t", "roder", "C-q")
            tmux.wait_for("roder-exited-0", timeout=15)
        finally:
            subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)


def test_sigterm_mid_turn_quits_as_ctrl_q_does(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    """SIGTERM while an answer streams: the turn is saved as interrupted, the terminal is given
    back (the shell's next line shows), the exit status is 143, and the thread resumes."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "streaming " * 400, "delay_ms": 200, "chunk_size": 10}]}))
    pid_file = tmp_path / "roder.pid"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TMUX")}
    env.update(RODER_HOME=str(roder_home), RODER_MOCK_SCRIPT=str(script), TERM="xterm-256color")
    roder = f"sh -c 'echo $$ > {pid_file}; exec {sys.executable} -m roder_tui.cli --provider mock --sandbox off'"
    tmux = Tmux.start("roder-sigterm", roder, env, workspace)
    try:
        tmux.wait_for("idle")
        tmux.run("send-keys", "-t", "roder", "-l", "tell me")
        tmux.run("send-keys", "-t", "roder", "Enter")
        tmux.wait_for("streaming streaming")  # the answer is arriving: the turn runs
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        screen = tmux.wait_for("roder-exited-143")
        assert "the running turn was interrupted; continue this thread with `roder -c`" in screen
        assert "Ask anything" not in screen  # the app's screen is gone: the terminal is the shell's again
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)
    [thread] = (roder_home / "data" / "threads").glob("*.jsonl")
    events = [json.loads(line) for line in thread.read_text().splitlines()[1:]]
    assert [e["turn"]["status"] for e in events if e.get("method") == "turn/completed"] == ["interrupted"]
    resumed = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-r", thread.stem, "-p", "go on", "--provider", "mock"],
        cwd=workspace,
        env={k: v for k, v in env.items() if k != "RODER_MOCK_SCRIPT"},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("Mock reply:")
