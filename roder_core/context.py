"""Context assembly: thread history -> canonical messages, context blocks -> system prompt.

The latest compaction item stands in for everything before the item it keeps; the raw items
stay in the thread. Context providers contribute typed blocks; the planner orders and budgets
them. ``ContextAssembler`` is the single place the turn loop asks for a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    CompactionItem,
    ImagePart,
    Item,
    Message,
    ModelProfile,
    ReasoningItem,
    ReasoningPart,
    TextPart,
    ToolCallItem,
    ToolCallPart,
    ToolResultItem,
    ToolResultPart,
    ToolSpec,
    UserMessageItem,
)
from roder_core.services import ContextBlock, ContextPlanner, ContextProvider, ContextQuery

log = logging.getLogger(__name__)

COMPACTION_PREFIX = "Summary of the earlier conversation (older turns were compacted):\n\n"


def estimate_tokens(text: str) -> int:
    """Fast token estimate (~4 characters a token) used when the provider reports nothing."""
    return (len(text) + 3) // 4


def visible_items(items: Sequence[Item]) -> list[Item]:
    """Items the model should see: after the latest compaction, its summary then kept items."""
    start = 0
    summary: CompactionItem | None = None
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, CompactionItem):
            summary = item
            keep_from = next(
                (i for i, it in enumerate(items) if it.id == item.first_kept_item_id), index + 1
            )
            start = keep_from if keep_from < index else index + 1
            kept = [it for it in items[start:] if it is not item]
            return [summary, *kept]
    return list(items[start:])


def _user_message(item: UserMessageItem) -> Message:
    parts: list = [TextPart(text=item.text)]
    for att in item.attachments:
        if att.data_base64 and att.mime_type.startswith("image/"):
            parts.append(ImagePart(mime_type=att.mime_type, data_base64=att.data_base64))
        elif att.text is not None:
            parts.append(TextPart(text=f"\n<attachment name={att.name!r}>\n{att.text}\n</attachment>"))
    return Message(role="user", parts=parts)


def history_to_messages(items: Sequence[Item]) -> list[Message]:
    """Group IR items into provider-neutral messages.

    Consecutive assistant output (reasoning, text, tool calls) forms one assistant message and
    consecutive tool results one tool message, which is what every dialect expects.
    """
    messages: list[Message] = []

    def open_message(role: str) -> Message:
        if not messages or messages[-1].role != role:
            messages.append(Message(role=role))  # type: ignore[arg-type]
        return messages[-1]

    for item in visible_items(items):
        if isinstance(item, UserMessageItem):
            messages.append(_user_message(item))
        elif isinstance(item, CompactionItem):
            messages.append(Message(role="user", parts=[TextPart(text=COMPACTION_PREFIX + item.summary)]))
        elif isinstance(item, AgentMessageItem):
            if item.text:
                open_message("assistant").parts.append(TextPart(text=item.text))
        elif isinstance(item, ReasoningItem):
            open_message("assistant").parts.append(
                ReasoningPart(text=item.text, summary=item.summary, provider_data=item.provider_data)
            )
        elif isinstance(item, ToolCallItem):
            open_message("assistant").parts.append(
                ToolCallPart(
                    call_id=item.call_id,
                    name=item.name,
                    arguments=item.arguments,
                    provider_data=item.provider_data,
                )
            )
        elif isinstance(item, ToolResultItem):
            images = [
                ImagePart(mime_type=a.mime_type, data_base64=a.data_base64)
                for a in item.attachments
                if a.data_base64 and a.mime_type.startswith("image/")
            ]
            open_message("tool").parts.append(
                ToolResultPart(
                    call_id=item.call_id, name=item.name, text=item.text, is_error=item.is_error, images=images
                )
            )
    return _close_dangling_calls(messages)


def _close_dangling_calls(messages: list[Message]) -> list[Message]:
    """Every tool call needs a result (providers reject the request otherwise). A turn that was
    interrupted between call and result gets a synthetic 'interrupted' result."""
    fixed: list[Message] = []
    for index, message in enumerate(messages):
        fixed.append(message)
        if message.role != "assistant":
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if not calls:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = (
            {p.call_id for p in following.parts if isinstance(p, ToolResultPart)}
            if following is not None and following.role == "tool"
            else set()
        )
        missing = [
            ToolResultPart(call_id=c.call_id, name=c.name, text="(no result: the turn was interrupted)", is_error=True)
            for c in calls
            if c.call_id not in answered
        ]
        if missing:
            if following is not None and following.role == "tool":
                following.parts.extend(missing)
            else:
                fixed.append(Message(role="tool", parts=missing))
    return fixed


class PriorityPlanner:
    """Default planner: blocks by priority into the system prompt, dropping droppable blocks
    (largest first) when the system prompt would exceed a quarter of the context window."""

    def id(self) -> str:
        return "priority-planner"

    def plan(
        self, blocks: list[ContextBlock], request: AgentInferenceRequest, model: ModelProfile
    ) -> AgentInferenceRequest:
        budget = max(model.context_window // 4, 2_000)
        chosen = sorted(blocks, key=lambda b: b.priority)
        while sum(estimate_tokens(b.text) for b in chosen) > budget:
            droppable = [b for b in chosen if b.droppable]
            if not droppable:
                break
            chosen.remove(max(droppable, key=lambda b: len(b.text)))
        system = "\n\n".join(b.text.strip() for b in chosen if b.text.strip())
        return request.model_copy(update={"system": system})


class ContextAssembler:
    """Builds the canonical request for one model call of a turn."""

    def __init__(self, providers: list[ContextProvider], planner: ContextPlanner | None = None) -> None:
        self._providers = providers
        self._planner = planner or PriorityPlanner()

    async def blocks(self, query: ContextQuery) -> list[ContextBlock]:
        async def load(provider: ContextProvider) -> list[ContextBlock]:
            try:
                return await provider.load_context(query)
            except Exception as exc:  # one broken provider must not stop the turn
                log.warning("context provider %s failed: %s", provider.id(), exc)
                return []

        results = await asyncio.gather(*(load(p) for p in self._providers))
        return [block for blocks in results for block in blocks]

    async def build(
        self,
        query: ContextQuery,
        items: Sequence[Item],
        tools: list[ToolSpec],
        model: ModelProfile,
    ) -> AgentInferenceRequest:
        request = AgentInferenceRequest(
            model=model.id,
            messages=history_to_messages(items),
            tools=tools,
            max_output_tokens=model.max_output_tokens,
            parallel_tool_calls=model.parallel_tools,
        )
        return self._planner.plan(await self.blocks(query), request, model)
