"""Makes a model call that was retried after a dropped stream look like one stream.

The retry loop re-sends the request when the stream breaks, possibly after text was already
shown. ``ReplayGuard`` sits between the wire decoder and the runtime:

- tool calls are held until the response completes, so a retried call never runs a tool twice;
- on a new attempt, output that repeats what was already shown is swallowed, and only the part
  beyond it is passed on (a deterministic endpoint resumes seamlessly);
- if the new attempt says something else, the guard emits ``StreamRestartEvent`` and then the new
  attempt from its start, so the runtime can blank what it showed and nothing is duplicated.
"""

from __future__ import annotations

from roder_core.ir import (
    CompletedEvent,
    InferenceEvent,
    MessageDelta,
    ReasoningDelta,
    StreamRestartEvent,
    ToolCallEvent,
)


def _channel(event: InferenceEvent) -> str | None:
    if isinstance(event, MessageDelta):
        return "text"
    if isinstance(event, ReasoningDelta) and event.text:
        return "summary" if event.summary else "reasoning"
    return None


class ReplayGuard:
    def __init__(self) -> None:
        #: What the consumer has been shown: runs of one channel, kept as pieces (joining on
        #: every delta would copy a long answer over and over).
        self._shown: list[tuple[str, list[str]]] = []
        #: The same runs joined, made when a replay starts.
        self._runs: list[tuple[str, str]] = []
        self._held_calls: list[ToolCallEvent] = []
        self._replaying = False
        self._position = (0, 0)
        #: Events of the current attempt swallowed while replaying (re-sent on divergence).
        self._swallowed: list[InferenceEvent] = []

    def next_attempt(self) -> None:
        """The stream broke; the next events come from a fresh request."""
        self._held_calls.clear()
        self._swallowed.clear()
        self._runs = [(channel, "".join(pieces)) for channel, pieces in self._shown]
        self._replaying = bool(self._runs)
        self._position = (0, 0)

    def admit(self, event: InferenceEvent) -> list[InferenceEvent]:
        """Events to pass to the consumer for one decoded event (maybe none, maybe several)."""
        if isinstance(event, ToolCallEvent):
            self._held_calls.append(event)
            return []
        if isinstance(event, CompletedEvent):
            out: list[InferenceEvent] = []
            if self._replaying:  # the new attempt said less than was shown: start over
                out = self._restart()
            calls, self._held_calls = self._held_calls, []
            return [*out, *calls, event]
        if not self._replaying:
            self._record(event)
            return [event]
        return self._replay(event)

    # ------------------------------------------------------------------ internals

    def _record(self, event: InferenceEvent) -> None:
        channel = _channel(event)
        if channel is None:
            return
        text = event.text  # type: ignore[union-attr]
        if self._shown and self._shown[-1][0] == channel:
            self._shown[-1][1].append(text)
        else:
            self._shown.append((channel, [text]))

    def _replay(self, event: InferenceEvent) -> list[InferenceEvent]:
        channel = _channel(event)
        if channel is None:
            self._swallowed.append(event)
            return []
        text: str = event.text  # type: ignore[union-attr]
        index, offset = self._position
        consumed = 0
        while consumed < len(text):
            if index >= len(self._runs):
                break
            shown_channel, shown_text = self._runs[index]
            rest = shown_text[offset:]
            piece = text[consumed : consumed + len(rest)]
            if shown_channel != channel or not rest.startswith(piece):
                restart = self._restart()
                self._record(event)
                return [*restart, event]
            consumed += len(piece)
            offset += len(piece)
            if offset == len(shown_text):
                index, offset = index + 1, 0
        self._position = (index, offset)
        if index < len(self._runs):
            self._swallowed.append(event)
            return []
        # Caught up with what was shown: pass on the new part and stop replaying.
        self._replaying = False
        self._swallowed.clear()
        remainder = text[consumed:]
        if not remainder:
            return []
        fresh = event.model_copy(update={"text": remainder})
        self._record(fresh)
        return [fresh]

    def _restart(self) -> list[InferenceEvent]:
        swallowed, self._swallowed = self._swallowed, []
        self._replaying = False
        self._shown = []
        for event in swallowed:
            self._record(event)
        return [StreamRestartEvent(reason="the retried stream differs from what was shown"), *swallowed]
