"""A thread as a Markdown transcript, for people: ``roder sessions export --format markdown``,
``roder sessions show`` and any client's "export" action.

Everything is included (tool arguments and full outputs, compaction summaries, approvals,
errors); code fences grow longer than any backtick run inside them, so outputs cannot break out.
"""

from __future__ import annotations

import datetime
import json
import re

from roder_core.ir import (
    INTERRUPTED_KIND,
    AgentMessageItem,
    ApprovalItem,
    CommandExecutionItem,
    CompactionItem,
    ErrorItem,
    FileChangeItem,
    Item,
    PlanItem,
    ReasoningItem,
    Thread,
    ToolCallItem,
    ToolResultItem,
    Turn,
    UserMessageItem,
)


def _when(ts: float | None) -> str:
    if not ts:
        return "?"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def fence(text: str, lang: str = "") -> str:
    """A fenced block that ``text`` cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _item(item: Item, results: dict[str, ToolResultItem]) -> str | None:
    if isinstance(item, UserMessageItem):
        label = "**User** (while the agent worked)" if item.steer else "**User**"
        parts = [f"{label}\n\n{item.text}"]
        for att in item.attachments:
            body = fence(att.text) if att.text is not None else f"({att.mime_type}, not shown)"
            parts.append(f"Attachment `{att.name}`:\n\n{body}")
        return "\n\n".join(parts)
    if isinstance(item, AgentMessageItem):
        return f"**Assistant**\n\n{item.text}" if item.text else None
    if isinstance(item, ReasoningItem):
        thought = item.summary or item.text
        return "*Thinking*\n\n" + "\n".join(f"> {line}" for line in thought.splitlines()) if thought else None
    if isinstance(item, ToolCallItem):
        text = f"**Tool call** `{item.name}`\n\n" + fence(json.dumps(item.arguments, indent=2, ensure_ascii=False), "json")
        result = results.get(item.call_id)
        if result is not None:
            status = "error" if result.is_error else "result"
            took = f", {result.duration_ms} ms" if result.duration_ms is not None else ""
            text += f"\n\n*{status}{took}*\n\n" + fence(result.text)
        return text
    if isinstance(item, CompactionItem):
        return f"**Compaction** (older turns summarized for the model; they stay above)\n\n{item.summary}"
    if isinstance(item, ApprovalItem):
        decision = item.decision.decision if item.decision is not None else "no answer"
        return f"*Approval for `{item.request.tool}`: {decision}*"
    if isinstance(item, ErrorItem):
        if item.kind == INTERRUPTED_KIND:
            return "*Interrupted by the user*"
        return f"**Error** ({item.kind}): {item.message}"
    if isinstance(item, PlanItem):
        steps = "\n".join(f"- [{'x' if s.status == 'completed' else ' '}] {s.text}" for s in item.steps)
        return f"**Plan**\n\n{item.text}\n\n{steps}".strip()
    if isinstance(item, FileChangeItem):
        diffs = "\n\n".join(f"`{c.path}` ({c.kind})\n\n" + fence(c.diff, "diff") for c in item.changes if c.diff)
        return f"**File changes**\n\n{diffs}" if diffs else None
    if isinstance(item, CommandExecutionItem | ToolResultItem):
        return None  # shown with their tool call
    return None


def _turn(number: int, turn: Turn) -> str:
    took = f", {turn.completed_at - turn.started_at:.1f} s" if turn.completed_at else ""
    tokens = turn.usage.total_tokens
    head = f"## Turn {number}: {turn.status} ({_when(turn.started_at)}{took}, {tokens:,} tokens)"
    results = {i.call_id: i for i in turn.items if isinstance(i, ToolResultItem)}
    body = [text for item in turn.items if (text := _item(item, results))]
    if turn.error is not None:
        body.append(f"**Turn failed** ({turn.error.kind}): {turn.error.message}")
    return "\n\n".join([head, *body])


def render_markdown(thread: Thread) -> str:
    lines = [
        f"# {thread.title or 'Untitled thread'}",
        "",
        f"- Thread: `{thread.id}`",
        f"- Workspace: `{thread.cwd}`",
        f"- Model: {thread.provider}/{thread.model}",
        f"- Created: {_when(thread.created_at)}",
        f"- Tokens: {thread.usage.input_tokens:,} in, {thread.usage.output_tokens:,} out"
        + (f", ${thread.usage.cost_usd:.4f}" if thread.usage.cost_usd else ""),
    ]
    if thread.parent is not None:
        after = f" after turn `{thread.parent.turn_id}`" if thread.parent.turn_id else ""
        lines.append(f"- Forked from: `{thread.parent.thread_id}`{after}")
    sections = ["\n".join(lines), *(_turn(n, t) for n, t in enumerate(thread.turns, start=1))]
    return "\n\n".join(sections) + "\n"
