"""``ask_user``: the model asks the person one to four multiple-choice questions and waits.

Like Claude Code's AskUserQuestion: each question has a short header, two to four options with
descriptions, optionally several choices, and (unless turned off) an answer in the user's own
words. The runtime emits ``userInput/requested``; a client answers with
``session/resolve_user_input`` (the TUI shows a dialog, ``roder acp`` asks the editor through
``elicitation/create`` or a permission request). With nobody to ask (``roder -p``, a batch run)
the tool answers at once that no user is available, so the model decides and says what it
assumed.
"""

from __future__ import annotations

from roder_core import EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.errors import RoderError
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.questions import MAX_OPTIONS, MAX_QUESTIONS, MIN_OPTIONS, AnswerSheet
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tool_args import parse_arguments
from roder_core.kernel.tools import Tool, ToolCall, ToolExecutionContext, ToolResult, ToolSet
from roder_ext_ask_user.arguments import AskUserArguments

NO_USER = (
    "No user is available to answer questions: this is a non-interactive run (roder -p, a batch or an "
    "automated client). Do not ask again. Choose the option you judge best for each question, state the "
    "assumption you made in your answer, and continue."
)


class AskUserTool(Tool):
    name = "ask_user"
    description = (
        f"Ask the user 1 to {MAX_QUESTIONS} multiple-choice questions and wait for the answers. Use it when a "
        "decision is genuinely the user's (a preference, an ambiguous requirement, a choice between approaches "
        f"with real trade-offs), not for things you can find out yourself. Each question has {MIN_OPTIONS} to "
        f"{MAX_OPTIONS} options (short label, one-line description), a short header (a chip label, at most 20 "
        "characters), multi_select when several options may be chosen, and the user may always answer in their "
        "own words unless allow_free_text is false. If no user is available the result says so: then decide "
        "yourself and state your assumptions."
    )
    arguments_model = AskUserArguments
    kind = "think"
    # It only asks: nothing to approve, and it works in plan mode.
    read_only = True

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        questions = parse_arguments(AskUserArguments, call).to_questions()
        if ctx.host is None or not ctx.host.interactive:
            return ToolResult(id=call.id, name=call.name, text=NO_USER, data={"no_user": True})
        try:
            answers = await ctx.host.request_user_input([q.to_json() for q in questions])
        except TimeoutError:
            return ToolResult(
                id=call.id,
                name=call.name,
                text="The user did not answer in time. Decide yourself, state your assumptions, and continue.",
                data={"timed_out": True},
            )
        except RoderError as exc:
            return ToolResult(id=call.id, name=call.name, text=f"{NO_USER} ({exc})", data={"no_user": True})
        sheet = AnswerSheet(questions, dict(answers))
        if sheet.declined:
            text = (
                "The user declined to answer. Do not ask the same again; go on with what you know, or stop and say what you need."
            )
            return ToolResult(id=call.id, name=call.name, text=text, data={"declined": True, "answers": {}})
        return ToolResult(
            id=call.id,
            name=call.name,
            text="The user answered:\n" + sheet.summary(),
            data={"answers": sheet.answers},
        )


class AskUserExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-ask-user",
            name="Ask the user",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="ask_user: multiple-choice questions to the person at the client",
            provides=[ProvidedService.ToolProvider("ask-user")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(ToolSet("ask-user", [AskUserTool()]))


def create(host: HostContext) -> RoderExtension:
    return AskUserExtension()
