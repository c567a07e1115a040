"""The budgeting planner, the history view after compaction, and token estimates."""

from __future__ import annotations

import json
from pathlib import Path

from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    Attachment,
    CompactionItem,
    ImagePart,
    Item,
    Message,
    ModelProfile,
    ReasoningItem,
    TextPart,
    ToolCallItem,
    ToolResultItem,
    ToolResultPart,
    ToolSpec,
    UserMessageItem,
)
from roder_core.kernel.services import ContextBlock
from roder_core.settings.config import RoderConfig
from roder_core.turn.context import PartCache, conversation, history_to_messages, visible_items
from roder_core.turn.planner import SHORTENED_MARKER, BudgetPlanner, prompt_budget
from roder_core.turn.tokens import (
    IMAGE_TOKENS,
    estimate_tokens,
    item_tokens,
    message_tokens,
    part_tokens,
    request_tokens,
    tool_tokens,
)

from .harness import make_runtime


def _tool_round(n: int, size: int) -> list:
    return [
        ToolCallItem(call_id=f"c{n}", name="read", arguments={"path": f"f{n}.py"}),
        ToolResultItem(call_id=f"c{n}", name="read", text=f"output {n} " + "x" * size),
    ]


def test_blocks_are_ordered_by_priority_and_droppable_ones_go_first_when_too_big() -> None:
    planner = BudgetPlanner()
    model = ModelProfile(id="m", context_window=10_000)
    blocks = [
        ContextBlock("env", "environment", "ENV", priority=60),
        ContextBlock("memory", "memory", "MEM " + "m" * 12_000, priority=80, droppable=True),
        ContextBlock("base", "base", "BASE", priority=0),
        ContextBlock("proj", "project", "PROJECT " + "p" * 4_000, priority=20),
    ]
    system = planner.system_prompt(blocks, model)
    assert system.startswith("BASE\n\nPROJECT")
    assert system.endswith("ENV")
    assert "MEM" not in system, "the droppable block is left out when the system prompt is over its share"
    roomy = planner.system_prompt(blocks, ModelProfile(id="m", context_window=200_000))
    assert "MEM" in roomy
    assert roomy.index("ENV") < roomy.index("MEM")


def test_old_tool_outputs_are_shortened_first_and_the_running_turn_never() -> None:
    items = [
        UserMessageItem(text="first task"),
        *_tool_round(1, 8_000),
        *_tool_round(2, 8_000),
        AgentMessageItem(text="done"),
        UserMessageItem(text="second task"),
        *_tool_round(3, 8_000),
    ]
    messages, turn_start = conversation(items, items[6].id)
    assert messages[turn_start].text() == "second task"
    model = ModelProfile(id="m", context_window=4_000)
    request = AgentInferenceRequest(model="m", messages=messages, turn_start=turn_start)
    planned = BudgetPlanner(reserve_tokens=1_000).plan([], request, model)
    results = [p for m in planned.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert "characters of this older tool output were removed" in results[0].text
    assert results[0].text.startswith("output 1 ")
    assert "were removed" in results[1].text
    assert results[2].text == items[-1].text, "the running turn is kept verbatim"
    assert request_tokens(planned) < request_tokens(request)
    # Only as much is shortened as needed: a roomier window leaves the second output alone.
    roomy = BudgetPlanner(reserve_tokens=1_000).plan([], request, ModelProfile(id="m", context_window=6_000))
    shortened = [p for m in roomy.messages for p in m.parts if isinstance(p, ToolResultPart) and "removed" in p.text]
    assert len(shortened) == 1


def test_a_request_that_fits_is_left_alone() -> None:
    items = [UserMessageItem(text="hi"), *_tool_round(1, 2_000), AgentMessageItem(text="ok")]
    messages, turn_start = conversation(items, items[0].id)
    request = AgentInferenceRequest(model="m", messages=messages, turn_start=turn_start)
    planned = BudgetPlanner().plan([ContextBlock("b", "base", "BASE")], request, ModelProfile(id="m"))
    assert planned.messages == request.messages
    assert planned.system == "BASE"
    assert SHORTENED_MARKER.format(removed=1) not in planned.model_dump_json()


def test_the_budget_keeps_a_reserve_but_never_most_of_a_small_window() -> None:
    assert prompt_budget(ModelProfile(id="m", context_window=200_000), 16_384) == 200_000 - 16_384
    assert prompt_budget(ModelProfile(id="m", context_window=8_000), 16_384) == 6_000


def test_compaction_hides_older_items_and_older_summaries() -> None:
    old = [UserMessageItem(text="ancient"), AgentMessageItem(text="old answer")]
    kept = [UserMessageItem(text="recent"), AgentMessageItem(text="recent answer")]
    first = CompactionItem(summary="S1", first_kept_item_id=kept[0].id)
    later = [UserMessageItem(text="newest")]
    second = CompactionItem(summary="S2", first_kept_item_id=later[0].id)
    items = [*old, *kept, first, *later, second]
    assert [getattr(i, "text", None) or i.summary for i in visible_items(items)] == ["S2", "newest"]
    items = [*old, *kept, first, *later]
    texts = [m.text() for m in history_to_messages(items)]
    assert "ancient" not in " ".join(texts)
    assert texts[0].endswith("S1")
    assert texts[1] == "recent"
    raw = [m.text() for m in history_to_messages(items, compacted=False)]
    assert raw[0] == "ancient"
    assert not any("S1" in t for t in raw)


def test_turn_start_falls_back_after_the_summary_when_it_was_summarized() -> None:
    user = UserMessageItem(text="long task")
    rest = [AgentMessageItem(text="a"), UserMessageItem(text="b")]
    compaction = CompactionItem(summary="S", first_kept_item_id=rest[0].id)
    _, start = conversation([user, *rest, compaction], user.id)
    assert start == 1
    _, start = conversation([UserMessageItem(text="x"), AgentMessageItem(text="y"), UserMessageItem(text="z")])
    assert start == 2, "without a known turn start, the last user message starts the turn"


def test_estimates_count_images_flat_and_skip_items_the_model_never_sees() -> None:
    image = Attachment(name="shot.png", mime_type="image/png", data_base64="A" * 400_000)
    assert item_tokens(UserMessageItem(text="look", attachments=[image])) < IMAGE_TOKENS + 20
    message = Message(role="user", parts=[TextPart(text="abcd" * 10), ImagePart(mime_type="image/png", data_base64="A" * 99)])
    assert message_tokens(message) == 4 + 10 + IMAGE_TOKENS
    from roder_core.ir import CustomItem

    assert item_tokens(CustomItem(namespace="x", data={"big": "y" * 10_000})) == 0


async def test_the_runtime_uses_the_configured_reserve(workspace: Path) -> None:
    config = RoderConfig.model_validate({"context": {"reserve_tokens": 5_000}})
    runtime, _ = make_runtime(workspace, config=config)
    assert runtime.context.planner.budget(ModelProfile(id="m", context_window=100_000)) == 95_000
    await runtime.close()


def test_a_request_counted_again_gives_the_same_answer_and_a_changed_one_a_new_one() -> None:
    """One model call counts the same request several times; the count is kept for the same
    parts and taken again for any copy with other messages, system text or tools."""
    messages = [Message(role="user", parts=[TextPart(text="x" * 400)])]
    request = AgentInferenceRequest(model="m", messages=messages, system="s" * 40)
    first = request_tokens(request)
    assert request_tokens(request) == first == 4 + 100 + 10
    planned = request.model_copy(update={"system": "s" * 80})  # what the planner does
    assert request_tokens(planned) == first + 10
    longer = planned.model_copy(update={"messages": [*messages, Message(role="user", parts=[TextPart(text="y" * 40)])]})
    assert request_tokens(longer) == first + 10 + 4 + 10
    assert request_tokens(request) == first  # the earlier request again, after others were counted


def test_a_tool_is_counted_from_what_it_says_now_whatever_was_counted_before() -> None:
    """Each model call brings new spec objects with fresh schema copies: a spec equal to one
    counted before gives its count, and any change to its description or schema (in place too)
    gives the count of what it says now, as serializing it would."""

    def counted(spec: ToolSpec) -> int:
        schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
        return estimate_tokens(spec.name) + estimate_tokens(spec.description) + estimate_tokens(schema)

    def spec(description: str = "Runs it.", about: str = "what to run") -> ToolSpec:
        schema = {"type": "object", "properties": {"command": {"type": "string", "description": about}}}
        return ToolSpec(name="held_tool", description=description, parameters=schema)

    first = spec()
    assert tool_tokens(first) == counted(first)
    assert tool_tokens(spec()) == counted(first)
    longer = spec(about="what to run, " + "and why " * 20)
    assert tool_tokens(longer) == counted(longer) > counted(first)
    assert tool_tokens(spec(description="Runs it. " * 10)) == counted(spec(description="Runs it. " * 10))
    grown = spec()
    assert tool_tokens(grown) == counted(first)
    grown.parameters["properties"]["workdir"] = {"type": "string", "description": "where, " * 30}
    assert tool_tokens(grown) == counted(grown) > counted(first)  # the schema changed in place
    assert tool_tokens(spec()) == counted(first)
    request = AgentInferenceRequest(model="m", messages=[], tools=[spec(), longer])
    assert request_tokens(request) == counted(first) + counted(longer)


def test_parts_are_made_once_per_item_and_again_when_the_item_changes() -> None:
    """A thread's model calls reuse the parts made for its items at earlier calls, while each
    item is the same object with the same fields; the messages equal a build from scratch."""
    cache = PartCache()
    items: list[Item] = [UserMessageItem(text="task"), *_tool_round(1, 100), AgentMessageItem(text="done")]
    first, _ = conversation(items, parts=cache)
    cache.settle()
    again, _ = conversation(items, parts=cache)
    cache.settle()
    assert again == first == conversation(items)[0]
    assert again[0] is first[0]  # reused, not rebuilt
    assert again[1].parts[0] is first[1].parts[0]
    edited = items[-1].model_copy(update={"text": "done, edited"})
    changed, _ = conversation([*items[:-1], edited], parts=cache)
    assert changed[-1].parts[-1].text == "done, edited"
    assert changed == conversation([*items[:-1], edited])[0]


def test_messages_of_unchanged_items_are_the_same_objects_and_never_edited_later() -> None:
    """Messages made of the same parts are reused across a thread's calls (so what counts or
    encodes a message once keeps its answer), and closing an interrupted call's result makes a
    new tool message instead of extending one an earlier request holds."""
    cache = PartCache()
    call = ToolCallItem(call_id="c1", name="read", arguments={"path": "a"})
    items: list[Item] = [UserMessageItem(text="task"), AgentMessageItem(text="reading"), call]
    first, _ = conversation(items, parts=cache)
    cache.settle()
    assert [m.role for m in first] == ["user", "assistant", "tool"]  # the interrupted call's result
    partial = ToolResultItem(call_id="c0", name="read", text="other")
    earlier_call = ToolCallItem(call_id="c0", name="read", arguments={"path": "b"})
    items = [UserMessageItem(text="task"), AgentMessageItem(text="reading"), earlier_call, call, partial]
    second, _ = conversation(items, parts=cache)
    cache.settle()
    tool = second[-1]
    assert [p.call_id for p in tool.parts] == ["c0", "c1"] and tool.parts[1].is_error
    third, _ = conversation(items, parts=cache)
    assert third[1] is second[1], "the same parts give the same assistant message"
    assert [p.call_id for p in third[-1].parts] == ["c0", "c1"], "the shared tool message was not extended twice"
    assert part_tokens(third[1].parts[0]) == part_tokens(TextPart(text="reading"))


def test_counts_are_kept_per_part_and_message_only_while_they_live() -> None:
    """A conversation's parts and messages are counted once each; the counts hold no part or
    message alive (a long-running server counting many threads keeps no old conversation)."""
    import gc
    import weakref

    from roder_core.turn import tokens

    message = Message(role="user", parts=[TextPart(text="x" * 400)])
    gone = weakref.ref(message)
    assert message_tokens(message) == message_tokens(message) == 4 + 100
    assert id(message) in tokens._COUNTED
    shorter = message.model_copy(update={"parts": [TextPart(text="x" * 40)]})  # what a planner does
    assert message_tokens(shorter) == 4 + 10
    key = id(message)
    del message
    gc.collect()
    assert gone() is None and key not in tokens._COUNTED


def test_a_later_call_goes_on_from_the_last_one_and_equals_a_build_from_scratch() -> None:
    """Each model call of a thread looks only at the items added since its last call (when the
    earlier ones are the same objects, unchanged): its messages, turn start and interrupted
    results equal a build from scratch at every step, and a message an earlier call returned is
    never extended afterwards; an item edited in place is noticed."""
    cache = PartCache()
    items: list[Item] = []
    returned: list[tuple[list[Message], list[list[object]]]] = []
    rounds: list[list[Item]] = [
        [UserMessageItem(text="task")],
        [AgentMessageItem(text="reading"), ToolCallItem(call_id="c1", name="read", arguments={"path": "a"})],
        [ToolResultItem(call_id="c1", name="read", text="a's text")],
        [ReasoningItem(text="then b"), ToolCallItem(call_id="c2", name="read", arguments={"path": "b"})],
        [AgentMessageItem(text="and more to say")],  # joins the open assistant message
        [UserMessageItem(text="next")],  # c2 never got a result: an interrupted one is added
        *[_tool_round(n, 10) for n in range(3, 6)],
    ]
    for added in rounds:
        items = [*items, *added]
        start = next(item.id for item in reversed(items) if isinstance(item, UserMessageItem))
        messages, turn_start = conversation(items, start, parts=cache)
        assert cache._continued == bool(returned), "every call but the first went on from the last"
        cache.settle()
        assert (messages, turn_start) == conversation(items, start)
        returned.append((messages, [list(m.parts) for m in messages]))
    for messages, parts in returned:
        assert [list(m.parts) for m in messages] == parts, "no earlier request's message was edited"
    assert any(p.call_id == "c2" and p.is_error for m in returned[-1][0] for p in m.parts if isinstance(p, ToolResultPart))
    items[0].text = "task, edited in place"  # type: ignore[attr-defined]
    edited, _ = conversation(items, parts=cache)
    assert not cache._continued
    assert edited[0].parts[0].text == "task, edited in place" and edited == conversation(items)[0]


def test_recent_items_give_the_visible_items_of_the_whole_thread() -> None:
    """A model call flattens only the turns from the latest compaction's kept part on; what the
    model sees is the same as from every turn, wherever the kept part begins (or if it is gone)."""
    from roder_core.ir import Turn
    from roder_core.turn.context import recent_items

    def turns(kept_turn: int | None, compacted_at: int) -> list[Turn]:
        made = [Turn(items=[UserMessageItem(text=f"u{n}"), AgentMessageItem(text=f"a{n}")]) for n in range(6)]
        kept = made[kept_turn].items[0].id if kept_turn is not None else "item_gone"
        made[compacted_at].items.append(CompactionItem(summary="s", first_kept_item_id=kept))
        return made

    for kept_turn, compacted_at in [(3, 3), (1, 4), (None, 4), (0, 5)]:
        thread = turns(kept_turn, compacted_at)
        whole = [item for turn in thread for item in turn.items]
        assert visible_items(recent_items(thread)) == visible_items(whole)
        assert len(recent_items(thread)) <= len(whole) - 2 * (kept_turn or 0)
    plain = [Turn(items=[UserMessageItem(text="x")]) for _ in range(3)]
    assert recent_items(plain) == [item for turn in plain for item in turn.items]
