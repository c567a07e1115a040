"""The app uses the control plane for thread locks: a thread it leaves is free for other processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.server.protocol import THREAD_READ, THREAD_RESUME, ThreadReadParams, ThreadResumeParams
from tests.tui.helpers import ask, make_app, ready, shown, until


async def _resume_elsewhere(workspace: Path, thread_id: str) -> None:
    """Resume from a second runtime with its own store handles (the lock is a per-file flock)."""
    other = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock"))
    try:
        await other.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread_id))
    finally:
        await other.close()


async def test_switching_away_releases_the_left_thread(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first thread")
        first = app.thread_id
        assert first is not None
        with pytest.raises(RpcError, match="another Roder process"):
            await _resume_elsewhere(workspace, first)  # visible: still this app's to write
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.thread_id != first, what="a new thread")
        await _resume_elsewhere(workspace, first)
        await ask(pilot, "second thread")
        second = app.thread_id
        assert second is not None
        await app.switch_thread(first)  # back again: the app can claim it once more
        assert app.thread_id == first
        await _resume_elsewhere(workspace, second)


async def test_first_run_screen_mentions_stored_keys(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Static

    from roder_tui.screens.first_run import FirstRunScreen

    app = make_app(workspace, None, monkeypatch, provider=None)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: shown(app, FirstRunScreen), what="the first-run screen")

        def drawn() -> str:
            return "\n".join(str(s.render()) for s in app.screen.query(Static))

        # The screen is pushed before its text is composed: wait for the words, not the screen.
        await until(pilot, lambda: "roder providers login anthropic" in drawn(), what="the stored-keys hint")
        await pilot.press("q")


async def test_a_subagents_approval_is_shown_and_resolved(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_core.ir import ToolResultItem
    from roder_tui.screens.approval import ApprovalScreen

    # The mock engine keeps a position per thread, so the parent and the child both play these
    # steps: the parent delegates and runs bash; in the child `task` is unknown and bash needs approval.
    steps = [
        {
            "tool_calls": [
                {"name": "task", "arguments": {"description": "run it", "prompt": "run echo"}},
                {"name": "bash", "arguments": {"command": "echo hi-from-bash"}},
            ]
        },
        {"text": "done"},
    ]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"delegate", "enter")
        asked: list[str] = []
        while len(asked) < 2:
            await until(
                pilot,
                lambda: isinstance(app.screen, ApprovalScreen) and app.screen.request.thread_id not in asked,
                what="an approval modal",
            )
            assert isinstance(app.screen, ApprovalScreen)
            asked.append(app.screen.request.thread_id)
            await pilot.press("y")
        await until(pilot, lambda: app.turn_id is None and app.status_bar.state["activity"] == "idle", what="the turn to finish")
        assert app.thread_id in asked
        assert len(set(asked)) == 2  # the parent's and the child's
        thread = (
            await app._client().call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id or "", include_turns=True))
        ).thread
        results = {i.name: i for i in thread.turns[-1].items if isinstance(i, ToolResultItem)}
        child = results["task"].data["subagent"]
        assert child["childThreadId"] in asked
        child_bash = [i for i in child["items"] if i["type"] == "toolResult" and i["name"] == "bash"]
        assert child_bash
        assert "hi-from-bash" in child_bash[0]["text"]
