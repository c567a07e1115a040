"""End to end: the real ``roder`` app in tmux, 40 columns wide, against the loopback model
server: plan a workflow from a goal with f3 and n, approve it with a, answer its script step's
approval, and watch both steps complete."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.e2e.test_tui_tmux import _start

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

PLAN = {
    "name": "shout",
    "steps": [
        {"id": "look", "prompt": "Look around and say what you see."},
        {"id": "loud", "run": "printf %s {step.look} | tr a-z A-Z", "depends_on": ["look"]},
    ],
}
STEPS = [{"text": json.dumps(PLAN)}, {"text": "looked fine"}]


def test_plan_approve_and_run_a_workflow_at_40_columns(roder_home: Path, workspace: Path) -> None:
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        tmux = _start(server, roder_home, workspace)
        try:
            tmux.run("resize-window", "-t", "roder", "-x", "40", "-y", "24")
            tmux.wait_for("idle")
            tmux.run("send-keys", "-t", "roder", "F3")
            tmux.wait_for("no workflows yet")
            tmux.run("send-keys", "-t", "roder", "n")
            tmux.wait_for("Plan a workflow")
            tmux.run("send-keys", "-t", "roder", "-l", "shout what you see")
            tmux.run("send-keys", "-t", "roder", "Enter")
            screen = tmux.wait_for("shout · draft", timeout=60)
            assert "look" in screen and "loud" in screen
            tmux.run("send-keys", "-t", "roder", "a")
            tmux.wait_for("Allow bash?", timeout=60)  # ask mode: the script step asks first
            tmux.run("send-keys", "-t", "roder", "y")
            screen = tmux.wait_for("2/2 done", timeout=60)
            assert "completed" in screen
            assert len(server.calls) == 2
            tmux.run("send-keys", "-t", "roder", "Enter")  # open the highlighted step's thread
            tmux.wait_for("looked fine", timeout=30)
            tmux.run("send-keys", "-t", "roder", "C-q")
            tmux.wait_for("roder-exited-0", timeout=15)
        finally:
            subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)
