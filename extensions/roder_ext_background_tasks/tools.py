"""``task_output`` and ``task_kill``: the model reads and stops its thread's background tasks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from roder_core.brokers.terminal_text import shown_text
from roder_core.kernel.tasks import TaskBoard, TaskInfo
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import Tool, ToolCall, ToolExecutionContext, ToolResult

TASK_ID = "the task's id (task_...), as bash returned it when it started the task"


class TaskOutputArguments(ToolArguments):
    task_id: NonBlank | None = Field(None, description=TASK_ID + "; omit it to list this thread's tasks")
    since: int = Field(0, ge=0, description="output offset to read from: 0, or the `next` of your previous read")


class TaskKillArguments(ToolArguments):
    task_id: NonBlank = Field(description=TASK_ID)


def _board(ctx: ToolExecutionContext) -> TaskBoard:
    if ctx.host is None:
        raise ValueError("background tasks need the runtime")
    return ctx.host.tasks


def describe(info: TaskInfo) -> str:
    """One line: id, status, how it ended, what it runs."""
    state: str = info.status
    if info.status == "failed" and info.error:
        state += f" ({info.error})"
    elif info.status == "completed" and isinstance(info.result, dict) and "exit_code" in info.result:
        state += f" (exit code {info.result['exit_code']})"
    return f"task {info.id} [{info.executor_id}] {state}: {info.title}"


class TaskOutputTool(Tool):
    name = "task_output"
    description = (
        "Read the output of a background task of this thread (started by bash with run_in_background). "
        "Pass since = the `next` offset of your previous read to get only new output. Output over 2000 "
        "lines or 50 KB keeps its head and tail and names the file holding all of it. Also says whether "
        "the task still runs. Without task_id, lists this thread's tasks."
    )
    arguments_model = TaskOutputArguments
    kind = "read"
    read_only = True

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        try:
            args = parse_arguments(TaskOutputArguments, call)
            board = _board(ctx)
            if args.task_id is None:
                rows = [describe(info) for info in board.list()]
                return ToolResult(id=call.id, name=call.name, text="\n".join(rows) or "this thread has no background tasks")
            task_id = args.task_id.strip()
            info = board.get(task_id)
            chunk = board.output(task_id, args.since)
        except (ValueError, KeyError) as exc:
            return ToolResult.error(call, str(exc).strip("'\""))
        footer = f"[{describe(info)} · next={chunk.next} · full output: {chunk.path}]"
        body = shown_text(chunk.text) if chunk.text else "(no new output)"
        data: dict[str, Any] = {"task_id": info.id, "status": info.status, "next": chunk.next, "path": chunk.path}
        return ToolResult(id=call.id, name=call.name, text=f"{body}\n{footer}", data=data)


class TaskKillTool(Tool):
    name = "task_kill"
    description = (
        "Stop a background task of this thread: its command and everything it started are killed "
        "(SIGTERM, then SIGKILL), or its agent's turn is interrupted. Returns the end of its output."
    )
    arguments_model = TaskKillArguments
    kind = "execute"
    # It only stops what this thread itself started: nothing to approve in any mode.
    read_only = True

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        try:
            task_id = parse_arguments(TaskKillArguments, call).task_id.strip()
            board = _board(ctx)
            before = board.get(task_id)
            info = await board.cancel(task_id)
        except (ValueError, KeyError) as exc:
            return ToolResult.error(call, str(exc).strip("'\""))
        if before.status not in ("queued", "running"):
            text = f"task {task_id} was not running: {describe(info)}"
        else:
            text = f"stopped: {describe(info)}"
        tail = board.output(task_id).text.strip().splitlines()[-5:]
        if tail:
            text += "\nlast output:\n" + "\n".join(tail)
        return ToolResult(id=call.id, name=call.name, text=text, data={"task_id": task_id, "status": info.status})
