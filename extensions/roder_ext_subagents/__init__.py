"""Subagents: the ``task`` tool runs a child thread with its own context, tools and policy.

The child starts empty (its own context: the agent's instructions and the task), sees only the
agent's tools (``tools:`` in its definition; never ``task`` or ``exit_plan``), and runs in the
stricter of the agent's mode and the parent's. Its progress streams into the parent's tool card
as it happens; its final answer is the tool result; its whole trace is kept in that result for
``turn/subagentTrace/read``. Agents: built-in ``general`` and ``explore`` (read-only), plus
``.roder/agents/*.md`` in a trusted folder and ``agents/*.md`` in the user config dir (frontmatter
``name``, ``description``, ``tools``, ``model``, optional ``mode``; the body is the prompt).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import Field

from roder_core import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
    __version__,
)
from roder_core.customization.definitions import AgentDefinition, split_model
from roder_core.customization.subagents import TraceRecord, agent_tools, child_mode, list_agents
from roder_core.ir import AgentMessageItem, ToolCallItem, ToolResultItem, new_id
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tool_args import NonBlank, ToolArguments, arguments_schema, parse_arguments
from roder_core.kernel.tools import ToolSet
from roder_core.threads.events import ItemCompleted, RuntimeEvent

_PROGRESS_CHARS = 160


def _short(text: str, limit: int = _PROGRESS_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def progress_line(event: RuntimeEvent) -> str | None:
    """One human line per completed child item, streamed into the parent's task card."""
    if not isinstance(event, ItemCompleted):
        return None
    item = event.item
    if isinstance(item, ToolCallItem):
        return f"→ {item.name} {_short(json.dumps(item.arguments, ensure_ascii=False), 100)}\n"
    if isinstance(item, ToolResultItem):
        first = item.text.strip().splitlines()[0] if item.text.strip() else ""
        return f"  {'✗' if item.is_error else '✓'} {_short(first, 120)}\n"
    if isinstance(item, AgentMessageItem) and item.text.strip():
        return f"· {_short(item.text)}\n"
    return None


class SubagentRunner:
    """Runs one child thread for a parent tool call; shared by the task tool and the dispatcher."""

    def __init__(self, agents: dict[str, AgentDefinition]) -> None:
        self.agents = agents

    async def run(self, ctx: ToolExecutionContext, agent_name: str, description: str, prompt: str) -> ToolResult:
        host = ctx.host
        call = ToolCall(id=ctx.call_id, name="task")
        if host is None:
            return ToolResult.error(call, "task needs the runtime")
        agent = self.agents.get(agent_name)
        if agent is None:
            return ToolResult.error(call, f"unknown agent {agent_name!r}; available: {', '.join(sorted(self.agents))}")
        provider, model = split_model(agent.model, host.provider)
        child_id = await host.start_child_thread(
            title=f"{agent.name}: {description}",
            provider=provider,
            model=model or host.model,
            tools=agent_tools(host.tool_names(), agent),
            mode=child_mode(ctx.mode, agent.mode),
        )
        record = TraceRecord(new_id("trace"), agent.name, description, ctx.thread_id, ctx.turn_id, ctx.call_id, child_id)
        host.register_subagent(record)
        ctx.emit_output(f"subagent {agent.name} started: {description}\n")

        def forward(event: RuntimeEvent) -> None:
            if line := progress_line(event):
                ctx.emit_output(line)

        text = f"{agent.prompt}\n\nYour task:\n{prompt}" if agent.prompt else prompt
        try:
            run = await host.run_child_thread(child_id, text, forward)
        except asyncio.CancelledError:
            record.status = "interrupted"
            raise
        turn = run.turn
        answers = [i.text for i in turn.items if isinstance(i, AgentMessageItem) and i.text.strip()]
        record.status, record.completed_at = turn.status, turn.completed_at
        record.result = answers[-1] if answers else ""
        data = {"subagent": {**record.to_json(), "items": [i.wire() for i in run.items]}}
        if turn.status != "completed":
            reason = turn.error.message if turn.error else turn.status
            return ToolResult(
                id=call.id,
                name="task",
                is_error=True,
                data=data,
                text=f"subagent {agent.name} {turn.status}: {reason}\n{record.result}".strip(),
            )
        return ToolResult(id=call.id, name="task", data=data, text=record.result or "(the subagent gave no answer)")


class TaskArguments(ToolArguments):
    description: str = Field(description="3-8 word summary of the task")
    prompt: NonBlank = Field(description="the full task for the subagent")
    subagent_type: str = Field("general", description="which agent runs it (default: general)")


class TaskTool(Tool):
    name = "task"
    # The child's own calls go through policy in a mode never freer than this one, so launching
    # it changes nothing by itself (and it may run in plan mode for read-only exploration).
    read_only = True
    kind = "think"

    def __init__(self, runner: SubagentRunner) -> None:
        self.runner = runner
        listing = "\n".join(f"- {a.name}: {a.description}" for a in sorted(runner.agents.values(), key=lambda a: a.name))
        self.description = (
            "Run a subagent on a self-contained task in its own context, with its own tools and policy. "
            "Use it for broad searches or independent subtasks; give it everything it needs in the prompt; "
            f"its final report comes back as the result. Agents:\n{listing}"
        )

    arguments_model = TaskArguments

    def schema(self) -> dict[str, Any]:
        """The defined agents are the only valid ``subagent_type`` values."""
        return arguments_schema(TaskArguments, choices={"subagent_type": sorted(self.runner.agents)})

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(TaskArguments, call)
        prompt = args.prompt.strip()
        result = await self.runner.run(ctx, args.subagent_type or "general", args.description.strip() or prompt[:60], prompt)
        result.id, result.name = call.id, call.name
        return result


class SubagentDispatch:
    """The SubagentDispatcher service: run an agent by name from other extensions."""

    def __init__(self, runner: SubagentRunner) -> None:
        self.runner = runner

    def id(self) -> str:
        return "subagents"

    async def dispatch(self, ctx: ToolExecutionContext, agent: str, prompt: str) -> str:
        result = await self.runner.run(ctx, agent, prompt[:60], prompt)
        return result.text


class SubagentsExtension(RoderExtension):
    def __init__(self, agents: dict[str, AgentDefinition]) -> None:
        self.runner = SubagentRunner(agents)

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-subagents",
            name="Subagents",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="task tool: child threads with their own context, tools and policy",
            provides=[ProvidedService.ToolProvider("subagents"), ProvidedService.SubagentDispatcher("subagents")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(ToolSet("subagents", [TaskTool(self.runner)]))
        registry.subagent_dispatcher(SubagentDispatch(self.runner))


def create(host: HostContext) -> SubagentsExtension:
    return SubagentsExtension({a.name: a for a in list_agents(host.cwd, host.paths, host.trusted, host.config)})
