"""turn/steer/cancel and the steers a turn hands back (turn/completed ``unsentSteers``), and the
terminal state every tool call gets, on a real runtime through the control-plane client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import (
    THREAD_CLOSE,
    THREAD_READ,
    THREAD_START,
    TURN_INTERRUPT,
    TURN_START,
    TURN_STEER,
    TURN_STEER_CANCEL,
    ThreadCloseParams,
    ThreadReadParams,
    ThreadStartParams,
    TurnInterruptParams,
    TurnStartParams,
    TurnSteerCancelParams,
    TurnSteerParams,
)


def _script(workspace: Path, monkeypatch: pytest.MonkeyPatch, steps: list[dict[str, object]]) -> None:
    path = workspace.parent / "script.json"
    path.write_text(json.dumps({"steps": steps}))
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(path))


async def test_a_steer_can_be_taken_back_and_an_interrupt_hands_the_rest_back(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(workspace, monkeypatch, [{"text": "word " * 3000, "chunk_size": 5, "delay_ms": 20}, {"text": "next"}])
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock"))
    try:
        thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
        events = client.subscribe()
        turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="start"))).turn
        async for event in events:  # the long answer is streaming
            if event.method == "item/agentMessage/delta":
                break
        first = await client.call(
            TURN_STEER, TurnSteerParams(thread_id=thread.id, expected_turn_id=turn.id, prompt="take me back")
        )
        taken = await client.call(TURN_STEER_CANCEL, TurnSteerCancelParams(thread_id=thread.id, item_id=first.item_id))
        assert (taken.cancelled, taken.text) == (True, "take me back")
        assert not (
            await client.call(TURN_STEER_CANCEL, TurnSteerCancelParams(thread_id=thread.id, item_id=first.item_id))
        ).cancelled
        await client.call(TURN_STEER, TurnSteerParams(thread_id=thread.id, expected_turn_id=turn.id, prompt="left unsent"))
        assert (await client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=thread.id, turn_id=turn.id))).interrupted
        async for event in events:
            if event.method == "turn/completed":
                assert [m.text for m in event.unsent_steers] == ["left unsent"]
                break
        await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="unrelated"))
        stored = await client.runtime.wait_turn(thread.id)
        assert [i.text for i in stored.items if i.type == "userMessage"] == ["unrelated"]
    finally:
        await client.close()


async def test_an_interrupted_call_gets_a_stored_result(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _script(workspace, monkeypatch, [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}])
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", mode="bypass", sandbox="off"))
    try:
        thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
        events = client.subscribe()
        turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
        async for event in events:
            if event.method == "item/started" and event.item.type == "toolCall":
                break
        await client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=thread.id, turn_id=turn.id))
        await client.call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread.id))
        stored = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
        results = [i for i in stored.items() if i.type == "toolResult"]
        assert len(results) == 1
        assert results[0].is_error
        assert results[0].data == {"interrupted": True}
    finally:
        await client.close()


async def test_a_steer_attaches_the_files_it_names(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """turn/steer takes the same input items as turn/start: a file is read through the workspace's
    rules and reaches the model with the queued message."""
    from roder_core.server.errors import RpcError
    from roder_core.server.protocol import InputItem

    (workspace / "notes.md").write_text("STEERED-NOTES\n")
    wait = "until [ -f go ]; do sleep 0.05; done"
    _script(workspace, monkeypatch, [{"tool_calls": [{"name": "bash", "arguments": {"command": wait}}]}, {"text": "done"}])
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", mode="bypass", sandbox="off"))
    try:
        thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
        events = client.subscribe()
        turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
        async for event in events:
            if event.method == "item/started" and event.item.type == "toolCall":
                break
        notes = InputItem(type="file", path=str(workspace / "notes.md"))
        with pytest.raises(RpcError, match="needs a prompt"):
            await client.call(TURN_STEER, TurnSteerParams(thread_id=thread.id, expected_turn_id=turn.id))
        params = TurnSteerParams(thread_id=thread.id, expected_turn_id=turn.id, prompt="and these notes", input=[notes])
        await client.call(TURN_STEER, params)
        (workspace / "go").write_text("")
        stored = await client.runtime.wait_turn(thread.id)
        [steer] = [i for i in stored.items if i.type == "userMessage" and i.steer]
        assert steer.text == "and these notes"
        assert [(a.name, a.text) for a in steer.attachments] == [("notes.md", "STEERED-NOTES\n")]
    finally:
        await client.close()
