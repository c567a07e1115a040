"""Compaction: where it cuts, when it runs (budget, context overflow, /compact), what it writes,
and that a hook can write the summary instead of the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from roder_ext_jsonl_store import JsonlThreadStore

from roder_core import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    HookOutcome,
    HookPoint,
    ProvidedService,
    RoderExtension,
    Tool,
    ToolRegistry,
    ToolResult,
)
from roder_core.errors import RoderError
from roder_core.ir import (
    AgentMessageItem,
    CompactionItem,
    ReasoningItem,
    ToolCallItem,
    ToolResultItem,
    UserMessageItem,
)
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from roder_core.turn.compaction import SUMMARY_SYSTEM, plan_compaction, safe_cut_points
from roder_core.turn.context import COMPACTION_PREFIX, history_to_messages

from .harness import make_runtime

SUMMARY = "## Goal\nShip the feature\n## Constraints\nnone\n## Progress\nhalf\n## Decisions\nnone\n## Next steps\nfinish"


def small_window(**context: Any) -> RoderConfig:
    """A 4,000-token window: the prompt budget is 3,000 tokens, 750 of them kept verbatim."""
    return RoderConfig.model_validate({"models": {"mock": {"context_window": 4_000}}, "context": context})


class BigRead(Tool):
    name = "read"
    description = "Read a file (returns a lot)."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    read_only = True

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text=f"contents of {call.arguments['path']} " + "z" * 4_800)


class Edit(Tool):
    name = "edit"
    description = "Edit a file."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text="edited")


class SummaryHook:
    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def id(self) -> str:
        return "custom-summary"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.COMPACTION})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        self.payloads.append(payload)
        return HookOutcome(replace={"summary": f"custom summary of {len(payload['items'])} items"})


class Extras(RoderExtension):
    def __init__(self, tools: list[Tool] = (), hooks: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.tools, self.hooks = list(tools), list(hooks)

    def manifest(self) -> ExtensionManifest:
        provides = [ProvidedService.ToolProvider("compaction-test-tools")]
        provides += [ProvidedService.Hook(h.id()) for h in self.hooks]
        return ExtensionManifest(
            id="compaction-test", name="t", version="0.1.0", api_version=EXTENSION_API_VERSION, provides=provides
        )

    def install(self, registry: Any) -> None:
        tools = self.tools

        class Contributor:
            def id(self) -> str:
                return "compaction-test-tools"

            def contribute(self, reg: ToolRegistry) -> None:
                for tool in tools:
                    reg.register(tool)

        registry.tool_contributor(Contributor())
        for hook in self.hooks:
            registry.hook(hook)


def _prompt(n: int) -> str:
    return f"task {n} " + "w" * 3_200


# --------------------------------------------------------------------------- where to cut


def test_cuts_never_separate_a_call_from_its_result_or_split_an_assistant_message() -> None:
    items = [
        UserMessageItem(text="u"),  # 0
        ToolCallItem(call_id="a", name="read"),  # 1 safe (starts the assistant message)
        ToolResultItem(call_id="a", name="read", text="r"),  # 2
        ReasoningItem(text="think"),  # 3 safe
        ToolCallItem(call_id="b", name="read"),  # 4 same assistant message as 3
        ToolCallItem(call_id="c", name="read"),  # 5
        ToolResultItem(call_id="b", name="read", text="r"),  # 6
        ToolResultItem(call_id="c", name="read", text="r"),  # 7
        AgentMessageItem(text="done"),  # 8 safe
        UserMessageItem(text="next"),  # 9 safe
    ]
    assert safe_cut_points(items) == [1, 3, 8, 9]


@st.composite
def _histories(draw: st.DrawFn) -> list:
    items: list = []
    for turn in range(draw(st.integers(1, 5))):
        items.append(UserMessageItem(text=f"u{turn} " + "x" * draw(st.integers(0, 400))))
        for round_ in range(draw(st.integers(0, 3))):
            calls = draw(st.integers(1, 3))
            for c in range(calls):
                items.append(ToolCallItem(call_id=f"{turn}.{round_}.{c}", name="read", arguments={"path": "p"}))
            for c in range(calls):
                items.append(ToolResultItem(call_id=f"{turn}.{round_}.{c}", name="read", text="y" * draw(st.integers(0, 2_000))))
        items.append(AgentMessageItem(text="a" * draw(st.integers(0, 300))))
    return items


@settings(max_examples=150, deadline=None)
@given(_histories(), st.integers(0, 3_000))
def test_a_compaction_plan_keeps_every_call_with_its_result(items: list, keep: int) -> None:
    plan = plan_compaction(items, keep)
    if plan is None:
        return
    summarized = {i.call_id for i in plan.summarize if isinstance(i, ToolCallItem)}
    kept_results = {i.call_id for i in plan.keep if isinstance(i, ToolResultItem)}
    assert not summarized & kept_results
    assert not isinstance(plan.keep[0] if plan.keep else None, ToolResultItem)
    assert plan.summarize
    assert plan.summarize + plan.keep == items


# --------------------------------------------------------------------------- automatic


async def test_auto_compaction_summarizes_old_turns_and_keeps_recent_ones(workspace: Path) -> None:
    script = [{"text": "reply 1"}, {"text": "reply 2"}, {"text": "reply 3"}, {"text": SUMMARY}, {"text": "reply 4"}]
    runtime, engine = make_runtime(workspace, script, config=small_window())
    thread = await runtime.start_thread()
    for n in range(1, 5):
        turn = await runtime.run_turn(thread.id, _prompt(n))
        assert turn.status == "completed"
    assert len(engine.requests) == 5, "turns 1-3 fit; turn 4 needed one summary call"
    summarizer, after = engine.requests[3], engine.requests[4]
    assert summarizer.system == SUMMARY_SYSTEM
    assert not summarizer.tools
    assert "task 1" in summarizer.messages[0].text()
    assert "task 3" in summarizer.messages[0].text(), "a quarter of the budget is kept: turn 3 is summarized too"
    assert "task 4" not in summarizer.messages[0].text()
    texts = [m.text() for m in after.messages]
    assert texts[0].startswith(COMPACTION_PREFIX)
    assert "Ship the feature" in texts[0]
    assert not any("task 1" in t or "task 2" in t or "task 3" in t for t in texts)
    assert texts[-1].startswith("task 4")
    compaction = next(i for i in runtime.thread(thread.id).turns[3].items if isinstance(i, CompactionItem))
    assert compaction.first_kept_item_id == runtime.thread(thread.id).turns[3].items[0].id
    assert compaction.tokens_before > compaction.tokens_after
    await runtime.close()
    loaded = await JsonlThreadStore(RoderPaths.from_env().threads_dir).load(thread.id)
    assert loaded.turns[0].items[0].text.startswith("task 1"), "the raw history stays on disk"
    assert [m.text() for m in history_to_messages(loaded.items())][: len(texts)] == texts


async def test_auto_compaction_can_be_turned_off(workspace: Path) -> None:
    runtime, engine = make_runtime(workspace, config=small_window(auto_compact=False))
    thread = await runtime.start_thread()
    for n in range(1, 5):
        await runtime.run_turn(thread.id, _prompt(n))
    assert len(engine.requests) == 4
    assert not any(isinstance(i, CompactionItem) for i in runtime.thread(thread.id).items())
    await runtime.close()


async def test_a_long_turn_is_compacted_mid_turn_with_files_and_the_request_verbatim(workspace: Path) -> None:
    script = [
        {"tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}, {"name": "edit", "arguments": {"path": "b.py"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "c.py"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "d.py"}}]},
        {"text": SUMMARY},
        {"text": "all done"},
    ]
    runtime, engine = make_runtime(workspace, script, config=small_window(), extensions=[Extras([BigRead(), Edit()])])
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "refactor the parser please")
    assert turn.status == "completed"
    assert turn.items[-1].text == "all done"
    compaction = next(i for i in turn.items if isinstance(i, CompactionItem))
    assert "## Current request (verbatim)\nrefactor the parser please" in compaction.summary
    assert "## Files read\n- a.py\n- c.py\n" in compaction.summary
    assert "## Files modified\n- b.py" in compaction.summary
    assert compaction.files_read == ["a.py", "c.py"], "the kept round (d.py) is not listed"
    assert compaction.files_modified == ["b.py"]
    last = engine.requests[-1]
    calls = [p.call_id for m in last.messages for p in m.parts if getattr(p, "type", "") == "tool_call"]
    results = [p.call_id for m in last.messages for p in m.parts if getattr(p, "type", "") == "tool_result"]
    assert calls and calls == results, "every kept call still has its result right after it"
    await runtime.close()


# --------------------------------------------------------------------------- overflow


async def test_a_context_overflow_compacts_and_retries_once(workspace: Path) -> None:
    overflow = {"error": {"message": "prompt is too long", "kind": "context_overflow"}}
    script = [{"text": "reply 1"}, overflow, {"text": SUMMARY}, {"text": "after retry"}]
    runtime, engine = make_runtime(workspace, script)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "first question")
    turn = await runtime.run_turn(thread.id, "second question")
    assert turn.status == "completed"
    assert turn.items[-1].text == "after retry"
    assert any(isinstance(i, CompactionItem) for i in turn.items)
    assert engine.requests[2].system == SUMMARY_SYSTEM
    assert engine.requests[3].messages[0].text().startswith(COMPACTION_PREFIX)
    await runtime.close()


async def test_a_second_overflow_fails_the_turn_instead_of_looping(workspace: Path) -> None:
    overflow = {"error": {"message": "prompt is too long", "kind": "context_overflow"}}
    runtime, _ = make_runtime(workspace, [{"text": "r1"}, overflow, {"text": SUMMARY}, overflow])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "one")
    turn = await runtime.run_turn(thread.id, "two")
    assert turn.status == "failed"
    assert turn.error.kind == "context_overflow"
    await runtime.close()


# --------------------------------------------------------------------------- on demand, hooks


async def test_compact_on_demand_is_a_turn_of_its_own_with_instructions(workspace: Path) -> None:
    runtime, engine = make_runtime(workspace, [{"text": "r1"}, {"text": "r2"}, {"text": SUMMARY}, {"text": "r3"}])
    thread = await runtime.start_thread()
    with pytest.raises(RoderError, match="nothing to compact"):
        await runtime.compact(thread.id)
    await runtime.run_turn(thread.id, "one " + "q" * 2_000)
    await runtime.run_turn(thread.id, "two " + "q" * 2_000)
    turn = await runtime.compact(thread.id, "keep the API names")
    assert turn.status == "completed"
    assert turn.stop_reason == "compaction"
    assert [type(i) for i in turn.items] == [CompactionItem]
    assert "keep the API names" in engine.requests[2].messages[0].text()
    await runtime.run_turn(thread.id, "three")
    assert engine.requests[3].messages[0].text().startswith(COMPACTION_PREFIX)
    await runtime.close()


async def test_a_compaction_hook_replaces_the_summarizer(workspace: Path) -> None:
    hook = SummaryHook()
    runtime, engine = make_runtime(workspace, [{"text": "r1"}, {"text": "r2"}], extensions=[Extras(hooks=[hook])])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "one " + "q" * 2_000)
    await runtime.run_turn(thread.id, "two " + "q" * 2_000)
    turn = await runtime.compact(thread.id, "be brief")
    assert len(engine.requests) == 2, "the model was not asked"
    assert turn.items[0].summary.startswith("custom summary of")
    assert hook.payloads[0]["instructions"] == "be brief"
    assert hook.payloads[0]["items"][0]["type"] == "userMessage"
    await runtime.close()
