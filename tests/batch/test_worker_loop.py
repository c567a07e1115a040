"""A worker keeps one event loop and its model clients from one rollout to the next; nothing of
one rollout reaches the next through them: not its shell's environment or folder, its files,
its cookies or credentials, its context variables or the tasks it left running."""

from __future__ import annotations

import asyncio
import contextvars
import json
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from roder_core.batch.worker_loop import close_worker_loop, run_on_worker_loop
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.batch.conftest import result, run_cli, steps, write_jsonl


def _script() -> list[dict[str, Any]]:
    first_call = {
        "text": "Leaving traces.",
        "headers": {"set-cookie": "session=from-the-first-rollout; Path=/"},
        "tool_calls": [
            {
                "name": "bash",
                "arguments": {"command": "echo first > shell-note.txt; export ROLLOUT_LEAK=1; cd /; echo FIRST-DONE"},
            }
        ],
    }
    second_call = {
        "text": "Looking around.",
        "tool_calls": [
            {"name": "bash", "arguments": {"command": 'echo "cwd=$(pwd) leak=${ROLLOUT_LEAK:-none} SECOND-SAW"; ls -a'}}
        ],
    }
    return [
        {**first_call, "when": "Case first", "unless": "FIRST-DONE"},
        {"text": "Done.", "when": ["Case first", "FIRST-DONE"]},
        {**second_call, "when": "Case second", "unless": "SECOND-SAW"},
        {"text": "Done.", "when": ["Case second", "SECOND-SAW"]},
    ]


def test_the_next_rollout_on_the_kept_loop_and_client_sees_none_of_the_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roder_home: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "readme.txt").write_text("base\n")
    with ThreadedFakeServer(_script()) as server:
        (roder_home / "config.toml").write_text(
            f'[providers.fk]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\n'
            'models = ["fake-model"]\napi_key_env = "FK_TEST_KEY"\n'
        )
        tasks = write_jsonl(
            tmp_path / "tasks.jsonl",
            [
                {
                    "id": name,
                    "prompt": f"Case {name}.",
                    "workspace": str(source),
                    "score": "true",
                    "env": {"FK_TEST_KEY": f"key-of-the-{name}-rollout"},
                }
                for name in ("first", "second")
            ],
        )
        out = tmp_path / "out"
        code, _, stderr = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "1", "--provider", "fk", "--no-progress")
        calls = server.calls
    assert code == 0, stderr
    one, two = result(out, "first"), result(out, "second")
    assert one["passed"] and two["passed"], (one, two)
    assert one["host"]["pid"] == two["host"]["pid"]  # one worker ran both, one after the other

    by_rollout = {name: [c for c in calls if f"Case {name}." in json.dumps(c.json)] for name in ("first", "second")}
    assert [len(c) for c in by_rollout.values()] == [2, 2]
    # The kept client: the second rollout's calls came on the connection the first one opened...
    assert {c.connection for c in calls} == {by_rollout["first"][0].connection}
    # ...and carried its own key, and no cookie the server set in the first rollout.
    assert all(c.headers["authorization"] == "Bearer key-of-the-first-rollout" for c in by_rollout["first"])
    assert all(c.headers["authorization"] == "Bearer key-of-the-second-rollout" for c in by_rollout["second"])
    assert "from-the-first-rollout" in by_rollout["first"][1].headers.get("cookie", "")  # within a rollout, as usual
    assert not any("cookie" in c.headers for c in by_rollout["second"])

    first_bash = next(s["result"] for s in steps(out, "first") if s["type"] == "tool_call")
    assert "FIRST-DONE" in json.dumps(first_bash)  # the traces were really left
    second_bash = json.dumps(next(s["result"] for s in steps(out, "second") if s["type"] == "tool_call"))
    assert "leak=none" in second_bash
    assert "cwd=/ " not in second_bash and "cwd=" + str(source) not in second_bash
    assert "readme.txt" in second_bash and "shell-note.txt" not in second_bash


_rollout_mark: contextvars.ContextVar[str] = contextvars.ContextVar("rollout_mark", default="unset")


def test_a_rollouts_context_and_leftover_tasks_end_with_it() -> None:
    seen: dict[str, Any] = {}

    async def first() -> asyncio.AbstractEventLoop:
        _rollout_mark.set("first")

        async def left_running() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                seen["leftover finished"] = True

        seen["leftover"] = asyncio.get_running_loop().create_task(left_running())
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    async def second() -> asyncio.AbstractEventLoop:
        seen["mark"] = _rollout_mark.get()
        seen["other tasks"] = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return asyncio.get_running_loop()

    try:
        loop_one = run_on_worker_loop(first)
        assert seen["leftover"].cancelled() and seen["leftover finished"]  # cancelled before the call returned
        loop_two = run_on_worker_loop(second)
        assert loop_two is loop_one and not loop_one.is_closed()  # the loop is kept...
        assert seen["mark"] == "unset" and seen["other tasks"] == []  # ...and nothing of the first is on it
        assert _rollout_mark.get() == "unset"
    finally:
        close_worker_loop()
    assert loop_one.is_closed()


def test_an_interrupted_rollout_unwinds_and_the_next_gets_a_new_loop() -> None:
    """SIGTERM in a pool worker (or Ctrl-C of ``roder exec``) arrives as an exception inside the
    loop: the loop is closed as ``asyncio.run`` closes its own, so the rollout's tasks unwind
    (their commands are killed) before the exception goes on."""
    unwound: list[str] = []

    async def interrupted() -> None:
        async def command() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                unwound.append("command")

        asyncio.get_running_loop().create_task(command())
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    async def loop_of() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    try:
        before = run_on_worker_loop(loop_of)
        with pytest.raises(KeyboardInterrupt):
            run_on_worker_loop(interrupted)
        assert unwound == ["command"] and before.is_closed()
        after = run_on_worker_loop(loop_of)
        assert after is not before and not after.is_closed()
    finally:
        close_worker_loop()


def _report_modules(conn: Connection) -> None:
    conn.send({name: name in sys.modules for name in PRELOADED})


PRELOADED = ("roder_core.batch.worker", "roder_core.runtime.bootstrap", "httpx", "tree_sitter_bash")


def test_a_worker_starts_with_the_runtime_the_model_client_and_the_command_parser_imported() -> None:
    """What every rollout needs is imported once by the fork server, not by each worker."""
    from roder_core.batch.pool import worker_context

    context = worker_context()
    if context.get_start_method() != "forkserver":
        pytest.skip("this platform has no fork server: workers are spawned and import on their own")
    parent, child = context.Pipe()
    process = context.Process(target=_report_modules, args=(child,))
    process.start()
    child.close()
    try:
        report = parent.recv()
    finally:
        process.join()
    assert report == dict.fromkeys(PRELOADED, True)
