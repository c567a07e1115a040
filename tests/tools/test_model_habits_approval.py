"""Calls that cannot apply are never offered for approval, through the real loop: a scripted
model on the loopback server, in ``ask`` mode (writes and commands need a person), the approval
requests answered as a client would. A ``write`` to a file that changed on disk since the model
read it, an ``edit`` or ``apply_patch`` whose text no longer matches, a ``bash`` timeout in
milliseconds, a ``write`` to a folder: the model gets the tool's own refusal at once, and the person is asked about
nothing that would then fail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from roder_core.ir import ApprovalDecision, ApprovalRequest, ToolResultItem
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.runtime.runtime import Runtime
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads.events import ApprovalRequested

MODEL = "gpt-4.1"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def loopback_runtime(workspace: Path, home: Path, base_url: str) -> Runtime:
    """The real bootstrap (every built-in extension) with a chat-completions provider at
    ``base_url``, interactive, in ``ask`` mode."""
    (home / "config.toml").write_text(
        f'[providers.loop]\ndialect = "chat-completions"\nbase_url = "{base_url}"\nmodels = ["{MODEL}"]\n'
    )
    env = {"RODER_HOME": str(home), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    settings = StartSettings(
        cwd=workspace, provider="loop", model=MODEL, mode="ask", sandbox="off", interactive=True, trust=False, env=env
    )
    return start_runtime(settings).runtime


def allow_all(runtime: Runtime, seen: list[ApprovalRequest]) -> None:
    """Allow every approval request once, remembering it, as a client answering would."""

    def on_event(event: Any) -> None:
        if isinstance(event, ApprovalRequested):
            seen.append(event.request)
            decision = ApprovalDecision(decision="allow_once")
            asyncio.get_running_loop().call_soon(runtime.resolve_approval, event.request.approval_id, decision)

    runtime.bus.add_listener(on_event)


async def run(workspace: Path, home: Path, steps: list[dict[str, Any]]) -> tuple[list[ApprovalRequest], list[ToolResultItem]]:
    seen: list[ApprovalRequest] = []
    async with FakeModelServer(steps, models=(MODEL,)) as server:
        runtime = loopback_runtime(workspace, home, server.base_url)
        allow_all(runtime, seen)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "go")
        items = runtime.thread(thread.id).items()
        await runtime.close()
    assert turn.status == "completed", turn.error
    return seen, [i for i in items if isinstance(i, ToolResultItem)]


async def test_a_stale_write_edit_or_patch_is_refused_without_asking_anyone(workspace: Path, roder_home: Path) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\n")
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    (workspace / "src").mkdir()
    steps = [
        {"tool_calls": [call("read", path="notes.txt"), call("read", path="a.py")]},
        # a formatter, the user or another agent changes both files (allowed by the person)
        {"tool_calls": [call("bash", command="echo three >> notes.txt && sed -i 's/x = 1/x = 10/' a.py")]},
        {"tool_calls": [call("write", path="notes.txt", content="one\nTWO\n")]},
        {"tool_calls": [call("edit", path="a.py", old_string="x = 1\n", new_string="x = 3\n")]},
        {"tool_calls": [call("apply_patch", patch="*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 3\n*** End Patch")]},
        {"tool_calls": [call("bash", command="sleep 1", timeout=30000)]},  # Claude Code's milliseconds
        {"tool_calls": [call("write", path="src", content="x\n")]},  # a folder, not a file
        {"tool_calls": [call("edit", path="src", old_string="a", new_string="b")]},  # the broker says why
        {"tool_calls": [call("write", path="fresh.txt", content="new\n")]},  # applies: the person is asked
        {"text": "ok"},
    ]
    seen, results = await run(workspace, roder_home, steps)
    assert [r.tool for r in seen] == ["bash", "write"], "only calls that can apply are offered for approval"
    assert seen[1].arguments["path"] == "fresh.txt"
    assert seen[1].diff is not None and "+new" in seen[1].diff
    write, edit, patch, slow, folder = results[3], results[4], results[5], results[6], results[7]
    assert folder.is_error
    assert folder.text == "src is a folder; give the path of the file to write"
    assert results[8].is_error
    assert results[8].text == "src is a folder; use ls or glob to list it"
    assert slow.is_error
    assert slow.text == (
        "not run: timeout is in seconds, at most 3600; 30000 looks like milliseconds; for 30 seconds send timeout=30"
    )
    assert write.is_error
    assert write.text == (
        "refused: notes.txt changed on disk since you last read or wrote it (a command, the user, a formatter or another "
        "agent changed it); writing now would discard those changes. Read it again and redo your change on its current content"
    )
    for refused in (edit, patch):
        assert refused.is_error
        assert refused.text.endswith("The file changed on disk since you last read or wrote it; read it again before editing.")
    assert (workspace / "notes.txt").read_text() == "one\ntwo\nthree\n"
    assert (workspace / "a.py").read_text() == "x = 10\ny = 2\n"
    assert (workspace / "fresh.txt").read_text() == "new\n"
