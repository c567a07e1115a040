"""``/cost`` and ``/usage``: a thread's tokens, cost, context and time, as Claude Code's
``/cost`` and Codex's ``/status`` report them. Typed in the app they used to be refused as an
unknown command; the report is the runtime's, so every client shows the same lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.ir import ModelProfile, Thread, Turn, TurnStatus, Usage
from roder_core.threads.usage_report import usage_report
from tests.tui.helpers import ask, make_app, ready, until

USAGE = {"input_tokens": 12_400, "output_tokens": 2_100, "cached_input_tokens": 8_000, "reasoning_tokens": 300}


@pytest.mark.parametrize("typed", ["/cost", "/usage"])
async def test_cost_shows_the_threads_usage(workspace: Path, monkeypatch: pytest.MonkeyPatch, typed: str) -> None:
    steps = [{"text": "first", "usage": USAGE}, {"text": "second", "usage": USAGE}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "one")
        await ask(pilot, "two", answers=2)
        await pilot.press(*typed, "enter")
        await until(pilot, lambda: type(app.screen).__name__ == "InfoScreen", what=f"{typed}'s report")
        text = app.screen.text  # type: ignore[attr-defined]
        assert app.screen.title_text == typed  # type: ignore[attr-defined]
        assert "model: mock/mock" in text
        assert "input: 24.8k tokens (16.0k read from the cache)" in text
        assert "output: 4.2k tokens (600 reasoning)" in text
        assert "cost: $0.0000" in text or "cost: not known" in text
        assert "turns: 2, 2 model calls" in text
        assert app.prompt_bar.input.text == ""


async def test_cost_before_any_prompt_says_nothing_is_used(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"/cost", "enter")
        await until(
            pilot,
            lambda: any(n.message == "nothing used yet in this thread: no prompt has been sent" for n in app._notifications),
            what="the notice",
        )
        assert app.prompt_bar.input.text == ""


def test_the_report_prices_known_models_and_says_when_the_price_is_unknown() -> None:
    turn = Turn(
        status=TurnStatus.COMPLETED,
        started_at=100.0,
        completed_at=172.5,
        model_calls=3,
        usage=Usage(input_tokens=50_000, output_tokens=1_000),
    )
    running = Turn(started_at=200.0, usage=Usage())
    thread = Thread(cwd="/w", provider="local", model="qwen", turns=[turn, running], usage=turn.usage)
    unpriced = usage_report(thread, ModelProfile(id="qwen", context_window=128_000))
    assert "cost: not known (no price for this model" in unpriced
    assert "context: 51.0k of 128.0k (39%) in the last request" in unpriced
    assert "turns: 1 (+1 running, not counted yet), 3 model calls, 1m12s in turns" in unpriced
    priced = thread.model_copy(update={"usage": turn.usage.model_copy(update={"cost_usd": 0.1234})})
    assert "cost: $0.1234" in usage_report(priced, ModelProfile(id="qwen", input_price=3.0, output_price=15.0))
    estimated = thread.model_copy(update={"usage": Usage(input_tokens=10, estimated=True)})
    assert "estimated: the provider reported none" in usage_report(estimated, None)
