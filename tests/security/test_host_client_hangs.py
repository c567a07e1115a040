"""A hosted ``roder -p`` never hangs on its host without saying why.

A one-shot hands its turn to this user's running host when one answers ``host/status``. A
host that is stopped or stuck (here: a real unix socket in the host's private folder that
accepts and never answers) must not hold every ``roder -p`` forever: the status request has a
deadline, after which the run happens in this process and stderr says why. Mid-turn, the
first Ctrl+C asks the host to interrupt; when the host does not end the turn, a second one
ends the run with one line instead of being swallowed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import roder_tui.ask_host as ask_host
from roder_core import __version__
from roder_core.server.host_paths import HostPaths, config_stamp, environment_digest
from roder_core.server.wire import PROTOCOL_VERSION
from roder_core.settings.paths import RoderPaths
from roder_tui.ask import run_ask
from roder_tui.cli import build_parser

Answer = Callable[[str, dict[str, Any]], Any]


@pytest.fixture
def host_paths(roder_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HostPaths:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("RODER_NO_HOST", raising=False)
    paths = HostPaths.from_env()
    paths.ensure_private()
    return paths


@contextlib.contextmanager
def _serve(paths: HostPaths, answer: Answer | None) -> Iterator[None]:
    """A host at ``paths`` that accepts one client and answers its requests with ``answer``
    (None: never answers anything)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen()
    accepted: list[socket.socket] = []

    def run() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            accepted.append(conn)
        for conn in accepted:
            with conn, contextlib.suppress(OSError):
                _answer_all(conn, answer)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # an accept still waiting returns
        listener.close()
        for conn in accepted:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        worker.join()


def _answer_all(conn: socket.socket, answer: Answer | None) -> None:
    for line in conn.makefile("rb"):
        message = json.loads(line)
        if answer is None or "id" not in message:
            continue
        result = answer(message["method"], message.get("params") or {})
        conn.sendall(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")


def _ask(*flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["-p", "hi", *flags])
    code = run_ask(args, stdin=io.StringIO(""), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_host_that_never_answers_is_not_waited_for(
    host_paths: HostPaths, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    monkeypatch.setattr(ask_host, "STATUS_TIMEOUT", 0.2)
    with _serve(host_paths, None):
        code, out, _ = _ask("--provider", "mock")
    said = capsys.readouterr().err
    assert f"roder: not using the host at {host_paths.socket}: it did not answer host/status in 0.2 s" in said
    assert said.count("\n") == 1, said  # one line
    assert code == 0 and out.strip(), out  # answered here instead


def test_a_second_ctrl_c_ends_a_run_whose_host_does_not_end_the_turn(
    host_paths: HostPaths, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    cwd = workspace.resolve()
    interrupts: list[dict[str, Any]] = []

    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "host/status":
            return {
                "version": __version__,
                "protocolVersion": PROTOCOL_VERSION,
                "cwd": str(cwd),
                "trusted": False,
                "flags": {},
                "profile": "developer",
                "configStamp": config_stamp(RoderPaths.from_env(dict(os.environ)).config_file, cwd, False),
                "environmentDigest": environment_digest(os.environ),
                "defaultMode": "default",
            }
        replies: dict[str, Any] = {
            "initialize": {"cwd": str(cwd)},
            "session/get": {"openThreads": []},
            "thread/start": {"thread": {"id": "thread-1"}},
            "turn/start": {"turn": {"id": "turn-1"}},
        }
        if method == "turn/interrupt":
            interrupts.append(params)  # and the turn goes on: a stuck host
            if len(interrupts) > 3:  # (a client that keeps asking would wait forever: let it go)
                raise ConnectionAbortedError
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl+C again
        return replies.get(method, {})

    watching = threading.Event()
    real = ask_host.HostSession.interrupting

    @contextlib.contextmanager
    def interrupting(self: ask_host.HostSession, thread_id: str) -> Iterator[None]:
        with real(self, thread_id):
            watching.set()
            yield

    def press_ctrl_c() -> None:
        watching.wait()
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(ask_host.HostSession, "interrupting", interrupting)
    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    with _serve(host_paths, answer), pytest.raises(KeyboardInterrupt):
        _ask()
    presser.join()
    assert interrupts == [{"threadId": "thread-1"}]  # the first Ctrl+C asked the host
    said = capsys.readouterr().err
    assert "roder: the host had not ended the turn after the first Ctrl+C; stopped waiting\n" in said
