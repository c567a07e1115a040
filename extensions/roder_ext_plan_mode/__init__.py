"""Plan mode: read-only research, then a plan the user approves before any edit.

The mode itself is policy (``plan`` allows read-only tools only). This extension adds:
- ``exit_plan``: the model proposes its plan; the user approves it (the session continues in ask
  or auto-edit mode, or bypass via ``session/exit_plan``) or rejects it with feedback (the model
  stays in plan mode and revises). The plan is recorded as a plan item in the thread.
- instructions in the system prompt while the thread is in plan mode.
"""

from __future__ import annotations

from typing import Any

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
)
from roder_core.ir import ApprovalOption, ApprovalRequest, PlanItem
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.registry import ExtensionRegistryBuilder
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolSet
from roder_core.policy.plan_review import MODE_BY_DECISION, PLAN_TOOL

PLAN_MODE_INSTRUCTIONS = (
    "You are in plan mode. Only read-only tools run: explore the code, ask questions, and work out a "
    "plan. Do not try to edit files or run commands that change anything. When the plan is ready, "
    f"call the {PLAN_TOOL} tool with the complete plan in markdown; the user approves it (then you "
    "may implement it) or rejects it with feedback (then revise it and call the tool again)."
)


class ExitPlanArguments(ToolArguments):
    plan: NonBlank = Field(description="the plan, in markdown")


class ExitPlanTool(Tool):
    name = PLAN_TOOL
    description = (
        "Present your implementation plan to the user for approval and leave plan mode. Call this only "
        "in plan mode, once the plan is complete. The user approves it (you may then start editing) or "
        "rejects it with feedback (stay in plan mode and revise)."
    )
    arguments_model = ExitPlanArguments
    read_only = True  # it must run in plan mode; it changes nothing but the mode, after approval
    kind = "think"

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        host = ctx.host
        plan = parse_arguments(ExitPlanArguments, call).plan.strip()
        if host is None:
            return ToolResult.error(call, "exit_plan needs the runtime")
        if ctx.mode != "plan":
            return ToolResult(id=call.id, name=call.name, text=f"Not in plan mode (mode is {ctx.mode}); go ahead.")
        await host.emit_item(PlanItem(text=plan))
        if not host.interactive:
            return ToolResult(
                id=call.id,
                name=call.name,
                is_error=True,
                data={"approved": False},
                text="Nobody can approve a plan in this headless run; stay in plan mode and give the plan as your final answer.",
            )
        request = ApprovalRequest(
            thread_id=ctx.thread_id,
            turn_id=ctx.turn_id,
            call_id=call.id,
            tool=PLAN_TOOL,
            arguments={"plan": plan},
            reason="The agent finished planning. Approve the plan to let it start editing.",
            options=[
                ApprovalOption(id="allow_session", label="Approve and auto-accept edits (auto-edit mode)"),
                ApprovalOption(id="allow_once", label="Approve; ask before each edit (ask mode)"),
                ApprovalOption(id="deny", label="Keep planning (tell the agent what to change)"),
            ],
        )
        decision = await host.request_approval(request)
        feedback = f" Feedback: {decision.reason}" if decision.reason else ""
        if not decision.allowed:
            return ToolResult(
                id=call.id,
                name=call.name,
                data={"approved": False, "feedback": decision.reason},
                text=f"The user rejected the plan.{feedback} Stay in plan mode, revise the plan and call {PLAN_TOOL} again.",
            )
        mode = MODE_BY_DECISION[decision.decision]
        await host.set_mode(mode, reason="plan approved")
        return ToolResult(
            id=call.id,
            name=call.name,
            data={"approved": True, "mode": mode},
            text=f"The user approved the plan; the session is now in {mode} mode.{feedback} Start implementing it.",
        )


class PlanModeInstructions:
    """Adds the plan-mode instructions to the system prompt of threads in plan mode."""

    def id(self) -> str:
        return "plan-mode-instructions"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.CONTEXT})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        request = payload.get("request")
        if payload.get("mode") != "plan" or request is None:
            return None
        system = f"{request.system}\n\n{PLAN_MODE_INSTRUCTIONS}".strip()
        return HookOutcome(replace={"request": request.model_copy(update={"system": system})})


class PlanModeExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-plan-mode",
            name="Plan mode",
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description="exit_plan: the model proposes a plan, the user approves it before edits start",
            provides=[ProvidedService.ToolProvider("plan-mode"), ProvidedService.Hook("plan-mode-instructions")],
        )

    def install(self, registry: ExtensionRegistryBuilder) -> None:
        registry.tool_contributor(ToolSet("plan-mode", [ExitPlanTool()]))
        registry.hook(PlanModeInstructions())


def create(host: HostContext) -> PlanModeExtension:
    return PlanModeExtension()
