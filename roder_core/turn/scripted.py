"""A turn whose tool calls are decided in advance instead of asked of a model.

A workflow's script steps and score commands (``roder_core.workflows``) are commands the user
wrote, not a model's choices, but they must run exactly as a model's ``bash`` call would: in a
turn of the step's thread, through hooks, policy (an "ask" is an ordinary approval request every
client answers; a headless run is refused with the remedy), the process broker and its sandbox,
recorded in the transcript. So this runner is the real ``TurnRunner`` with one part swapped:
where it would call the model, it hands out the next scripted call, one per round (in order,
each after the previous one finished), and then ends the turn with an agent message holding the
last command's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from roder_core.ir import AgentMessageItem, CommandExecutionItem, ToolCallEvent, ToolCallItem, ToolResultItem, new_id
from roder_core.kernel.tools import ToolCall, ToolRegistry
from roder_core.turn.runner import TurnRunner
from roder_core.turn.stream_fold import ModelOutput

if TYPE_CHECKING:
    from roder_core.ir import UserMessageItem
    from roder_core.threads.state import ThreadState
    from roder_core.turn.host import TurnHost


class ScriptedTurnRunner(TurnRunner):
    def __init__(self, runtime: TurnHost, state: ThreadState, user_item: UserMessageItem, calls: Sequence[ToolCall]) -> None:
        super().__init__(runtime, state, user_item)
        self._calls = list(calls)

    async def _call_fitting(self, tools: ToolRegistry) -> ModelOutput:
        if self._calls:
            call = self._calls.pop(0)
            item = ToolCallItem(call_id=call.id or new_id("call"), name=call.name, arguments=dict(call.arguments))
            await self._item(item)
            event = ToolCallEvent(call_id=item.call_id, name=item.name, arguments=item.arguments)
            return ModelOutput(items=[item], tool_calls=[event])
        message = AgentMessageItem(text=last_output(self.turn.items))
        await self._item(message)
        return ModelOutput(items=[message])


def last_output(items: Sequence[object]) -> str:
    """What the last command printed (its command view's output), else the last result's text."""
    for item in reversed(items):
        if isinstance(item, CommandExecutionItem):
            return item.output
        if isinstance(item, ToolResultItem):
            return item.text
    return ""
