"""ReplayGuard edge cases: what a consumer sees when a stream is retried."""

from __future__ import annotations

from roder_core.ir import (
    CompletedEvent,
    InferenceEvent,
    MessageDelta,
    ReasoningDelta,
    StreamRestartEvent,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from roder_core.providers.replay import ReplayGuard


def feed(guard: ReplayGuard, events: list[InferenceEvent]) -> list[InferenceEvent]:
    return [out for event in events for out in guard.admit(event)]


def test_matching_retry_passes_only_the_new_part_even_across_delta_boundaries() -> None:
    guard = ReplayGuard()
    feed(guard, [ReasoningDelta(text="abc"), MessageDelta(text="Hel"), MessageDelta(text="lo w")])
    guard.next_attempt()
    out = feed(
        guard,
        [
            ReasoningDelta(text="ab"),
            ReasoningDelta(text="c"),
            MessageDelta(text="Hello"),
            MessageDelta(text=" world"),
            CompletedEvent(),
        ],
    )
    assert out == [MessageDelta(text="orld"), CompletedEvent()]


def test_tool_calls_wait_for_completion_and_are_dropped_with_a_broken_attempt() -> None:
    guard = ReplayGuard()
    call = ToolCallEvent(call_id="c1", name="bash")
    assert feed(guard, [MessageDelta(text="x"), call]) == [MessageDelta(text="x")]
    guard.next_attempt()
    retried = ToolCallEvent(call_id="c2", name="bash")
    assert feed(guard, [MessageDelta(text="x"), retried, CompletedEvent(stop_reason="tool_use")]) == [
        retried,
        CompletedEvent(stop_reason="tool_use"),
    ]


def test_divergence_restarts_and_replays_the_new_attempt_from_its_start() -> None:
    guard = ReplayGuard()
    feed(guard, [ReasoningDelta(text="plan A"), MessageDelta(text="Doing A")])
    guard.next_attempt()
    usage = UsageEvent(usage=Usage(input_tokens=3))
    out = feed(guard, [ReasoningDelta(text="plan "), usage, ReasoningDelta(text="B"), MessageDelta(text="B!")])
    assert isinstance(out[0], StreamRestartEvent)
    assert out[1:] == [ReasoningDelta(text="plan "), usage, ReasoningDelta(text="B"), MessageDelta(text="B!")]
    guard.next_attempt()  # and a later retry compares against the new attempt
    assert feed(guard, [ReasoningDelta(text="plan B"), MessageDelta(text="B!!")]) == [MessageDelta(text="!")]


def test_a_shorter_retry_restarts_at_completion() -> None:
    guard = ReplayGuard()
    feed(guard, [MessageDelta(text="a long answer")])
    guard.next_attempt()
    out = feed(guard, [MessageDelta(text="a long"), CompletedEvent()])
    assert isinstance(out[0], StreamRestartEvent)
    assert out[1:] == [MessageDelta(text="a long"), CompletedEvent()]


def test_nothing_shown_means_nothing_to_replay() -> None:
    guard = ReplayGuard()
    feed(guard, [UsageEvent(usage=Usage(input_tokens=1))])
    guard.next_attempt()
    assert feed(guard, [MessageDelta(text="hi")]) == [MessageDelta(text="hi")]
