"""``ask_user`` questions in an editor: what ACP offers for them.

An editor that advertises form elicitation (``clientCapabilities.elicitation.form``) gets one
``elicitation/create`` form for the whole request: a titled single-select (``oneOf``) or
multi-select (``anyOf``) property per question, plus a text property for the user's own words
where the question allows them. Accept answers every question; decline and cancel answer none.

Any other editor gets ``session/request_permission`` once per question, the options as the
permission options (each "allow once"-kinded, since that is what ACP has) plus "Skip": one
choice per question, no free text. Cancelling stops at that question.
"""

from __future__ import annotations

from typing import Any

from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ElicitationFormSessionMode,
    ElicitationMultiSelectPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
    PermissionOption,
    TitledMultiSelectItems,
    ToolCallUpdate,
)

from roder_core.kernel.questions import Question

#: Suffix of the text property that holds a question's answer in the user's own words.
OWN_WORDS = "_own_words"
SKIP = "skip"


def form_schema(questions: list[Question]) -> ElicitationSchema:
    properties: dict[str, Any] = {}
    for question in questions:
        title = question.header or question.question
        if question.options and question.multi_select:
            properties[question.id] = ElicitationMultiSelectPropertySchema(
                type="array",
                title=title,
                description=question.question,
                items=TitledMultiSelectItems(
                    any_of=[EnumOption(const=o.label, title=o.label, description=o.description or None) for o in question.options]
                ),
            )
        elif question.options:
            properties[question.id] = ElicitationStringPropertySchema(
                type="string",
                title=title,
                description=question.question,
                one_of=[EnumOption(const=o.label, title=o.label, description=o.description or None) for o in question.options],
            )
        if question.allow_free_text:
            properties[question.id + OWN_WORDS] = ElicitationStringPropertySchema(
                type="string",
                title=f"{title}: your own answer" if question.options else title,
                description="Optional: answer in your own words instead." if question.options else question.question,
            )
    return ElicitationSchema(type="object", title="Questions from the agent", properties=properties, required=[])


def form_answers(questions: list[Question], content: dict[str, Any] | None) -> dict[str, Any]:
    """An accepted form's content as ``session/resolve_user_input`` answers."""
    content = content or {}
    answers: dict[str, Any] = {}
    for question in questions:
        chosen = content.get(question.id)
        values = [str(v) for v in chosen] if isinstance(chosen, list) else [str(chosen)] if chosen else []
        own = content.get(question.id + OWN_WORDS)
        if isinstance(own, str) and own.strip():
            values.append(own.strip())
        if values:
            answers[question.id] = values if question.multi_select or len(values) > 1 else values[0]
    return answers


async def ask_by_form(conn: Any, session_id: str, questions: list[Question], tool_call_id: str | None) -> dict[str, Any]:
    mode = ElicitationFormSessionMode(session_id=session_id, tool_call_id=tool_call_id, requested_schema=form_schema(questions))
    message = questions[0].question if len(questions) == 1 else f"The agent has {len(questions)} questions for you."
    response = await conn.create_elicitation(message=message, mode=mode)
    if isinstance(response, AcceptElicitationResponse):
        return form_answers(questions, response.content)
    return {}


async def ask_by_permission(conn: Any, session_id: str, questions: list[Question], tool_call_id: str) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for question in questions:
        if not question.options:
            continue  # free text only: a permission request cannot carry it
        options = [
            PermissionOption(option_id=f"option-{index}", name=option.label, kind="allow_once")
            for index, option in enumerate(question.options)
        ]
        options.append(PermissionOption(option_id=SKIP, name="Skip this question", kind="reject_once"))
        details = "\n".join(f"{o.label}: {o.description}" for o in question.options if o.description)
        tool_call = ToolCallUpdate(
            tool_call_id=tool_call_id,
            title=question.question,
            kind="think",
            status="pending",
            raw_input={"question": question.question, "details": details} if details else {"question": question.question},
        )
        response = await conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome):
            break  # cancelled: no further questions
        if outcome.option_id.startswith("option-"):
            answers[question.id] = question.options[int(outcome.option_id.removeprefix("option-"))].label
    return answers
