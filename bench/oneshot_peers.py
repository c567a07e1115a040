"""The peers (`codex exec`, `claude -p`, `pi -p`) and `roder -p` on the same loopback workload.

Each program plays the same script against its own fresh `roder_core.testing.fake_server`: ten
rounds of its own shell tool (`echo round N`), then an answer. The tool name and argument shape
are each program's own (read from the `tools` of its first request): Codex's `exec_command`
{cmd}, Claude Code's `Bash` {command}, pi's and Roder's `bash` {command}. Each is configured only
through environment variables and config files in a temporary HOME, with approvals and its
sandbox off (Roder: bypass mode, its sandbox as probed), its update checks and telemetry off, and
a placeholder API key, so nothing leaves loopback. A run counts only when the server's request
log shows exactly rounds + 1 model calls and the last one carries the output of the last round;
a run that did anything else is reported as a failure, never as a figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Prefixes of variables a peer would read as credentials or as a provider setting of its own:
# the runs must use the loopback server and the placeholder key only.
SCRUBBED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "CODEX_", "CLAUDE_", "PI_", "RODER_", "GEMINI_", "AWS_", "GOOGLE_")
SCRUBBED_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
PLACEHOLDER_KEY = "sk-placeholder-loopback"
LOG_ARGS = ("--model", "m", "--log")


@dataclass(frozen=True)
class Program:
    """One program of the comparison: how to configure it for a server, and its shell tool."""

    label: str
    binary: str
    tool: str
    argument: str
    dialect: str
    configure: Callable[[Path, str, Path], tuple[list[str], dict[str, str]]]
    #: Run while a `roder serve` host runs for the workspace (started before the run, not
    #: counted; stopped after): the turn is handed to it.
    hosted: bool = False

    def steps(self, rounds: int) -> list[dict[str, object]]:
        calls = [
            {"text": f"Round {i}.", "tool_calls": [{"name": self.tool, "arguments": {self.argument: f"echo round {i}"}}]}
            for i in range(rounds)
        ]
        return [*calls, {"text": "All rounds done."}]


def _codex(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`codex exec` with a Responses-API provider at the server, sandbox and approvals off. Left
    to itself it also looks up api.github.com (its curated plugins sync) and ab.chatgpt.com (its
    metrics exporter) at every start (strace of 0.169.0); plugins and analytics off stop both."""
    (home / "config.toml").write_text(
        'model = "m"\nmodel_provider = "loop"\ncheck_for_update_on_startup = false\n'
        "[features]\nplugins = false\n[analytics]\nenabled = false\n"
        '[model_providers.loop]\nname = "loop"\n'
        f'base_url = "{url}"\nwire_api = "responses"\nenv_key = "LOOP_API_KEY"\n'
    )
    command = [str(binary), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "go"]
    return command, {"CODEX_HOME": str(home), "LOOP_API_KEY": PLACEHOLDER_KEY}


def _claude(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`claude -p` at the server through ANTHROPIC_BASE_URL, permissions skipped (IS_SANDBOX lets
    root do that), non-essential traffic (telemetry, update checks) off."""
    env = {
        "ANTHROPIC_BASE_URL": url.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }
    return [str(binary), "-p", "go", "--model", "m", "--dangerously-skip-permissions"], env


def _pi(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`pi -p` with a chat-completions provider in its models.json, offline mode on."""
    agent = home / "agent"
    agent.mkdir(exist_ok=True)
    provider = {"baseUrl": url, "api": "openai-completions", "apiKey": PLACEHOLDER_KEY, "models": [{"id": "m"}]}
    (agent / "models.json").write_text(json.dumps({"providers": {"loop": provider}}))
    return [str(binary), "-p", "go", "--provider", "loop", "--model", "m"], {"PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"}


def _roder(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`roder -p` with a chat-completions provider in its config, bypass mode, in process; each
    command in its sandbox as probed (bubblewrap here)."""
    (home / "config.toml").write_text(f'[providers.loop]\ndialect = "chat-completions"\nbase_url = "{url}"\nmodels = ["m"]\n')
    command = [sys.executable, "-m", "roder_tui.cli", "-p", "go", "--provider", "loop", "--model", "m", "--mode", "bypass"]
    return command, {"RODER_HOME": str(home), "RODER_NO_HOST": "1"}


def _roder_unsandboxed(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`roder -p` as above with `--sandbox off`: the peers' conditions (their sandboxes are off)."""
    command, env = _roder(binary, url, home)
    return [*command, "--sandbox", "off"], env


def _roder_hosted(binary: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """`roder -p` as above, handed to a running `roder serve` host (see ``Program.hosted``)."""
    command, env = _roder(binary, url, home)
    del env["RODER_NO_HOST"]
    return command, env


RODERS = (
    Program("roder -p", "roder", "bash", "command", "chat-completions", _roder),
    Program("roder -p --sandbox off", "roder", "bash", "command", "chat-completions", _roder_unsandboxed),
    Program("roder -p, with a host", "roder", "bash", "command", "chat-completions", _roder_hosted, hosted=True),
)


@contextlib.contextmanager
def running_host(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """A `roder serve` host for the workspace while the block runs (its start is not measured)."""
    roder = [sys.executable, "-m", "roder_tui.cli", "serve"]
    started = subprocess.run(roder, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        raise SystemExit(f"roder serve failed: {started.stderr}")
    try:
        yield
    finally:
        subprocess.run([*roder, "--stop"], cwd=cwd, env=env, capture_output=True, timeout=120)


PEERS = (
    Program("codex exec", "codex", "exec_command", "cmd", "responses", _codex),
    Program("claude -p", "claude", "Bash", "command", "anthropic-messages", _claude),
    Program("pi -p", "pi", "bash", "command", "chat-completions", _pi),
)


#: Where ``--install-peers`` installs them (``npm install`` into this folder), and where they are
#: looked for first.
PEERS_DIR = Path(tempfile.gettempdir()) / "roder-bench-peers"
#: The npm packages of the peers. opencode is installed too, but not run: it has no
#: configuration here that keeps it on loopback.
PACKAGES = ("@openai/codex", "@anthropic-ai/claude-code", "@mariozechner/pi-coding-agent", "opencode-ai")
UNMEASURED = {"opencode": "installed by --install-peers, but not run: no configuration here keeps it on loopback"}


def install() -> None:
    """``npm install`` the peers into ``PEERS_DIR`` (the registry is npm's usual one)."""
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    print(f"installing {' '.join(PACKAGES)} into {PEERS_DIR} ...")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", *PACKAGES], cwd=PEERS_DIR, check=True)


def search_path(peer_bin: Path | None) -> str:
    """PATH to find the peers on: --peer-bin first (an npm prefix's bin, e.g. /opt/peers/bin),
    then ``PEERS_DIR``'s, then PATH."""
    path = f"{PEERS_DIR / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return f"{peer_bin.resolve()}{os.pathsep}{path}" if peer_bin else path


def find(peer: Program, path: str) -> Path | None:
    found = shutil.which(peer.binary, path=path)
    return Path(found) if found else None


def version(binary: Path, path: str) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": path}
    )
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1] if done.returncode == 0 else f"? (rc {done.returncode})"


def clean_env(path: str, home: Path) -> dict[str, str]:
    """The caller's environment without credentials or provider settings, HOME a temporary folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SCRUBBED_PREFIXES) and not any(m in k.upper() for m in SCRUBBED_MARKERS) and k != "PYTHONPATH"
    }
    env.update({"PATH": path, "HOME": str(home), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    return env


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def check_rounds(log: Path, rounds: int) -> str | None:
    """None when the request log shows exactly rounds + 1 model calls whose last carries the
    output of the last round (not just its command); otherwise what went wrong."""
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    calls = [r for r in records if r["method"] == "POST"]
    if len(calls) != rounds + 1:
        return f"{len(calls)} model requests, expected {rounds + 1}"
    last = f"round {rounds - 1}"
    if not any(last in s and f"echo {last}" not in s for s in _strings(calls[-1]["json"])):
        return f"the last request carries no output of `echo {last}`"
    return None


class ScriptedServer:
    """A fresh fake model server for one run of one program, logging its requests."""

    def __init__(self, steps: list[dict[str, object]], scratch: Path) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        script = scratch / "script.json"
        script.write_text(json.dumps({"steps": steps}))
        self.log = scratch / "requests.jsonl"
        self.log.unlink(missing_ok=True)  # the server appends: a stale log would count old requests
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "roder_core.testing.fake_server",
                "--script",
                str(script),
                "--port",
                "0",
                *LOG_ARGS,
                str(self.log),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
