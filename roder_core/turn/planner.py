"""The default context planner: order the context blocks, then fit the request into the window.

The prompt may use the model's context window minus a reserve kept for the answer and the next
steps (``[context] reserve_tokens``). Over budget, the planner first leaves out droppable blocks
when the system prompt alone is too large, then shortens the oldest tool outputs (never those of
the running turn), each with a marker saying so, in large sticky steps (a quarter of the window
at a time) so consecutive requests stay extensions of each other for the prompt cache. What it
cannot fit is left to compaction, which the turn loop runs when the planned request is still
over budget. While automatic compaction may run, the turn loop asks for the request with
``turn_start`` 0 (keep everything verbatim): compaction alone makes room then.
"""

from __future__ import annotations

from roder_core.ir import AgentInferenceRequest, Message, ModelProfile, ToolResultPart
from roder_core.kernel.services import ContextBlock
from roder_core.turn.tokens import estimate_tokens, request_tokens

#: Characters kept from the start of a shortened tool output.
KEEP_HEAD_CHARS = 400
SHORTENED_MARKER = (
    "\n[roder: {removed} characters of this older tool output were removed to fit the context window; "
    "the full output stays in the thread]"
)


def prompt_budget(model: ModelProfile, reserve_tokens: int) -> int:
    """Tokens the prompt may use: the window minus the reserve (at most a quarter of the window,
    so small local models keep most of theirs)."""
    reserve = min(reserve_tokens, max(model.context_window // 4, 1))
    return model.context_window - reserve


def shorten_old_tool_outputs(messages: list[Message], protect_from: int, excess: int, step: int = 1) -> list[Message]:
    """Shorten tool outputs before ``protect_from``, oldest first, until ``excess`` tokens are saved,
    in whole steps of at least ``step`` tokens.

    The outputs that may be shortened and what each saves depend only on the messages before
    them, so the step boundaries (the first outputs saving ``step``, ``2 * step``, ... together)
    stay where they are as the conversation grows. Shortening up to the first boundary that
    saves enough is therefore sticky: the next request shortens the same outputs until it needs
    a whole step more, and each request stays an extension of the previous one (the prompt cache
    breaks once a step, not at every request)."""
    candidates: list[tuple[int, int, str]] = []  # (message, part, shortened text)
    savings: list[int] = []
    for index in range(min(protect_from, len(messages))):
        message = messages[index]
        if message.role != "tool":
            continue
        for position, part in enumerate(message.parts):
            if not isinstance(part, ToolResultPart) or len(part.text) <= KEEP_HEAD_CHARS * 2:
                continue
            removed = len(part.text) - KEEP_HEAD_CHARS
            text = part.text[:KEEP_HEAD_CHARS] + SHORTENED_MARKER.format(removed=removed)
            candidates.append((index, position, text))
            savings.append(estimate_tokens(part.text) - estimate_tokens(text))
    count, saved, boundary = 0, 0, max(step, 1)
    for number, saving in enumerate(savings, start=1):
        saved += saving
        if saved >= boundary:  # a step boundary: stop here if it saves enough
            count = number
            if saved >= excess:
                break
            boundary = (saved // max(step, 1) + 1) * max(step, 1)
    else:
        count = len(savings)
    result = list(messages)
    for index, position, text in candidates[:count]:
        parts = list(result[index].parts)
        parts[position] = parts[position].model_copy(update={"text": text})
        result[index] = result[index].model_copy(update={"parts": parts})
    return result


class BudgetPlanner:
    """Default ContextPlanner (an extension providing a ContextPlanner replaces it)."""

    def __init__(self, reserve_tokens: int = 16_384, system_share: float = 0.25, trim_step_share: float = 0.25) -> None:
        self.reserve_tokens = reserve_tokens
        self.system_share = system_share
        #: Old tool outputs are shortened in steps freeing at least this share of the window.
        self.trim_step_share = trim_step_share

    def id(self) -> str:
        return "budget-planner"

    def budget(self, model: ModelProfile) -> int:
        return prompt_budget(model, self.reserve_tokens)

    def system_prompt(self, blocks: list[ContextBlock], model: ModelProfile) -> str:
        """Blocks by priority (stable for equal ones); droppable blocks go, largest first, while
        the system prompt would take more than its share of the window."""
        limit = max(int(model.context_window * self.system_share), 2_000)
        chosen = sorted(blocks, key=lambda b: b.priority)
        while sum(estimate_tokens(b.text) for b in chosen) > limit:
            droppable = [b for b in chosen if b.droppable]
            if not droppable:
                break
            chosen.remove(max(droppable, key=lambda b: len(b.text)))
        return "\n\n".join(b.text.strip() for b in chosen if b.text.strip())

    def plan(self, blocks: list[ContextBlock], request: AgentInferenceRequest, model: ModelProfile) -> AgentInferenceRequest:
        request = request.model_copy(update={"system": self.system_prompt(blocks, model)})
        excess = request_tokens(request) - self.budget(model)
        if excess > 0:
            step = int(model.context_window * self.trim_step_share)
            messages = shorten_old_tool_outputs(request.messages, request.turn_start, excess, step)
            request = request.model_copy(update={"messages": messages})
        return request
