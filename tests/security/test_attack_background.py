"""Attacks on background tasks through the real loop (hostile model output, real bubblewrap).

A model that wants a process to outlive ``task_kill`` or its thread (``setsid``, a double fork,
``nohup``), that reads what another thread's tasks and commands printed from Roder's cache
through the shell, or that has a background command print a secret. The model is the loopback
model server speaking the Chat Completions wire format; the runtime is the default distribution.
CI runs this file as root and as an unprivileged user (``.ci/run-unprivileged``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import assert_gone, marker, needs_bwrap, running
from tests.security.test_background_network import call, results, start, task_and_spill_steps, wait_for_task

pytestmark = needs_bwrap

SECRET = "sk-local-xyz12345"
#: Prints a file holding the provider key, then counts the key's variable in its environment.
LEAK = "cat leak.txt; printenv | grep -c LOCAL_API_KEY; sleep 600"


@pytest.fixture
def home_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Roder home outside /tmp: the sandbox's /tmp is private, which would hide the cache for
    the wrong reason; a real user's cache is in their home folder."""
    root = Path(tempfile.mkdtemp(prefix="roder-attack-", dir="/var/tmp"))
    home = root / "roder-home"
    home.mkdir()
    monkeypatch.setenv("RODER_HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


def assert_private(path: Path) -> None:
    """Another local user reads neither the file nor its folder (the umask does not matter)."""
    assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
    assert path.parent.stat().st_mode & 0o077 == 0, oct(path.parent.stat().st_mode)


async def test_setsid_double_fork_and_nohup_do_not_outlive_task_kill_or_the_runtime(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    escape = (
        f"setsid -f python3 -c 'import time; time.sleep(600)' {mark}-setsid; "
        f"nohup python3 -c 'import time; time.sleep(600)' {mark}-nohup >/dev/null 2>&1 & disown; "
        "python3 -c 'import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        f"' {mark}-double; "
        f"exec python3 -u -c 'print(\"ready\"); import time; time.sleep(600)' {mark}-main"
    )
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=escape, run_in_background=True)]},
        {"text": "started"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "start it")
            task_id = results(runtime, thread.id)[0].data["task_id"]
            await wait_for_task(runtime, task_id, lambda t: t.last_line == "ready" or t.status != "running")
            for suffix in ("setsid", "nohup", "double", "main"):
                assert running(f"{mark}-{suffix}"), f"{suffix} never started"
            steps += [{"tool_calls": [call("task_kill", task_id=task_id)]}, {"text": "stopped"}]
            await runtime.run_turn(thread.id, "stop it")
            killed = results(runtime, thread.id)[1]
            assert not killed.is_error, killed.text
            # stopped by: bwrap --unshare-pid --die-with-parent (the namespace's init dies, the
            # kernel kills every process of the namespace, detached or not)
            assert_gone(mark)
        finally:
            await runtime.close()
    assert_gone(mark)


async def test_a_thread_cannot_read_another_threads_task_log_or_spilled_output_through_the_shell(
    workspace: Path, home_outside_tmp: Path
) -> None:
    mark = marker()
    steps = task_and_spill_steps(mark)
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, home_outside_tmp, server)
        try:
            owner = await runtime.start_thread()
            await runtime.run_turn(owner.id, "start it")
            started, big = results(runtime, owner.id)[:2]
            task_id = started.data["task_id"]
            await wait_for_task(runtime, task_id, lambda t: t.last_line == f"{mark}-task" or t.status != "running")
            cache = runtime.options.paths.cache_dir
            log = cache / "tasks" / owner.id / f"{task_id}.log"
            assert log.read_text().startswith(f"{mark}-task")
            assert "full output:" in big.text and str(cache) in big.text, big.text[-400:]
            assert_private(log)
            assert_private(Path(big.data["full_output_path"]))

            other = await runtime.start_thread()
            snoop = (
                f"cat {cache}/tasks/*/*.log {cache}/tool-output/*/* 2>&1 | grep -o '{mark}-[a-z]*' ; ls -la {cache} 2>&1; true"
            )
            steps += [{"tool_calls": [call("bash", command=snoop)]}, {"text": "looked"}]
            await runtime.run_turn(other.id, "look around")
            looked = results(runtime, other.id)[0]
            assert f"{mark}-task" not in looked.text, looked.text
            assert f"{mark}-spilled" not in looked.text, looked.text
        finally:
            await runtime.close()
    assert not running(mark)


async def test_a_secret_a_background_command_prints_is_redacted_and_its_log_is_private(workspace: Path, roder_home: Path) -> None:
    (workspace / "leak.txt").write_text(f"token={SECRET}\n")
    steps: list[dict[str, Any]] = [
        {
            "tool_calls": [
                call("bash", command="cat leak.txt; printenv | grep -c LOCAL_API_KEY; sleep 600", run_in_background=True)
            ]
        },
        {"text": "started"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "start it")
            task_id = results(runtime, thread.id)[0].data["task_id"]
            info = await wait_for_task(runtime, task_id, lambda t: t.last_line == "0" or t.status != "running")
            assert info.last_line == "0", info  # the key is not in the command's environment
            steps += [
                {"tool_calls": [call("task_output", task_id=task_id)]},
                {"tool_calls": [call("task_kill", task_id=task_id)]},
                {"text": "ok"},
            ]
            await runtime.run_turn(thread.id, "read it")
            output = results(runtime, thread.id)[1]
            assert "token=[redacted" in output.text and SECRET not in output.text, output.text
            assert SECRET not in Path(info.output_path).read_text()
            # the log and a spilled command output are the user's alone, whatever the umask
            assert_private(Path(info.output_path))
            steps += [{"tool_calls": [call("bash", command="python3 -c 'print(\"x\" * 200_000)'")]}, {"text": "ok"}]
            await runtime.run_turn(thread.id, "print a lot")
            assert_private(Path(results(runtime, thread.id)[3].data["full_output_path"]))
        finally:
            await runtime.close()
