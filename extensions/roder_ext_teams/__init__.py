"""Team tools: how the members of an agent team (and their lead) talk and share work.

- ``team_message {to, text}``: a message to one member or the lead; it reaches the recipient at
  its next model call (steered into its running turn, or starting its next one).
- ``team_broadcast {text}``: the same message to everyone else in the team.
- ``team_tasks {action, ...}``: the shared task list: list, add, claim, complete.

The tools are offered only to threads in a team and speak for their caller through
``ToolHost.team()``; the team itself is run by the runtime (``team/*`` methods).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar, cast

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
from roder_core.errors import RoderError
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.teams import TeamChannel
from roder_core.kernel.tool_args import ToolArgumentError, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolSet

if TYPE_CHECKING:  # the team model loads with the first team (a run without one never needs it)
    from roder_core.teams.model import TeamTask


class MessageArgs(ToolArguments):
    to: str = Field(min_length=1, description="a member's name, or lead")
    text: str = Field(min_length=1, description="the message")


class BroadcastArgs(ToolArguments):
    text: str = Field(min_length=1, description="the message for everyone else in the team")


class TasksArgs(ToolArguments):
    action: str = Field(description="list, add, claim or complete")
    title: str = Field(default="", description="add: the task's title")
    detail: str = Field(default="", description="add: what exactly to do")
    task_id: str = Field(default="", description="claim, complete: the task's id (or its exact title)")
    result: str = Field(default="", description="complete: the outcome, in a line or two")


ArgsT = TypeVar("ArgsT", bound=ToolArguments)


class TeamTool(Tool, Generic[ArgsT]):
    """A tool that speaks for its caller in the caller's team: ``execute`` finds the team and
    checks the arguments, ``act`` does the one thing the tool is for (a ``RoderError`` it
    raises, such as an unknown member, becomes the call's error result)."""

    read_only = True  # it changes nothing outside the team: every teammate's own work is under policy
    team_only = True
    kind = "other"

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        team = ctx.host.team() if ctx.host is not None else None
        if team is None:
            return ToolResult.error(call, f"{call.name} works only in an agent team (a client starts one with team/start)")
        model = self.arguments_model
        assert model is not None
        try:
            args = parse_arguments(model, call)
            return await self.act(team, cast(ArgsT, args), call)
        except (ToolArgumentError, RoderError) as exc:
            return ToolResult.error(call, str(exc))

    async def act(self, team: TeamChannel, args: ArgsT, call: ToolCall) -> ToolResult:
        raise NotImplementedError  # abstract: every team tool overrides this


class TeamMessageTool(TeamTool[MessageArgs]):
    name = "team_message"
    description = (
        "Send a message to one member of your agent team, or to the lead (to: 'lead'). It reaches them at "
        "their next model call. Use it to hand over findings, ask a teammate something, or report to the lead."
    )
    arguments_model = MessageArgs

    async def act(self, team: TeamChannel, args: MessageArgs, call: ToolCall) -> ToolResult:
        how = await team.send(args.to, args.text)
        return ToolResult(id=call.id, name=call.name, text=f"sent to {args.to} ({how})", data={"to": args.to})


class TeamBroadcastTool(TeamTool[BroadcastArgs]):
    name = "team_broadcast"
    description = "Send one message to everyone else in your agent team (the lead included)."
    arguments_model = BroadcastArgs

    async def act(self, team: TeamChannel, args: BroadcastArgs, call: ToolCall) -> ToolResult:
        from roder_core.teams.model import EVERYONE

        how = await team.send(EVERYONE, args.text)
        return ToolResult(id=call.id, name=call.name, text=f"broadcast ({how})")


def _task_line(task: TeamTask) -> str:
    owner = f" [{task.owner}]" if task.owner else ""
    result = f" -> {task.result}" if task.result else ""
    return f"{task.task_id} {task.status}{owner}: {task.title}{result}"


class TeamTasksTool(TeamTool[TasksArgs]):
    name = "team_tasks"
    description = (
        "Your agent team's shared task list. action=list shows every item; add {title, detail} adds one; "
        "claim {task_id} takes an open item before you work on it; complete {task_id, result} marks your item done."
    )
    arguments_model = TasksArgs

    async def act(self, team: TeamChannel, args: TasksArgs, call: ToolCall) -> ToolResult:
        if args.action == "list":
            tasks = team.tasks()
            text = "\n".join(_task_line(t) for t in tasks) or "the task list is empty"
            return ToolResult(id=call.id, name=call.name, text=text, data={"tasks": [t.wire() for t in tasks]})
        if args.action == "add":
            task = team.add_task(args.title, args.detail)
        elif args.action == "claim":
            task = team.claim_task(args.task_id)
        elif args.action == "complete":
            task = team.complete_task(args.task_id, args.result)
        else:
            return ToolResult.error(call, f"unknown action {args.action!r}: use list, add, claim or complete")
        return ToolResult(id=call.id, name=call.name, text=_task_line(task), data={"task": task.wire()})


class TeamsExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-teams",
            name="Agent teams",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="team_message, team_broadcast and team_tasks: how team members talk and share work",
            provides=[ProvidedService.ToolProvider("teams")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(ToolSet("teams", [TeamMessageTool(), TeamBroadcastTool(), TeamTasksTool()]))


def create(host: HostContext) -> TeamsExtension:
    return TeamsExtension()
