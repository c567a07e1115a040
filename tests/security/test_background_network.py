"""Background tasks through the real loop: a tiny HTTP server started by ``bash`` with
``run_in_background`` in bubblewrap, reached on loopback by a later sandboxed command of the same
thread, unreachable from another thread and from the host, and stopped by ``task_kill`` with
nothing left in the process table.

The model is the loopback model server speaking the Chat Completions wire format; everything
else is the default distribution found through the entry points (bootstrap, registry, policy,
the process broker, bubblewrap, the thread's loopback network). CI runs this file as root and
again as an unprivileged user (``.ci/run-unprivileged``).
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ToolResultItem
from roder_core.kernel.tasks import TaskInfo
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.runtime.runtime import Runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import Reachable, assert_gone, marker, needs_bwrap, running, serve

pytestmark = needs_bwrap

#: Any port: it is free in the thread's own network namespace whatever the host runs on it.
PORT = 8765

SERVER = """\
import http.server, sys
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the background task"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        print("served", self.path, flush=True)
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Hello)
print("listening on", server.server_address[1], flush=True)
server.serve_forever()
"""

FETCH = (
    'python3 -c "import sys, urllib.request; '
    "print(urllib.request.urlopen('http://127.0.0.1:%d/probe', timeout=5).read().decode())\""
)

PROBE_HOST = """\
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
    print("host loopback: REACHED")
except OSError as exc:
    print("host loopback: refused", exc)
for target in ("1.1.1.1", "10.0.0.1"):
    try:
        socket.create_connection((target, 80), timeout=3)
        print(target, "REACHED")
    except OSError as exc:
        print(target, "unreachable", exc)
print("interfaces:", sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]))
"""


SLEEPER = 'import time; print("ready"); time.sleep(600)'


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def task_and_spill_steps(mark: str) -> list[dict[str, Any]]:
    """A turn that leaves ``mark`` in a background task's log and in spilled command output
    (too long for a result): what another thread must never read."""
    spilled = f'python3 -c \'print("{mark}-spilled"); print("x" * 200_000)\''
    return [
        {"tool_calls": [call("bash", command=f"echo {mark}-task; sleep 600", run_in_background=True)]},
        {"tool_calls": [call("bash", command=spilled)]},
        {"text": "started"},
    ]


def results(runtime: Runtime, thread_id: str) -> list[ToolResultItem]:
    return [i for i in runtime.thread(thread_id).items() if isinstance(i, ToolResultItem)]


async def start(workspace: Path, roder_home: Path, server: FakeModelServer) -> Runtime:
    (roder_home / "config.toml").write_text(
        '[providers.local]\ndialect = "chat-completions"\n'
        f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
    )
    started = start_runtime(
        StartSettings(
            cwd=workspace,
            provider="local",
            mode="bypass",
            interactive=False,
            trust=False,
            env={"RODER_HOME": str(roder_home), "LOCAL_API_KEY": "sk-local-xyz12345", "PATH": "/usr/bin:/bin"},
        )
    )
    runtime = started.runtime
    assert runtime.sandbox.effective == "workspace-write", runtime.sandbox.reason
    return runtime


async def wait_for_task(runtime: Runtime, task_id: str, predicate: Any) -> TaskInfo:
    """Until the task satisfies ``predicate`` (seen through tasks/updated's listener)."""
    changed = asyncio.Event()
    remove = runtime.tasks.subscribe(lambda info: changed.set() if info.id == task_id else None)
    try:
        while not predicate(info := runtime.tasks.get(task_id)):
            await changed.wait()
            changed.clear()
        return info
    finally:
        remove()


async def test_a_background_server_is_reached_on_loopback_and_killed_without_orphans(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    (workspace / "server.py").write_text(SERVER)
    # The server starts a child of its own first: task_kill must take the whole tree.
    background = f"python3 -c 'import time; time.sleep(600)' {mark}-child & exec python3 -u server.py {PORT} {mark}"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=background, run_in_background=True)]},
        {"text": "the server runs in the background"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            turn = await runtime.run_turn(thread.id, "start the dev server")
            assert turn.status == "completed"
            started = results(runtime, thread.id)[0]
            assert not started.is_error, started.text
            task_id = started.data["task_id"]
            info = await wait_for_task(runtime, task_id, lambda t: t.last_line == f"listening on {PORT}" or t.status != "running")
            assert info.status == "running" and info.last_line == f"listening on {PORT}", info
            assert running(mark), "the server is not in the process table"

            with serve(Reachable) as host_port:
                steps += [
                    {"tool_calls": [call("bash", command=FETCH % PORT)]},
                    {"tool_calls": [call("bash", command=f"python3 -c '{PROBE_HOST}' {host_port}")]},
                    {"tool_calls": [call("task_output", task_id=task_id)]},
                    {"tool_calls": [call("task_kill", task_id=task_id)]},
                    {"text": "done"},
                ]
                turn = await runtime.run_turn(thread.id, "check it, then stop it")
            assert turn.status == "completed"
            fetched, probed, output, killed = results(runtime, thread.id)[1:5]
            # a later sandboxed command of the same thread reaches it on loopback
            assert "hello from the background task" in fetched.text, fetched.text
            assert "sandbox workspace-write" in fetched.text
            # the host's loopback and every other network stay out of reach
            assert "host loopback: refused" in probed.text, probed.text
            assert "REACHED" not in probed.text
            assert "interfaces: ['lo']" in probed.text, probed.text
            # the model reads the task's output and stops it
            assert "served /probe" in output.text and f"task {task_id}" in output.text, output.text
            assert not killed.is_error and f"stopped: task {task_id}" in killed.text, killed.text
            assert runtime.tasks.get(task_id).status == "cancelled"
            assert_gone(mark)
            # the server was never on the host's loopback
            with pytest.raises(OSError), socket.create_connection(("127.0.0.1", PORT), timeout=1):
                pass
        finally:
            await runtime.close()
    assert_gone(mark)


async def test_another_thread_cannot_reach_the_server_and_closing_the_thread_stops_it(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    (workspace / "server.py").write_text(SERVER)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=f"exec python3 -u server.py {PORT} {mark}", run_in_background=True)]},
        {"text": "started"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            owner = await runtime.start_thread()
            await runtime.run_turn(owner.id, "start it")
            task_id = results(runtime, owner.id)[0].data["task_id"]
            await wait_for_task(runtime, task_id, lambda t: t.last_line == f"listening on {PORT}" or t.status != "running")

            other = await runtime.start_thread()
            steps += [{"tool_calls": [call("bash", command=FETCH % PORT)]}, {"text": "tried"}]
            await runtime.run_turn(other.id, "fetch it")
            attempt = results(runtime, other.id)[0]
            assert attempt.is_error and "hello from the background task" not in attempt.text
            assert "Connection refused" in attempt.text, attempt.text

            await runtime.close_thread(owner.id)
            assert runtime.tasks.get(task_id).status == "cancelled"
            assert_gone(mark)
        finally:
            await runtime.close()


async def test_a_kept_task_outlives_its_thread_until_the_runtime_closes(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=f"python3 -u -c '{SLEEPER}' {mark}", run_in_background=True)]},
        {"text": "started"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "start it")
        task_id = results(runtime, thread.id)[0].data["task_id"]
        await wait_for_task(runtime, task_id, lambda t: t.last_line == "ready" or t.status != "running")
        runtime.tasks.keep(task_id)
        await runtime.close_thread(thread.id)
        assert runtime.tasks.get(task_id).status == "running" and running(mark)
        await runtime.close()
    assert runtime.tasks.get(task_id).status == "cancelled"
    assert_gone(mark)
    assert json.dumps(runtime.tasks.get(task_id).params)  # the record stays readable
