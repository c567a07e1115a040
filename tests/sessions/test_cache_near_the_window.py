"""The prompt cache near the context window, through the real loop: old tool outputs are
shortened in large sticky steps, so consecutive requests stay extensions of each other except
at a few step boundaries; while automatic compaction may run, it alone makes room (nothing is
shortened first), and it asks for its summary as the next message of the cached conversation
when that fits the window."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from roder_core.errors import InferenceError
from roder_core.ir import AgentInferenceRequest, CompactionItem, ToolResultPart
from roder_core.kernel.services import InferenceTurnContext
from roder_core.kernel.tools import Tool, ToolResult
from roder_core.runtime.runtime import Runtime
from roder_core.settings.config import RoderConfig
from roder_core.turn.compaction import IN_PLACE_PROMPT, SUMMARY_SYSTEM
from roder_core.turn.tokens import request_tokens
from tests.core.harness import TestExtension
from tests.sessions.harness import RecordingEngine, make_runtime

SUMMARY = "## Goal\nShip it\n## Constraints\nnone\n## Progress\nhalf\n## Decisions\nnone\n## Next steps\nfinish"


class Cat(Tool):
    name = "cat"
    description = "Print a file (about 1,500 tokens)."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    read_only = True

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text=f"{call.arguments['path']}: " + "x" * 6_000)


def extends(later: AgentInferenceRequest, earlier: AgentInferenceRequest) -> bool:
    """Whether ``later`` starts with everything ``earlier`` sent (what a prompt cache reuses)."""
    return (
        later.system == earlier.system
        and later.tools == earlier.tools
        and later.messages[: len(earlier.messages)] == earlier.messages
    )


async def test_trimming_near_the_window_breaks_the_cache_only_at_step_boundaries(workspace: Path) -> None:
    turns, calls = 12, 2
    script: list[dict[str, Any]] = []
    for turn in range(turns):
        script += [{"tool_calls": [{"name": "cat", "arguments": {"path": f"f{turn}-{n}.txt"}}]} for n in range(calls)]
        script.append({"text": f"done {turn}"})
    config = RoderConfig.model_validate(
        {"models": {"mock": {"context_window": 24_000}}, "context": {"reserve_tokens": 4_000, "auto_compact": False}}
    )
    runtime, engine = make_runtime(workspace, script, extensions=[TestExtension([Cat()])], config=config)
    thread = await runtime.start_thread()
    for turn in range(turns):
        assert (await runtime.run_turn(thread.id, f"turn {turn}")).status == "completed"
    await runtime.close()
    requests = engine.requests
    shortened = [
        sum("older tool output were removed" in p.text for m in r.messages for p in m.parts if isinstance(p, ToolResultPart))
        for r in requests
    ]
    assert max(shortened) > 0, "the session reached the window"
    assert shortened == sorted(shortened), "what was shortened stays shortened"
    breaks = [i for i in range(1, len(requests)) if not extends(requests[i], requests[i - 1])]
    steps = len(set(shortened) - {0})
    assert len(breaks) == steps, (breaks, shortened)
    assert len(breaks) <= len(requests) // 8
    # each break frees at least a quarter of the window (6,000 tokens: four outputs)
    jumps = [b - a for a, b in itertools.pairwise(shortened) if b != a]
    assert min(jumps) >= 4


async def test_auto_compaction_extends_the_cached_conversation(workspace: Path) -> None:
    script = [{"text": "reply 1"}, {"text": "reply 2"}, {"text": "reply 3"}, {"text": SUMMARY}, {"text": "reply 4"}]
    config = RoderConfig.model_validate({"models": {"mock": {"context_window": 40_000}}, "context": {"reserve_tokens": 10_000}})
    runtime, engine = make_runtime(workspace, script, config=config)
    thread = await runtime.start_thread()
    for n in range(1, 5):
        assert (await runtime.run_turn(thread.id, f"task {n} " + "w" * 32_000)).status == "completed"
    await runtime.close()
    assert len(engine.requests) == 5, "turns 1-3 fit; turn 4 needed one summary call"
    previous, summarizer, after = engine.requests[2], engine.requests[3], engine.requests[4]
    assert summarizer.system != SUMMARY_SYSTEM
    assert extends(summarizer, previous), "the summary request reuses the cached conversation"
    assert summarizer.messages[-1].text().startswith(IN_PLACE_PROMPT)
    assert summarizer.messages[-2].text().startswith("task 4")
    assert "Ship it" in after.messages[0].text()


def is_summary_request(request: AgentInferenceRequest) -> bool:
    last = request.messages[-1].text() if request.messages else ""
    return request.system == SUMMARY_SYSTEM or last.startswith(IN_PLACE_PROMPT)


class Summarizing(RecordingEngine):
    """Answers every summary request with ``SUMMARY`` (or fails it: ``fail``), whenever it
    comes; every other request takes the script's next step."""

    def __init__(self, script: list[dict[str, Any]], fail: bool = False) -> None:
        super().__init__(script)
        self.fail = fail

    def _next_step(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> dict[str, Any]:
        if is_summary_request(request):
            if self.fail:
                raise InferenceError("the summarizer is down", "provider")
            return {"text": SUMMARY}
        return super()._next_step(ctx, request)


def reading_session(workspace: Path, turns: int, calls: int, fail: bool = False) -> tuple[Runtime, RecordingEngine]:
    script: list[dict[str, Any]] = []
    for turn in range(turns):
        script += [{"tool_calls": [{"name": "cat", "arguments": {"path": f"f{turn}-{n}.txt"}}]} for n in range(calls)]
        script.append({"text": f"done {turn}"})
    # the reserve is a quarter of the window: room for the summary request to extend the conversation
    config = RoderConfig.model_validate({"models": {"mock": {"context_window": 32_000}}})
    engine = Summarizing(script, fail=fail)
    return make_runtime(workspace, extensions=[TestExtension([Cat()])], config=config, engine=engine)


def shortened_outputs(request: AgentInferenceRequest) -> int:
    return sum(
        "older tool output were removed" in p.text for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)
    )


async def test_with_auto_compaction_the_cache_breaks_only_at_compactions(workspace: Path) -> None:
    runtime, engine = reading_session(workspace, turns=20, calls=3)
    thread = await runtime.start_thread()
    for turn in range(20):
        assert (await runtime.run_turn(thread.id, f"turn {turn}")).status == "completed"
    compactions = [i for i in runtime.thread(thread.id).items() if isinstance(i, CompactionItem)]
    await runtime.close()
    requests = engine.requests
    summaries = [i for i, r in enumerate(requests) if is_summary_request(r)]
    assert len(summaries) == len(compactions) >= 2, "the session reached the window again and again"
    assert not any(shortened_outputs(r) for r in requests), "compaction, not shortening, made room"
    for index in summaries:
        assert extends(requests[index], requests[index - 1]), "the summary request reuses the cached conversation"
    breaks = [i for i in range(1, len(requests)) if not extends(requests[i], requests[i - 1])]
    assert breaks == [i + 1 for i in summaries], "the only breaks are the first requests after each summary"
    # deep: each compaction leaves at most a third of the budget (24,000 tokens), so they come rarely
    assert all(c.tokens_after is not None and c.tokens_after < 24_000 // 3 for c in compactions)
    assert len(requests) - len(summaries) >= 5 * len(summaries)


async def test_when_compaction_cannot_make_room_old_outputs_are_still_shortened(workspace: Path) -> None:
    runtime, engine = reading_session(workspace, turns=8, calls=3, fail=True)
    thread = await runtime.start_thread()
    for turn in range(8):
        assert (await runtime.run_turn(thread.id, f"turn {turn}")).status == "completed"
    await runtime.close()
    answered = [r for r in engine.requests if not is_summary_request(r)]
    assert any(is_summary_request(r) for r in engine.requests), "compaction was tried"
    assert max(shortened_outputs(r) for r in answered) > 0
    budget = 24_000
    assert all(request_tokens(r) <= budget for r in answered)
