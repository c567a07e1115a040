"""Plan mode: read-only research, then a plan the user reviews before any edit.

The mode itself is policy (``plan`` allows read-only tools only). This extension adds:
- ``exit_plan``: the model proposes its plan, which becomes a reviewable document
  (``plan/review/*``): the user comments on lines or sections, asks for a rewrite (the model gets
  the comments back and its next ``exit_plan`` is the plan's next version), approves it into an
  explicit next mode (ask, auto-edit or bypass), or rejects it with a reason. Each version is
  recorded as a plan item in the thread.
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
    __version__,
)
from roder_core.ir import PLAN_TOOL, PlanItem
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import ToolSet

PLAN_MODE_INSTRUCTIONS = (
    "You are in plan mode. Only read-only tools run: explore the code, ask questions, and work out a "
    "plan. Do not try to edit files or run commands that change anything. When the plan is ready, "
    f"call the {PLAN_TOOL} tool with the complete plan in markdown; the user reviews it: they approve it "
    "(then you may implement it), send it back with comments (revise it and call the tool again with the "
    "whole revised plan), or reject it with a reason."
)


class ExitPlanArguments(ToolArguments):
    plan: NonBlank = Field(description="the plan, in markdown")


class ExitPlanTool(Tool):
    name = PLAN_TOOL
    description = (
        "Present your implementation plan to the user for review and leave plan mode, once the plan is "
        "complete. The user approves it (you may then start editing), asks "
        "for a revision with comments (call this again with the complete revised plan), or rejects it."
    )
    arguments_model = ExitPlanArguments
    read_only = True  # it must run in plan mode; it changes nothing but the mode, after approval
    kind = "think"
    modes = frozenset({"plan"})  # offered in plan mode only: elsewhere there is no plan to leave

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
        verdict = await host.review_plan(call.id, plan)
        data = {"reviewId": verdict.review_id, "version": verdict.version, "outcome": verdict.outcome}
        if verdict.outcome == "rewrite":
            return ToolResult(id=call.id, name=call.name, data={**data, "approved": False}, text=verdict.feedback)
        if verdict.outcome == "rejected":
            reason = f" Reason: {verdict.feedback}" if verdict.feedback else ""
            return ToolResult(
                id=call.id,
                name=call.name,
                data={**data, "approved": False, "feedback": verdict.feedback},
                text=f"The user rejected the plan.{reason} Stay in plan mode, rethink it and call {PLAN_TOOL} again.",
            )
        mode = verdict.next_mode or "ask"
        await host.set_mode(mode, reason="plan approved")
        # The feedback is the user's note and any open review comments: instructions to follow.
        note = f"\n\n{verdict.feedback}" if verdict.feedback else ""
        return ToolResult(
            id=call.id,
            name=call.name,
            data={**data, "approved": True, "mode": str(mode)},
            text=f"The user approved the plan; the session is now in {mode} mode. Start implementing it.{note}",
        )


class PlanModeInstructions:
    """Adds the plan-mode instructions to the system prompt of threads in plan mode."""

    #: Roder's own code in Roder's process: it adds to the system prompt of the request as it will be sent,
    #: so the hook runner hands it the payload unredacted (hooks that leave the process never get that).
    sees_raw_payload = True

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
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="exit_plan: the model proposes a plan, the user approves it before edits start",
            provides=[ProvidedService.ToolProvider("plan-mode"), ProvidedService.Hook("plan-mode-instructions")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(ToolSet("plan-mode", [ExitPlanTool()]))
        registry.hook(PlanModeInstructions())


def create(host: HostContext) -> PlanModeExtension:
    return PlanModeExtension()
