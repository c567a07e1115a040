"""``roder -p`` hands its turn to a running host: the same output and exit codes as in process,
stdin attached, headless there too; a host that would run it differently is not used."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
from tests.e2e.host_support import HostProcess, write_local_provider

pytestmark = pytest.mark.e2e

FLAGS = ("--provider", "local", "--model", "my-model")


def _ask(
    host: HostProcess, cwd: Path, *args: str, stdin: str = "", in_process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {**host.env, **env}
    if in_process:
        environment["RODER_NO_HOST"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", *args],
        cwd=cwd,
        env=environment,
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
