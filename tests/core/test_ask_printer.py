"""The one-shot text printer: live on a terminal, whole answers on a pipe, restarts said."""

from __future__ import annotations

import io
from typing import Any

from roder_core.ir import AgentMessageItem
from roder_core.threads.events import AgentMessageDelta, ItemCompleted
from roder_tui.ask_turn import Printer


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def delta(item: AgentMessageItem, text: str) -> tuple[str, dict[str, Any]]:
    """The notification as the printer gets it: its method and wire params."""
    event = AgentMessageDelta(thread_id="t", turn_id="u", item_id=item.id, delta=text)
    return event.method, event.params()


def completed(item: AgentMessageItem) -> tuple[str, dict[str, Any]]:
    event = ItemCompleted(thread_id="t", turn_id="u", item=item)
    return event.method, event.params()


def play(out: io.StringIO) -> Printer:
    """A stream that broke after 'The ans', was voided, then answered differently."""
    printer = Printer("text", out, io.StringIO())
    first = AgentMessageItem()
    printer.on_event(*delta(first, "The ans"))
    printer.on_event(*completed(first.model_copy(update={"text": ""})))
    second = AgentMessageItem()
    for piece in ("A different ", "answer."):
        printer.on_event(*delta(second, piece))
    printer.on_event(*completed(second.model_copy(update={"text": "A different answer."})))
    return printer


def test_pipe_gets_only_the_final_answer() -> None:
    out = io.StringIO()
    printer = play(out)
    assert out.getvalue() == "A different answer.\n"
    assert printer.final_texts == ["A different answer."]


def test_terminal_streams_and_says_the_restart() -> None:
    out = Terminal()
    play(out)
    assert out.getvalue() == "The ans\n[the provider's stream broke; the answer restarts]\nA different answer.\n"
