"""End to end: ``roder serve`` outlives the terminal. The app attached in tmux starts a turn; the
tmux session is killed (the phone's SSH connection drops); a new tmux session attaches again and
finds the turn still running, or its approval waiting, and nothing lost."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.server.host_paths import HostPaths
from roder_core.server.protocol import (
    THREAD_READ,
    ThreadReadParams,
)
from roder_core.server.protocol_attach import (
    HOST_STATUS,
)
from roder_core.server.remote_client import RemoteAppClient
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.builders import wait_until
from tests.e2e.host_support import HostProcess, write_local_provider
from tests.e2e.test_tui_tmux import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

MODEL = ("--provider", "local", "--model", "my-model")
#: A tool that runs until the test lets it finish (it waits for a file).
SLOW_COMMAND = "while [ ! -e release-me ]; do sleep 0.05; done; echo slow-tool-$((40+2))"


def _attach_in_tmux(host: HostProcess, workspace: Path) -> Tmux:
    command = " ".join(["env", f"RODER_HOME={host.env['RODER_HOME']}", sys.executable, "-m", "roder_tui.cli", "attach"])
    return Tmux.start("roder-attach", command, {**host.env, "TERM": "xterm-256color"}, workspace)


def _kill(tmux: Tmux) -> None:
    subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)


async def _session(host: HostProcess) -> tuple[dict[str, str], int]:
    """(threads with a running turn, attached clients besides this one)."""
    client = await RemoteAppClient.connect_unix(host.socket)
    async with client:
        status = (await client.call(HOST_STATUS)).wire()
        return status.get("activeTurns", {}), status["clients"] - 1


def test_a_turn_outlives_its_terminal_and_a_new_terminal_finds_it(roder_home: Path, workspace: Path) -> None:
    steps = [
        {"text": "Starting the slow step.", "tool_calls": [{"name": "bash", "arguments": {"command": SLOW_COMMAND}}]},
        {"text": "The slow step printed slow-tool-42. SLOW-OK"},
    ]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(
            workspace, roder_home, "--provider", "local", "--model", "my-model", "--mode", "bypass", "--sandbox", "off"
        )
        first = second = None
        try:
            first = _attach_in_tmux(host, workspace)
            first.wait_for("idle")
            first.run("send-keys", "-t", "roder", "-l", "please run the slow step")
            first.run("send-keys", "-t", "roder", "Enter")
            first.wait_for("Starting the slow step.")
            first.wait_for("working")
            _kill(first)  # the terminal is gone
            active, _others = wait_until(
                lambda: (s := asyncio.run(_session(host)))[1] == 0 and s, "the first client leaving", timeout=60
            )
            assert len(active) == 1, "the turn stopped with its terminal"
            (thread_id,) = active

            second = _attach_in_tmux(host, workspace)
            screen = second.wait_for("Starting the slow step.")
            assert "please run the slow step" in screen
            second.wait_for("working")  # still running, and shown as running
            (workspace / "release-me").write_text("")
            screen = second.wait_for("SLOW-OK")
            assert "slow-tool-42" in screen

            thread = asyncio.run(_read(host, thread_id))
            texts = [getattr(i, "text", "") for t in thread.turns for i in t.items]
            kinds = [i.type for t in thread.turns for i in t.items]
            assert thread.turns[-1].status == "completed" and len(thread.turns) == 1
            assert "please run the slow step" in texts and "Starting the slow step." in texts
            assert any("slow-tool-42" in t for t in texts) and texts[-1].endswith("SLOW-OK")
            assert "toolCall" in kinds and "toolResult" in kinds
            stored = next((roder_home / "data" / "threads").rglob(f"*{thread_id}*.jsonl")).read_text()
            assert "SLOW-OK" in stored and "slow-tool-42" in stored and "please run the slow step" in stored
            assert len(server.calls) == 2
        finally:
            for tmux in (first, second):
                if tmux is not None:
                    _kill(tmux)
            host.stop()


async def _read(host: HostProcess, thread_id: str):  # type: ignore[no-untyped-def]
    client = await RemoteAppClient.connect_unix(host.socket)
    async with client:
        return (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread


def test_an_approval_raised_while_nobody_was_attached_is_answered_from_a_new_terminal(roder_home: Path, workspace: Path) -> None:
    steps = [
        {"text": "Checking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo late-$((6*7))"}}], "gate": "g"},
        {"text": "It printed late-42. APPROVED-OK"},
    ]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(
            workspace, roder_home, "--provider", "local", "--model", "my-model", "--mode", "ask", "--sandbox", "off"
        )
        first = second = None
        try:
            first = _attach_in_tmux(host, workspace)
            first.wait_for("idle")
            first.run("send-keys", "-t", "roder", "-l", "check it")
            first.run("send-keys", "-t", "roder", "Enter")
            assert server.gate_reached("g").wait(60), "the model was never called"
            _kill(first)
            wait_until(lambda: asyncio.run(_session(host))[1] == 0, "the first client leaving", timeout=60)
            server.open_gate("g")  # the approval is raised now, with nobody attached
            threads = roder_home / "data" / "threads"
            wait_until(
                lambda: any("approval/requested" in p.read_text() for p in threads.rglob("*.jsonl")), "the approval", timeout=60
            )
            assert asyncio.run(_session(host))[1] == 0

            second = _attach_in_tmux(host, workspace)
            screen = second.wait_for("Allow bash?")
            assert "echo late-$((6*7))" in screen
            second.run("send-keys", "-t", "roder", "y")
            screen = second.wait_for("APPROVED-OK")
            assert "late-42" in screen
            second.run("send-keys", "-t", "roder", "C-q")
            second.wait_for("roder-exited-0")
        finally:
            for tmux in (first, second):
                if tmux is not None:
                    _kill(tmux)
            host.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_in_tmux(env: dict[str, str], cwd: Path, command: str) -> Tmux:
    return Tmux.start("roder-ws", command, {**env, "TERM": "xterm-256color"}, cwd)


def test_attach_over_the_websocket_with_the_pairing_link_and_a_wrong_token_is_refused(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    port = _free_port()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    steps = [{"text": "Over the WebSocket. WS-ATTACH-OK"}]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        listen = f"ws://127.0.0.1:{port}"
        host = HostProcess(workspace, roder_home, *MODEL, "--remote", "--listen", listen, "--print-qr=false")
        refused = paired = None
        try:
            link = next(line.split("pair: ", 1)[1].strip() for line in host.lines if "pair: " in line)
            env = {**host.env, "WRONG_TOKEN": "not-the-token"}
            refused = _run_in_tmux(env, elsewhere, f"{sys.executable} -m roder_tui.cli attach {listen} --token env:WRONG_TOKEN")
            screen = refused.wait_for("roder-exited-1")
            assert "refused the connection: HTTP 401" in screen

            paired = _run_in_tmux(host.env, elsewhere, f"{sys.executable} -m roder_tui.cli attach '{link}'")
            paired.wait_for("idle")
            paired.run("send-keys", "-t", "roder", "-l", "hello over ws")
            paired.run("send-keys", "-t", "roder", "Enter")
            screen = paired.wait_for("WS-ATTACH-OK")
            assert str(workspace.resolve()) in screen or workspace.name in screen  # the host's folder, not this one
            paired.run("send-keys", "-t", "roder", "C-q")
            paired.wait_for("roder-exited-0")
        finally:
            for tmux in (refused, paired):
                if tmux is not None:
                    _kill(tmux)
            host.stop()


def test_detach_starts_a_host_that_outlives_the_app(roder_home: Path, workspace: Path) -> None:
    """``roder --detach``: no host yet, so one starts in the background; the app attaches to it;
    quitting the app leaves the host (and the thread) there."""
    with ThreadedFakeServer([{"text": "Answered by the host. DETACH-OK"}], models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        from tests.e2e.host_support import host_env

        env = host_env(roder_home)
        paths = HostPaths.from_env(env)
        assert not paths.socket.exists()
        tmux = _run_in_tmux(env, workspace, f"{sys.executable} -m roder_tui.cli --detach {' '.join(MODEL)}")
        try:
            tmux.wait_for("idle")
            tmux.run("send-keys", "-t", "roder", "-l", "who answers?")
            tmux.run("send-keys", "-t", "roder", "Enter")
            tmux.wait_for("DETACH-OK")
            tmux.run("send-keys", "-t", "roder", "C-q")
            tmux.wait_for("roder-exited-0")
            status = subprocess.run(
                [sys.executable, "-m", "roder_tui.cli", "serve", "--status"], env=env, capture_output=True, text=True, timeout=60
            )
            assert status.returncode == 0 and str(workspace.resolve()) in status.stdout
        finally:
            _kill(tmux)
            subprocess.run([sys.executable, "-m", "roder_tui.cli", "serve", "--stop"], env=env, capture_output=True, timeout=60)
        assert not paths.socket.exists()


def test_detach_in_a_folder_with_its_own_items_says_they_are_not_loaded(roder_home: Path, workspace: Path) -> None:
    """The app asks whether to trust a folder that brings its own items; ``roder --detach``
    started its host untrusted without a word. It says so in one line, and how to trust it."""
    (workspace / ".roder" / "commands").mkdir(parents=True)
    (workspace / ".roder" / "commands" / "greet.md").write_text("Say hello.\n")
    with ThreadedFakeServer([{"text": "unused"}], models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        from tests.e2e.host_support import host_env

        env = host_env(roder_home)
        tmux = _run_in_tmux(env, workspace, f"{sys.executable} -m roder_tui.cli --detach {' '.join(MODEL)}")
        try:
            tmux.wait_for("idle")
            tmux.run("send-keys", "-t", "roder", "C-q")
            screen = tmux.wait_for("roder-exited-0")
        finally:
            _kill(tmux)
            subprocess.run([sys.executable, "-m", "roder_tui.cli", "serve", "--stop"], env=env, capture_output=True, timeout=60)
    note = (
        "roder: this folder is not trusted, so its own items (.roder/commands) are not loaded; "
        "`roder trust` trusts it (then `roder serve --stop` and start again), or start with --trust"
    )
    assert note in " ".join(screen.split()), screen
