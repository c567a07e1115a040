"""Anthropic thinking from the model table: adaptive with effort for Opus 4.7 and the 4.6 family,
the budget form (with the interleaved-thinking beta, and room for the answer) for older models."""

from __future__ import annotations

import pytest

from roder_core.providers.model_table import builtin_profile
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import collect, make_engine, make_request


async def sent(model: str, effort: str | None, **table: object) -> tuple[dict, dict[str, str]]:
    async with FakeModelServer([{"text": "ok"}]) as server:
        engine = make_engine("anthropic-messages", server.base_url, **table)
        await collect(engine, make_request(model=model, reasoning_effort=effort, temperature=0.2))
        await engine.aclose()
    return server.calls[0].json, server.calls[0].headers


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("claude-opus-4-7", "high", "high"),
        ("claude-opus-4-7", "minimal", "low"),
        ("claude-opus-4-6", "low", "low"),
        ("claude-sonnet-4-6-20260101", "medium", "medium"),
    ],
)
async def test_adaptive_thinking_with_effort(model: str, effort: str, expected: str) -> None:
    body, headers = await sent(model, effort)
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": expected}
    assert "temperature" not in body
    assert "anthropic-beta" not in headers


async def test_no_effort_means_no_thinking() -> None:
    body, _ = await sent("claude-opus-4-6", None)
    assert "thinking" not in body
    assert "output_config" not in body


@pytest.mark.parametrize(
    ("model", "effort", "budget"),
    [
        ("claude-opus-4-1", "high", 24_000),  # 32,000 max: a quarter stays for the answer
        ("claude-sonnet-4-5", "high", 32_000),  # 64,000 max: the whole effort budget fits
        ("claude-haiku-4-5", "minimal", 1_024),
        ("claude-opus-4-5", "medium", 10_000),
    ],
)
async def test_budget_form_leaves_room_and_sends_the_interleaved_beta(model: str, effort: str, budget: int) -> None:
    body, headers = await sent(model, effort, headers={"anthropic-beta": "context-1m-2025-08-07"})
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] - budget >= max(body["max_tokens"] // 4, 4_096)
    assert "output_config" not in body
    assert "temperature" not in body
    assert headers["anthropic-beta"] == "context-1m-2025-08-07,interleaved-thinking-2025-05-14"


async def test_claude_3_7_uses_the_budget_form_without_the_beta() -> None:
    body, headers = await sent("claude-3-7-sonnet-latest", "low")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4_096}
    assert "anthropic-beta" not in headers


async def test_a_small_output_limit_turns_budget_thinking_off() -> None:
    body, _ = await sent("claude-sonnet-4-5", "high", models={"fake/claude-sonnet-4-5": {"max_output_tokens": 4_096}})
    assert "thinking" not in body
    assert "temperature" not in body
    assert body["max_tokens"] == 4_096


def test_thinking_is_table_data_a_config_table_can_override() -> None:
    assert builtin_profile("anthropic", "claude-opus-4-7").thinking == "adaptive"  # type: ignore[union-attr]
    older = builtin_profile("anthropic", "claude-opus-4-1")
    assert older is not None
    assert (older.thinking, older.interleaved_thinking) == ("budget", True)
