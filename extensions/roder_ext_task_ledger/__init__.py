"""Task ledger: the ``todo`` tool keeps a visible list of work items with their status.

Each update replaces the list and is recorded as one plan item per turn (``todo-<turn id>``),
which clients render as the task list and which a resumed thread still has. With
``taskLedgerRequired`` on ``turn/start`` (eval and automation runs), the model is told the
ledger is part of finishing, and when it tries to stop with the ledger missing or unfinished it
is sent back once to checkpoint its scoreable outputs and bring the ledger up to date. (The turn
loop itself announces the deadline's finalization reserve.)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    HookOutcome,
    HookPoint,
    ProvidedService,
    RoderExtension,
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
    __version__,
)
from roder_core.ir import PlanItem, PlanStep, StepStatus, Thread
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolSet

_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}

REQUIRED_INSTRUCTIONS = (
    "This run requires a task ledger. Keep the todo tool up to date: list the work items, mark one "
    "in_progress while you work on it and completed when it is done. Before you finish, save every "
    "scoreable output (files, answers) in the workspace and make the ledger reflect what is done."
)
CHECKPOINT_REMINDER = (
    "Before finishing: this run requires a task ledger. Checkpoint your scoreable outputs now (make sure "
    "every result is saved in the workspace), then update the todo ledger so each item is completed or "
    "says why not. Then give your final answer."
)


def ledger_of(thread: Thread) -> list[PlanStep]:
    """The latest todo list recorded in a thread (empty when none)."""
    for item in reversed(thread.items()):
        if isinstance(item, PlanItem) and item.id.startswith("todo-"):
            return list(item.steps)
    return []


def render(steps: list[PlanStep]) -> str:
    return "\n".join(f"{_MARK[s.status]} {s.text}" for s in steps) or "(empty)"


class TodoEntry(ToolArguments):
    content: NonBlank = Field(description="what to do")
    status: Literal["pending", "in_progress", "completed"]


class TodoArguments(ToolArguments):
    todos: list[TodoEntry]


class TodoTool(Tool):
    name = "todo"
    description = (
        "Write the task ledger: the full list of work items for this task, each with a status "
        "(pending, in_progress, completed). Each call replaces the list. Use it for multi-step work; "
        "keep exactly one item in_progress while working."
    )
    arguments_model = TodoArguments
    read_only = True  # it only writes the ledger in the thread, never the workspace
    kind = "think"

    def __init__(self, ledger: LedgerState) -> None:
        self.ledger = ledger

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(TodoArguments, call)
        steps = [PlanStep(text=entry.content.strip(), status=StepStatus(entry.status)) for entry in args.todos]
        if ctx.host is not None:
            await ctx.host.emit_item(PlanItem(id=f"todo-{ctx.turn_id}", text="Task ledger", steps=steps))
        self.ledger.record(ctx.thread_id, ctx.turn_id, steps)
        done = sum(s.status == "completed" for s in steps)
        return ToolResult(
            id=call.id,
            name=call.name,
            data={"todos": [s.wire() for s in steps]},
            text=f"Ledger updated ({done}/{len(steps)} completed):\n{render(steps)}",
        )


class LedgerState:
    """The latest list per thread, and which turns were already reminded to checkpoint."""

    def __init__(self) -> None:
        self.lists: dict[str, tuple[str, list[PlanStep]]] = {}
        self.reminded: set[str] = set()

    def record(self, thread_id: str, turn_id: str, steps: list[PlanStep]) -> None:
        self.lists[thread_id] = (turn_id, steps)

    def needs_checkpoint(self, thread_id: str, turn_id: str) -> bool:
        turn, steps = self.lists.get(thread_id, ("", []))
        return turn != turn_id or not steps or any(s.status != "completed" for s in steps)


class LedgerFinalization:
    """With taskLedgerRequired: instructions in the system prompt, and one checkpoint reminder
    when the model stops with the ledger missing or unfinished."""

    #: Roder's own code in Roder's process: it adds to the system prompt of the request as it will be sent,
    #: so the hook runner hands it the payload unredacted (hooks that leave the process never get that).
    sees_raw_payload = True

    def __init__(self, ledger: LedgerState) -> None:
        self.ledger = ledger

    def id(self) -> str:
        return "task-ledger-finalization"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.CONTEXT, HookPoint.STOP})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        if not payload.get("task_ledger_required"):
            return None
        if point is HookPoint.CONTEXT:
            request = payload.get("request")
            if request is None:
                return None
            system = f"{request.system}\n\n{REQUIRED_INSTRUCTIONS}".strip()
            return HookOutcome(replace={"request": request.model_copy(update={"system": system})})
        thread_id, turn_id = str(payload.get("thread_id")), str(payload.get("turn_id"))
        if turn_id in self.ledger.reminded or not self.ledger.needs_checkpoint(thread_id, turn_id):
            return None
        self.ledger.reminded.add(turn_id)
        return HookOutcome(replace={"continue_with": CHECKPOINT_REMINDER})


class TaskLedgerExtension(RoderExtension):
    def __init__(self) -> None:
        self.ledger = LedgerState()

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-task-ledger",
            name="Task ledger",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="todo tool (task list with status); checkpoint reminder for taskLedgerRequired turns",
            provides=[ProvidedService.ToolProvider("task-ledger"), ProvidedService.Hook("task-ledger-finalization")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(ToolSet("task-ledger", [TodoTool(self.ledger)]))
        registry.hook(LedgerFinalization(self.ledger))


def create(host: HostContext) -> TaskLedgerExtension:
    return TaskLedgerExtension()
