"""Hook payloads are typed: hooks see the fields, and a rewrite must keep their types."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from roder_core.kernel.hook_payloads import BeforeTurnPayload, ToolCallPayload, ToolResultPayload
from roder_core.kernel.services import HookOutcome, HookPoint
from roder_core.turn.hooks import HookBlocked, HookRunner


class Rewriter:
    def __init__(self, point: HookPoint, replace: dict[str, Any]) -> None:
        self.point = point
        self.replace = replace
        self.seen: list[dict[str, Any]] = []

    def id(self) -> str:
        return "rewriter"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({self.point})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        self.seen.append(payload)
        return HookOutcome(replace=self.replace)


def call_payload() -> ToolCallPayload:
    return ToolCallPayload(
        thread_id="t1", turn_id="u1", tool="bash", arguments={"command": "ls"}, call_id="c1", cwd="/w", mode="ask"
    )


async def test_hooks_see_the_fields_and_the_transcript_path() -> None:
    hook = Rewriter(HookPoint.TOOL_CALL_BEFORE, {"arguments": {"command": "ls -la"}, "permission": "ask"})
    runner = HookRunner([hook], transcript_path=lambda thread_id: f"/data/{thread_id}.jsonl")
    result = await runner.run(HookPoint.TOOL_CALL_BEFORE, call_payload())
    assert isinstance(result, ToolCallPayload)
    assert result.arguments == {"command": "ls -la"}
    assert result.permission == "ask"
    [seen] = hook.seen
    assert seen["tool"] == "bash"
    assert seen["permission"] is None
    assert seen["transcript_path"] == "/data/t1.jsonl"


async def test_a_wrong_rewrite_at_a_gating_point_denies_and_names_the_field() -> None:
    runner = HookRunner([Rewriter(HookPoint.TOOL_CALL_BEFORE, {"arguments": "rm -rf /"})])
    with pytest.raises(HookBlocked, match=r"rewrote the payload wrongly \(arguments: .*dictionary.*\); denied"):
        await runner.run(HookPoint.TOOL_CALL_BEFORE, call_payload())


async def test_an_unknown_permission_is_refused() -> None:
    runner = HookRunner([Rewriter(HookPoint.TOOL_CALL_BEFORE, {"permission": "always"})])
    with pytest.raises(HookBlocked, match="permission"):
        await runner.run(HookPoint.TOOL_CALL_BEFORE, call_payload())


async def test_a_wrong_rewrite_at_an_observing_point_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    runner = HookRunner([Rewriter(HookPoint.TOOL_RESULT_AFTER, {"text": ["not", "text"]})])
    payload = ToolResultPayload(thread_id="t1", tool="read", arguments={}, text="file body", is_error=False)
    with caplog.at_level(logging.WARNING):
        result = await runner.run(HookPoint.TOOL_RESULT_AFTER, payload)
    assert result.text == "file body"
    assert "rewrote the payload wrongly (text:" in caplog.text


async def test_each_hook_sees_the_previous_rewrite() -> None:
    first = Rewriter(HookPoint.BEFORE_TURN, {"text": "one"})
    second = Rewriter(HookPoint.BEFORE_TURN, {})
    runner = HookRunner([first, second])
    payload = BeforeTurnPayload(thread_id="t1", turn_id="u1", text="zero", cwd="/w", mode="ask")
    result = await runner.run(HookPoint.BEFORE_TURN, payload)
    assert result.text == "one"
    assert second.seen[0]["text"] == "one"
