"""A real ``roder serve`` host for tests: a provider on the loopback model server, started as its
own process, stopped (or killed) afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from roder_core.server.host_paths import HostPaths

LOCAL_KEY = "sk-local-test"


def write_local_provider(roder_home: Path, base_url: str) -> None:
    (roder_home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{base_url}"\n'
        'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
    )


def host_env(roder_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TMUX")}
    env.update(RODER_HOME=str(roder_home), LOCAL_API_KEY=LOCAL_KEY, PYTHONUNBUFFERED="1")
    env.pop("RODER_NO_HOST", None)
    return env


class HostProcess:
    """``roder serve --foreground`` in a workspace; ``stop()`` asks it to stop, then kills."""

    def __init__(self, workspace: Path, roder_home: Path, *flags: str, launcher: tuple[str, ...] = ()) -> None:
        """``launcher``: what runs the command line instead of ``python -m roder_tui.cli`` (a
        probe script that reports on the host's process)."""
        self.env = host_env(roder_home)
        self.paths = HostPaths.from_env(self.env)
        self.lines: list[str] = []
        self._listening = threading.Event()
        self.process = subprocess.Popen(
            [*(launcher or (sys.executable, "-m", "roder_tui.cli")), "serve", "--foreground", *flags],
            cwd=workspace,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(60) or self.process.poll() is not None:
            self.kill()
            raise AssertionError("the host did not start:\n" + "".join(self.lines))

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if "host listening on" in line:
                self._listening.set()
        self._listening.set()

    @property
    def socket(self) -> Path:
        return self.paths.socket

    def output(self) -> str:
        """Everything the host wrote to stderr, once it has exited."""
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        return "".join(self.lines)

    def stop(self) -> int:
        subprocess.run([sys.executable, "-m", "roder_tui.cli", "serve", "--stop"], env=self.env, capture_output=True, timeout=60)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
