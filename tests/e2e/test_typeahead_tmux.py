"""End to end: a prompt typed while ``roder`` starts, in tmux.

Typed before the app takes the keyboard, the terminal still turns enter into a newline, and the
first focusable widget (the transcript) took what arrived before the prompt's focus settled,
passing on only characters: the prompt stayed unsent with its enter gone. It is sent once the
app is ready now.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_tui_tmux import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def test_a_prompt_typed_while_the_app_starts_is_sent(roder_home: Path, workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TMUX")}
    env.update(RODER_HOME=str(roder_home), TERM="xterm-256color")
    command = f"env RODER_HOME={roder_home} {sys.executable} -m roder_tui.cli --provider mock"
    tmux = Tmux.start("roder-typeahead", command, env, workspace, (80, 24))
    try:
        tmux.run("send-keys", "-t", "roder", "-l", "typed ahead")  # at once: the app is still starting
        tmux.run("send-keys", "-t", "roder", "Enter")
        screen = tmux.wait_for("Mock reply")
        assert "I received 2 words" in screen and "▶ typed ahead" in screen  # sent as typed
        assert "Ask anything" in screen  # and the prompt is empty again
        tmux.run("send-keys", "-t", "roder", "C-q")
        tmux.wait_for("roder-exited-0", timeout=15)
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)
