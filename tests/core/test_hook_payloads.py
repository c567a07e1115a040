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


SECRET = "db-9f8e7d6c5b4a-secretvalue"


def secret_redactor() -> Any:
    from roder_core.brokers.secrets import SecretRedactor

    return SecretRedactor({"APP_DB_SECRET": SECRET})


class SystemAppender:
    """A hook that adds to the system prompt of the request it is shown (as plan mode does)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def id(self) -> str:
        return "appender"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.CONTEXT})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        self.seen.append(payload)
        request = payload["request"]
        return HookOutcome(replace={"request": request.model_copy(update={"system": request.system + "\n\nBe brief."})})


async def test_a_hook_sees_the_request_redacted_and_its_rewrite_keeps_the_real_values() -> None:
    from roder_core.ir import AgentInferenceRequest, Message, TextPart
    from roder_core.kernel.hook_payloads import RequestPayload

    request = AgentInferenceRequest(
        model="m", system=f"Key {SECRET}.", messages=[Message(role="user", parts=[TextPart(text=f"use {SECRET} please")])]
    )
    payload = RequestPayload(thread_id="t1", turn_id="u1", request=request, mode="ask", turn_started_at=0.0)
    hook = SystemAppender()
    result = await HookRunner([hook], redact=secret_redactor()).run(HookPoint.CONTEXT, payload)
    [seen] = hook.seen
    assert SECRET not in seen["request"].model_dump_json()
    assert seen["request"].messages[0].text() == "use [redacted:APP_DB_SECRET] please"
    assert result.request.system == f"Key {SECRET}.\n\nBe brief."
    assert result.request.messages[0].text() == f"use {SECRET} please"


async def test_a_marker_a_hook_moves_stays_a_marker_and_own_hooks_see_raw_values() -> None:
    moved = Rewriter(HookPoint.BEFORE_TURN, {"text": "[redacted:APP_DB_SECRET]"})
    raw = Rewriter(HookPoint.BEFORE_TURN, {})
    raw.sees_raw_payload = True  # type: ignore[attr-defined]
    payload = BeforeTurnPayload(thread_id="t1", turn_id="u1", text=f"the value is {SECRET}", cwd="/w", mode="ask")
    result = await HookRunner([raw, moved], redact=secret_redactor()).run(HookPoint.BEFORE_TURN, payload)
    assert raw.seen[0]["text"] == f"the value is {SECRET}"
    assert moved.seen[0]["text"] == "the value is [redacted:APP_DB_SECRET]"
    assert result.text == "[redacted:APP_DB_SECRET]"
