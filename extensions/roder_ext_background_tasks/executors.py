"""The ``shell`` and ``agent`` task executors."""

from __future__ import annotations

import json
from typing import Any

from roder_core.customization.subagents import CHILD_EXCLUDED_TOOLS
from roder_core.ir import AgentMessageItem, ToolCallItem, ToolResultItem
from roder_core.kernel.services import TaskContext
from roder_core.kernel.tasks import TaskFailed
from roder_core.threads.events import ItemCompleted, RuntimeEvent

#: Characters of a command line or prompt shown as a task's title.
TITLE_CHARS = 120


def _text_param(params: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = params.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"params.{name} must be a non-empty string")
    return value


def _title(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1] + "…"


class ShellExecutor:
    """``{command, workdir?}``: a long-running shell command, sandboxed like ``bash``."""

    def id(self) -> str:
        return "shell"

    def describe(self, params: dict[str, Any]) -> str:
        _text_param(params, "workdir", required=False)
        return _title(_text_param(params, "command"))

    def policy_call(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A client's shell task passes policy exactly like the same ``bash`` call."""
        arguments = {"command": _text_param(params, "command")}
        if workdir := _text_param(params, "workdir", required=False):
            arguments["workdir"] = workdir
        return "bash", arguments

    async def run(self, params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        command = _text_param(params, "command")
        cwd = ctx.brokers.fs.resolve(_text_param(params, "workdir", required=False) or ".")
        process = await ctx.brokers.process.spawn(command, output=ctx.output, cwd=cwd)
        result = await process.wait()  # cancelling the task cancels this wait, which kills it
        summary = {
            "exit_code": result.exit_code,
            "duration_ms": result.duration_ms,
            "sandbox": result.sandbox,
            "quarantined": result.quarantined,
        }
        if result.exit_code != 0:
            raise TaskFailed(f"exited with code {result.exit_code}")
        return summary


def progress_line(event: RuntimeEvent) -> str | None:
    """One line of a child turn's progress for the task's output."""
    if not isinstance(event, ItemCompleted):
        return None
    item = event.item
    if isinstance(item, ToolCallItem):
        return f"→ {item.name} {_title(json.dumps(item.arguments, ensure_ascii=False))}\n"
    if isinstance(item, ToolResultItem):
        first = item.text.strip().splitlines()[0] if item.text.strip() else ""
        return f"  {'✗' if item.is_error else '✓'} {_title(first)}\n"
    if isinstance(item, AgentMessageItem) and item.text.strip():
        return item.text.strip() + "\n"
    return None


class AgentExecutor:
    """``{prompt, title?}``: one turn of a child thread of the task's thread, in the background."""

    def id(self) -> str:
        return "agent"

    def describe(self, params: dict[str, Any]) -> str:
        return _title(_text_param(params, "title", required=False) or _text_param(params, "prompt"))

    async def run(self, params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        prompt = _text_param(params, "prompt")
        host = ctx.host
        if host is None:
            raise TaskFailed("an agent task needs a thread: pass threadId")
        tools = frozenset(name for name in host.tool_names() if name not in CHILD_EXCLUDED_TOOLS)
        child = await host.start_child_thread(
            title=f"background: {self.describe(params)}", provider=host.provider, model=host.model, tools=tools, mode=host.mode
        )

        def record(event: RuntimeEvent) -> None:
            if line := progress_line(event):
                ctx.output.write(line)

        run = await host.run_child_thread(child, prompt, record)
        answers = [i.text for i in run.turn.items if isinstance(i, AgentMessageItem) and i.text.strip()]
        if run.turn.status != "completed":
            reason = run.turn.error.message if run.turn.error else run.turn.status
            raise TaskFailed(f"the agent's turn ended {run.turn.status}: {reason}")
        return {"thread_id": child, "answer": answers[-1] if answers else ""}
