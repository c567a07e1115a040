"""Runtime notifications and stored items -> ACP ``session/update`` payloads.

Pure functions: given a typed notification (or a stored item when a session is loaded), return
the ACP updates to send. Tool kinds are Roder's tool kinds, which use ACP's vocabulary.
"""

from __future__ import annotations

from typing import Any, get_args

from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_current_mode,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import PlanEntryStatus, ToolCallLocation, ToolCallStatus, ToolKind, UsageUpdate

from roder_core.ir import (
    AgentMessageItem,
    CommandExecutionItem,
    FileChangeItem,
    Item,
    PlanItem,
    ReasoningItem,
    StepStatus,
    ToolCallItem,
    ToolResultItem,
    UserMessageItem,
)
from roder_core.threads.events import (
    AgentMessageDelta,
    ItemCompleted,
    ModeChanged,
    TokenUsageUpdated,
    ToolCallStarted,
)

#: A plan step's status as ACP spells it (the same words).
PLAN_STATUS: dict[StepStatus, PlanEntryStatus] = {
    StepStatus.PENDING: "pending",
    StepStatus.IN_PROGRESS: "in_progress",
    StepStatus.COMPLETED: "completed",
}
_PATH_KEYS = ("path", "file_path", "filePath", "file")
#: Longest tool output copied into a tool call's content (the model saw all of it).
MAX_TOOL_TEXT = 64_000


def tool_title(name: str, arguments: dict[str, Any]) -> str:
    """A short human title: ``bash: git status``, ``edit src/app.py``."""
    if isinstance(arguments.get("command"), str):
        return f"{name}: {arguments['command'][:120]}"
    for key in _PATH_KEYS:
        if isinstance(arguments.get(key), str):
            return f"{name} {arguments[key]}"
    if isinstance(arguments.get("pattern"), str):
        return f"{name} {arguments['pattern'][:80]}"
    return name


def tool_locations(arguments: dict[str, Any]) -> list[ToolCallLocation] | None:
    paths = [arguments[k] for k in _PATH_KEYS if isinstance(arguments.get(k), str)]
    return [ToolCallLocation(path=p) for p in paths] or None


def acp_kind(kind: str | None) -> ToolKind:
    return next((k for k in get_args(ToolKind) if k == kind), "other")


def diff_texts(diff: str) -> tuple[str, str]:
    """Old and new text of the hunks of a unified diff (enough for an editor's diff view)."""
    old: list[str] = []
    new: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@", "diff ", "index ")):
            continue
        if line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or not line:
            old.append(line[1:])
            new.append(line[1:])
    return "\n".join(old), "\n".join(new)


def tool_call_start(item: ToolCallItem, kind: str | None, status: ToolCallStatus = "pending") -> Any:
    return start_tool_call(
        item.call_id,
        tool_title(item.name, item.arguments),
        kind=acp_kind(kind),
        status=status,
        locations=tool_locations(item.arguments),
        raw_input=item.arguments,
    )


def tool_result_update(item: ToolResultItem) -> Any:
    text = item.text if len(item.text) <= MAX_TOOL_TEXT else item.text[:MAX_TOOL_TEXT] + "\n… (truncated)"
    return update_tool_call(
        item.call_id,
        status="failed" if item.is_error else "completed",
        content=[tool_content(text_block(text))] if text else None,
        raw_output={"text": item.text, "isError": item.is_error},
    )


def file_change_update(item: FileChangeItem) -> Any | None:
    if item.call_id is None or not item.changes:
        return None
    contents = []
    for change in item.changes:
        old, new = diff_texts(change.diff)
        contents.append(tool_diff_content(change.move_path or change.path, new, None if change.kind == "add" else old))
    return update_tool_call(item.call_id, content=contents, locations=[ToolCallLocation(path=c.path) for c in item.changes])


def command_update(item: CommandExecutionItem) -> Any | None:
    if item.call_id is None:
        return None
    summary = item.output if len(item.output) <= MAX_TOOL_TEXT else item.output[-MAX_TOOL_TEXT:]
    if item.exit_code not in (None, 0):
        summary += f"\n(exit code {item.exit_code})"
    return update_tool_call(item.call_id, content=[tool_content(text_block(summary))] if summary else None)


def plan_update(item: PlanItem) -> Any | None:
    if not item.steps:
        return None
    return update_plan([plan_entry(step.text, priority="medium", status=PLAN_STATUS[step.status]) for step in item.steps])


def item_updates(item: Item, kinds: dict[str, str], *, history: bool = False) -> list[Any]:
    """Updates for a completed item. ``history`` replays stored turns (session/load)."""
    if isinstance(item, UserMessageItem):
        return [update_user_message_text(item.text)] if history else []
    if isinstance(item, AgentMessageItem):
        return [update_agent_message_text(item.text)] if history and item.text else []
    if isinstance(item, ReasoningItem):
        text = item.text or item.summary
        return [update_agent_thought_text(text)] if history and text else []
    if isinstance(item, ToolCallItem):
        return [tool_call_start(item, kinds.get(item.name), "completed" if history else "pending")]
    if isinstance(item, ToolResultItem):
        return [tool_result_update(item)]
    if isinstance(item, FileChangeItem):
        update = file_change_update(item)
        return [update] if update else []
    if isinstance(item, CommandExecutionItem):
        update = command_update(item)
        return [update] if update else []
    if isinstance(item, PlanItem):
        update = plan_update(item)
        return [update] if update else []
    return []


def notification_updates(event: Any, kinds: dict[str, str]) -> list[Any]:
    """Live updates for one runtime notification of the session's thread."""
    if isinstance(event, AgentMessageDelta):
        if event.kind == "reasoning":
            return [update_agent_thought_text(event.delta)]
        return [update_agent_message_text(event.delta)]
    if isinstance(event, ItemCompleted):
        return item_updates(event.item, kinds)
    if isinstance(event, ToolCallStarted):
        return [update_tool_call(event.call_id, status="in_progress")]
    if isinstance(event, ModeChanged):
        return [update_current_mode(event.mode)]
    if isinstance(event, TokenUsageUpdated) and event.context_window:
        return [UsageUpdate(session_update="usage_update", used=event.context_tokens, size=event.context_window)]
    return []
