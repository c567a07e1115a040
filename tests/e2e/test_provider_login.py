"""`roder providers login|logout` as a user runs them: the key from a pipe or a hidden prompt on a
real terminal (never argv), stored privately, used by `roder -p`, shown only as "stored key"."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer

pytestmark = pytest.mark.e2e

KEY = "rk-stored-DONOTLEAK-9e8d7c6b5a493827"


def roder(home: Path, cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["RODER_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def test_login_from_a_pipe_then_one_shot_uses_the_key_and_logout_removes_it(roder_home: Path, workspace: Path) -> None:
    with ThreadedFakeServer([{"text": "Hello from the stored key."}]) as server:
        (roder_home / "config.toml").write_text(f'[providers.openrouter]\nbase_url = "{server.base_url}"\n')
        login = roder(roder_home, workspace, "providers", "login", "openrouter", stdin=KEY + "\n")
        assert login.returncode == 0, login.stderr
        credentials = roder_home / "data" / "credentials.json"
        assert "stored the openrouter key" in login.stdout
        assert KEY not in login.stdout + login.stderr
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        assert json.loads(credentials.read_text())["keys"] == {"openrouter": KEY}

        listing = roder(roder_home, workspace, "providers", "list")
        row = next(line for line in listing.stdout.splitlines() if line.startswith("openrouter"))
        assert "stored key" in row
        assert KEY not in listing.stdout
        assert "default: openrouter (a key is stored for it" in listing.stdout
        rows = json.loads(roder(roder_home, workspace, "providers", "list", "--json").stdout)["providers"]
        assert {r["id"]: r["keySource"] for r in rows}["openrouter"] == "stored"

        done = roder(roder_home, workspace, "-p", "hi", "--model", "some-model")  # default provider: openrouter
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Hello from the stored key."
        assert server.calls[0].headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in done.stdout + done.stderr

    for path in roder_home.rglob("*"):
        if path.is_file() and path != credentials:
            assert KEY not in path.read_text(errors="replace"), path

    logout = roder(roder_home, workspace, "providers", "logout", "openrouter")
    assert logout.returncode == 0
    assert "removed" in logout.stdout
    assert KEY not in credentials.read_text()
    again = roder(roder_home, workspace, "providers", "logout", "openrouter")
    assert again.returncode == 1
    assert "no key is stored for openrouter" in again.stderr
    listing = roder(roder_home, workspace, "providers", "list")
    assert "OPENROUTER_API_KEY missing" in listing.stdout
    assert "default: mock" in listing.stdout


def test_login_refuses_unknown_providers_and_empty_keys(roder_home: Path, workspace: Path) -> None:
    unknown = roder(roder_home, workspace, "providers", "login", "nowhere", stdin=KEY)
    assert unknown.returncode == 2
    assert "unknown provider 'nowhere'" in unknown.stderr
    empty = roder(roder_home, workspace, "providers", "login", "anthropic", stdin="\n")
    assert empty.returncode == 2
    assert "empty" in empty.stderr
    assert not (roder_home / "data" / "credentials.json").exists()


def _read_until(fd: int, marker: bytes, timeout: float = 30) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_login_on_a_terminal_prompts_without_echo(roder_home: Path, workspace: Path) -> None:
    """A real pseudo-terminal as the controlling terminal, so getpass turns echo off."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["RODER_HOME"] = str(roder_home)
    pid, fd = os.forkpty()
    if pid == 0:  # the child: become `roder providers login anthropic` on the terminal
        os.chdir(workspace)
        os.execve(sys.executable, [sys.executable, "-m", "roder_tui.cli", "providers", "login", "anthropic"], env)
    try:
        prompt = _read_until(fd, b"(input hidden): ")
        assert b"API key for anthropic" in prompt, prompt
        os.write(fd, KEY.encode() + b"\r")
        rest = _read_until(fd, b"removes it")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    assert KEY.encode() not in prompt + rest  # not echoed, not printed
    assert b"stored the anthropic key" in rest
    assert json.loads((roder_home / "data" / "credentials.json").read_text())["keys"] == {"anthropic": KEY}
