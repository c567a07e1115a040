"""The stream folder on its own: lists of inference events in, items, usage and listener calls out."""

from __future__ import annotations

from typing import Any

import pytest

from roder_core.errors import InferenceError
from roder_core.ir import (
    AgentMessageItem,
    CompletedEvent,
    InferenceErrorEvent,
    InferenceEvent,
    Item,
    LogprobsEvent,
    MessageDelta,
    ProviderMetadataEvent,
    ReasoningDelta,
    ReasoningItem,
    StreamRestartEvent,
    ToolCallEvent,
    ToolCallItem,
    Usage,
    UsageEvent,
)
from roder_core.turn.stream_fold import DeltaKind, StreamedItem, StreamFolder


class Recorder:
    """A listener that writes down every call, with a copy of the item as it was then."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def item_started(self, item: StreamedItem) -> None:
        self.calls.append(("started", item.model_copy()))

    async def item_delta(self, item: StreamedItem, delta: str, kind: DeltaKind) -> None:
        self.calls.append(("delta", (item.id, delta, kind)))

    async def item_completed(self, item: Item) -> None:
        self.calls.append(("completed", item.model_copy()))

    async def item_recorded(self, item: ToolCallItem) -> None:
        self.calls.append(("recorded", item))

    def retrying(self, retry: dict[str, Any]) -> None:
        self.calls.append(("retrying", retry))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


async def fold(events: list[InferenceEvent]) -> tuple[StreamFolder, Recorder]:
    recorder = Recorder()
    folder = StreamFolder(recorder)
    for event in events:
        await folder.feed(event)
    await folder.close()
    return folder, recorder


async def test_text_deltas_grow_one_message_item() -> None:
    folder, recorder = await fold([MessageDelta(text="Hel"), MessageDelta(text="lo"), CompletedEvent(stop_reason="end_turn")])
    [item] = folder.output.items
    assert isinstance(item, AgentMessageItem)
    assert item.text == "Hello"
    assert folder.output.text == "Hello"
    assert folder.output.stop_reason == "end_turn"
    assert recorder.names() == ["started", "delta", "delta", "completed"]
    assert recorder.calls[1][1] == (item.id, "Hel", "text")
    assert recorder.calls[-1][1].text == "Hello"


async def test_reasoning_then_text_are_two_items_in_order() -> None:
    events: list[InferenceEvent] = [
        ReasoningDelta(text="think "),
        ReasoningDelta(text="more", provider_data={"signature": "s1"}),
        ReasoningDelta(text="short", summary=True),
        ReasoningDelta(provider_data={"encrypted": "e"}),  # no text: no delta shown
        MessageDelta(text="answer"),
    ]
    folder, recorder = await fold(events)
    reasoning, message = folder.output.items
    assert isinstance(reasoning, ReasoningItem)
    assert reasoning.text == "think more"
    assert reasoning.summary == "short"
    assert reasoning.provider_data == {"signature": "s1", "encrypted": "e"}
    assert isinstance(message, AgentMessageItem)
    assert message.text == "answer"
    assert recorder.names() == ["started", "delta", "delta", "delta", "completed", "started", "delta", "completed"]
    kinds = [call[1][2] for call in recorder.calls if call[0] == "delta"]
    assert kinds == ["reasoning", "reasoning", "reasoning", "text"]
    # The reasoning item is completed before the message starts.
    completed_reasoning = recorder.calls[4][1]
    assert completed_reasoning.id == reasoning.id


async def test_tool_calls_between_deltas_split_the_text_and_keep_their_order() -> None:
    events: list[InferenceEvent] = [
        MessageDelta(text="Reading "),
        MessageDelta(text="two files."),
        ToolCallEvent(call_id="c1", name="read", arguments={"path": "a.py"}),
        ToolCallEvent(call_id="c2", name="read", arguments={"path": "b.py"}, provider_data={"index": 1}),
        MessageDelta(text="Then more."),
        CompletedEvent(stop_reason="tool_use"),
    ]
    folder, recorder = await fold(events)
    first, call1, call2, second = folder.output.items
    assert isinstance(first, AgentMessageItem)
    assert first.text == "Reading two files."
    assert isinstance(call1, ToolCallItem)
    assert (call1.call_id, call1.arguments) == ("c1", {"path": "a.py"})
    assert isinstance(call2, ToolCallItem)
    assert call2.provider_data == {"index": 1}
    assert isinstance(second, AgentMessageItem)
    assert second.text == "Then more."
    assert first.id != second.id
    assert [c.call_id for c in folder.output.tool_calls] == ["c1", "c2"]
    assert folder.output.stop_reason == "tool_use"
    # The open message completes before the first call is recorded.
    assert recorder.names() == ["started", "delta", "delta", "completed", "recorded", "recorded", "started", "delta", "completed"]


async def test_a_truncated_or_unparsable_call_is_kept_for_the_runner_to_refuse() -> None:
    bad = ToolCallEvent(call_id="c1", name="write", arguments_error="Expecting value", truncated=True)
    folder, _ = await fold([bad, CompletedEvent(stop_reason="max_tokens")])
    assert folder.output.tool_calls == [bad]
    assert folder.output.stop_reason == "max_tokens"


async def test_usage_metadata_logprobs_and_retries() -> None:
    usage = Usage(input_tokens=120, output_tokens=7, cached_input_tokens=100)
    retry = {"attempt": 1, "max_attempts": 3, "wait": 0.5, "reason": "503"}
    events: list[InferenceEvent] = [
        ProviderMetadataEvent(data={"retry": retry}),
        ProviderMetadataEvent(data={"response_id": "r1"}),
        LogprobsEvent(tokens=[{"token": "a", "logprob": -0.1}]),
        MessageDelta(text="a"),
        LogprobsEvent(tokens=[{"token": "b", "logprob": -0.2}]),
        UsageEvent(usage=Usage(input_tokens=1)),
        UsageEvent(usage=usage),  # the last report wins: providers send running totals
    ]
    folder, recorder = await fold(events)
    assert folder.output.usage == usage
    assert folder.output.metadata == {"retry": retry, "response_id": "r1"}
    assert [t["token"] for t in folder.output.logprobs] == ["a", "b"]
    assert ("retrying", retry) in recorder.calls
    assert recorder.names().count("retrying") == 1  # metadata without a retry announces nothing


async def test_a_stream_that_drops_midway_keeps_the_partial_item_completed() -> None:
    recorder = Recorder()
    folder = StreamFolder(recorder)

    async def dropping() -> Any:
        yield MessageDelta(text="Half an ans")
        raise InferenceError("connection reset by peer", "network", retryable=True)

    with pytest.raises(InferenceError, match="connection reset"):
        try:
            async for event in dropping():
                await folder.feed(event)
        finally:
            await folder.close()
    [item] = folder.output.items
    assert isinstance(item, AgentMessageItem)
    assert item.text == "Half an ans"
    assert recorder.names() == ["started", "delta", "completed"]
    assert recorder.calls[-1][1].text == "Half an ans"
    assert folder.output.tool_calls == []
    # Closing twice does not complete the item twice.
    await folder.close()
    assert recorder.names().count("completed") == 1


async def test_an_error_event_raises_with_its_kind() -> None:
    folder = StreamFolder(Recorder())
    await folder.feed(MessageDelta(text="x"))
    with pytest.raises(InferenceError) as caught:
        await folder.feed(InferenceErrorEvent(message="prompt is too long", kind="context_overflow"))
    assert caught.value.kind == "context_overflow"


async def test_a_restart_blanks_what_was_shown_and_folds_the_new_answer() -> None:
    events: list[InferenceEvent] = [
        ReasoningDelta(text="first try", provider_data={"sig": "x"}),
        MessageDelta(text="first answer"),
        UsageEvent(usage=Usage(input_tokens=5)),
        StreamRestartEvent(reason="stream broke"),
        MessageDelta(text="second answer"),
    ]
    folder, recorder = await fold(events)
    [item] = folder.output.items
    assert isinstance(item, AgentMessageItem)
    assert item.text == "second answer"
    assert folder.output.usage == Usage()  # the void attempt's usage is gone too
    blanked = [call[1] for call in recorder.calls if call[0] == "completed"][1:3]
    assert isinstance(blanked[0], ReasoningItem)
    assert (blanked[0].text, blanked[0].summary, blanked[0].provider_data) == ("", "", None)
    assert isinstance(blanked[1], AgentMessageItem)
    assert blanked[1].text == ""
