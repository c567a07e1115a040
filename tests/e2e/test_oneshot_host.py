"""``roder -p`` hands its turn to a running host: the same output and exit codes as in process,
stdin attached, headless there too; a host that would run it differently is not used."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.server.host_paths import HostPaths
from roder_core.server.protocol import (
    INITIALIZE,
    SESSION_GET,
    InitializeParams,
    SessionGetParams,
)
from roder_core.server.protocol_attach import (
    HOST_STATUS,
)
from roder_core.server.remote_client import RemoteAppClient
from roder_core.testing.fake_server import ThreadedFakeServer
from roder_core.threads.events import ThreadStarted
from tests.builders import wait_until
from tests.e2e.host_support import HostProcess, host_env, write_local_provider

pytestmark = pytest.mark.e2e

FLAGS = ("--provider", "local", "--model", "my-model")


def _ask(
    host: HostProcess, cwd: Path, *args: str, stdin: str = "", in_process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {**host.env, **env}
    if in_process:
        environment["RODER_NO_HOST"] = "1"
    return _roder_p(environment, cwd, *args, stdin=stdin)


def _roder_p(env: dict[str, str], cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``roder -p ARGS`` as its own process, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _threads_started_on(host: HostProcess, run: Any) -> tuple[Any, list[str]]:
    """Run ``run`` (blocking) while watching the host: the threads it started meanwhile."""
    client = await RemoteAppClient.connect_unix(host.socket)
    async with client:
        events = client.subscribe()
        await client.call(INITIALIZE, InitializeParams())
        result = await asyncio.to_thread(run)
        await client.call(SESSION_GET, SessionGetParams())  # everything the run caused was sent before this answer
        started = []
        while len(events):
            event = await events.get()
            if isinstance(event, ThreadStarted):
                started.append(event.thread.id)
        return result, started


def test_the_host_answers_with_the_same_output_exit_codes_and_stdin(roder_home: Path, workspace: Path) -> None:
    answer = {"text": "Forty-two is the answer.\nSecond line."}
    steps = [
        answer,
        answer,
        {"text": "The file says hello-from-stdin."},
        {"status": 400, "error": {"message": "model overloaded", "type": "invalid_request_error"}},
    ]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *FLAGS)
        try:
            local = _ask(host, workspace, "what is it?", *FLAGS, in_process=True)
            hosted, started = asyncio.run(_threads_started_on(host, lambda: _ask(host, workspace, "what is it?", *FLAGS)))
            assert len(started) == 1, "the run did not go through the host"
            assert (hosted.returncode, hosted.stdout, hosted.stderr) == (local.returncode, local.stdout, local.stderr)
            assert hosted.returncode == 0 and hosted.stdout == "Forty-two is the answer.\nSecond line.\n"

            piped = _ask(host, workspace, "summarize this", *FLAGS, stdin="hello-from-stdin\n")
            assert piped.returncode == 0 and "hello-from-stdin" in piped.stdout
            assert "hello-from-stdin" in str(server.calls[-1].json["messages"])

            failed = _ask(host, workspace, "and now?", *FLAGS, "--output-format", "json")
            assert failed.returncode == 1
            assert '"status": "failed"' in failed.stdout and "model overloaded" in failed.stderr
        finally:
            host.stop()


def test_a_hosted_run_stays_headless_and_is_denied_like_one_in_process(roder_home: Path, workspace: Path) -> None:
    bash = {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {"command": "touch made-by-bash"}}]}
    steps = [bash, {"text": "It was denied."}, bash, {"text": "It was denied."}]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *FLAGS, "--mode", "ask")
        try:
            local = _ask(host, workspace, "make the file", *FLAGS, in_process=True)
            hosted, started = asyncio.run(_threads_started_on(host, lambda: _ask(host, workspace, "make the file", *FLAGS)))
            assert len(started) == 1
            assert (hosted.returncode, hosted.stdout, hosted.stderr) == (local.returncode, local.stdout, local.stderr)
            assert "denied: bash needs approval" in hosted.stderr and "nobody can approve" in hosted.stderr
            assert not (workspace / "made-by-bash").exists()
            assert asyncio.run(_status(host))["activeTurns"] == {}  # nothing left waiting for a person
        finally:
            host.stop()


async def _status(host: HostProcess) -> dict[str, Any]:
    client = await RemoteAppClient.connect_unix(host.socket)
    async with client:
        return (await client.call(HOST_STATUS)).wire()


def test_a_host_that_would_run_it_differently_is_not_used(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ThreadedFakeServer([{"text": "in process"}] * 4, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *FLAGS)
        try:
            for cwd, extra, env in [
                (elsewhere, (), {}),  # another folder
                (workspace, ("--max-iterations", "3"), {}),  # other flags
                (workspace, (), {"LOCAL_API_KEY": "sk-another-key"}),  # another key in this shell
                (workspace, ("--trust",), {}),  # a trust the host does not have
            ]:
                done, started = asyncio.run(
                    _threads_started_on(host, lambda c=cwd, x=extra, e=env: _ask(host, c, "hi", *FLAGS, *x, **e))
                )
                assert done.returncode == 0 and done.stdout == "in process\n", done.stderr
                assert started == [], f"{cwd} {extra} {env} used the host"
        finally:
            host.stop()


#: What differs between two runs of one script: ids, times, durations (and the prompt's size,
#: which counts the command's duration the model was shown: "0.08 s" or "0.1 s").
VARYING_KEYS = {"ts", "startedAt", "completedAt", "createdAt", "durationMs", "duration_ms", "updatedAt", "inputTokens"}
VARYING_ID = re.compile(r"\b(thr|turn|item|call|cmd)_[0-9a-zA-Z]+|\b[0-9]+\.[0-9]+ s\b")


def _blanked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: "_" if key in VARYING_KEYS else _blanked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_blanked(item) for item in value]
    return VARYING_ID.sub("_", value) if isinstance(value, str) else value


def _without_ids(output: str) -> list[Any]:
    """The output's lines, JSON ones parsed, with what differs between two runs blanked."""
    lines = output.splitlines()
    return [_blanked(json.loads(line)) if line.startswith("{") else _blanked(line) for line in lines]


def test_every_output_format_and_error_is_the_same_as_in_process(roder_home: Path, workspace: Path) -> None:
    """The standard-library client prints exactly what the in-process run prints: stream-json's
    every notification, json's result, a retry notice, and the errors with their exit codes."""
    turn = [
        {"status": 503, "headers": {"retry-after": "0"}, "error": {"message": "try later", "type": "server_error"}},
        {"text": "Looking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi-from-bash"}}]},
        {"text": "Done: hi-from-bash."},
    ]
    with ThreadedFakeServer(turn * 6, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *FLAGS, "--mode", "bypass")
        try:
            for fmt in ("stream-json", "json", "text"):
                args = ("go", *FLAGS, "--mode", "bypass", "--output-format", fmt)
                local = _ask(host, workspace, *args, in_process=True)
                hosted, started = asyncio.run(_threads_started_on(host, lambda a=args: _ask(host, workspace, *a)))
                assert len(started) == 1, "the run did not go through the host"
                assert (hosted.returncode, hosted.stderr) == (local.returncode, local.stderr) == (0, local.stderr)
                said = "turn/retrying" in hosted.stdout if fmt == "stream-json" else "retry 1 of" in hosted.stderr
                assert said or fmt == "json", f"{fmt}: the 503's retry was not said"
                assert _without_ids(hosted.stdout) == _without_ids(local.stdout), f"{fmt}\n{hosted.stdout}\n{local.stdout}"
            for wrong, code, message in [
                (("hi", "-r", "thr_nosuchthread", *FLAGS), 2, "thr_nosuchthread"),
                (("hi", "-r", "", *FLAGS), 2, "-r needs a thread id"),
                (("/new", *FLAGS), 2, "/new is an app command"),
            ]:
                local = _ask(host, workspace, *wrong, in_process=True)
                hosted = _ask(host, workspace, *wrong)
                assert (hosted.returncode, hosted.stdout, hosted.stderr) == (local.returncode, local.stdout, local.stderr)
                assert hosted.returncode == code and message in hosted.stderr, hosted.stderr
        finally:
            host.stop()


def test_ctrl_c_interrupts_the_turn_on_the_host(roder_home: Path, workspace: Path) -> None:
    """SIGINT to a hosted `roder -p` interrupts its turn on the host (not just the client): the
    run ends as an interrupted turn does in process, and the host has no turn left running."""
    started_file = workspace / "started"
    long_call = {"name": "bash", "arguments": {"command": f"touch {started_file.name}; sleep 600"}}
    with ThreadedFakeServer([{"text": "Waiting.", "tool_calls": [long_call]}, {"text": "never"}], models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *FLAGS, "--mode", "bypass")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "roder_tui.cli", "-p", "wait", *FLAGS, "--mode", "bypass"],
                cwd=workspace,
                env=host.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_until(started_file.exists, "the bash call to start on the host")
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 1, err
            assert "roder: turn interrupted" in err and "Traceback" not in err
            assert asyncio.run(_status(host))["activeTurns"] == {}
        finally:
            host.stop()


def test_a_host_folder_open_to_others_is_not_used_and_said_so(roder_home: Path, workspace: Path) -> None:
    """A socket in a host folder other users can enter is never spoken to: the run happens in
    process and says once why the socket was ignored."""
    env = host_env(roder_home)
    paths = HostPaths.from_env(env)
    paths.directory.mkdir(mode=0o755)
    paths.directory.chmod(0o755)
    paths.socket.touch()
    try:
        done = _roder_p(env, workspace, "hi", "--provider", "mock")
    finally:
        paths.socket.unlink()
        paths.directory.rmdir()
    assert done.returncode == 0, done.stderr
    ignored = [line for line in done.stderr.splitlines() if "ignoring the host socket" in line]
    assert ignored == [
        f"roder: ignoring the host socket: {paths.directory} is open to other users (mode 755); "
        "refusing to use it: `chmod 700` it or remove it"
    ]
