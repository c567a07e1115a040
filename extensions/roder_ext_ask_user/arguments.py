"""``ask_user``'s argument model: the schema the model sees and the checks its questions pass.

Lenient where models commonly slip (an option given as a bare label, ``multiSelect`` spelled the
client's way) and strict where a dialog could not be drawn (blank text, too few or too many
options, two options with the same label)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, BeforeValidator, Field, model_validator

from roder_core.kernel.questions import MAX_HEADER, MAX_OPTIONS, MAX_QUESTIONS, MIN_OPTIONS, Option, Question
from roder_core.kernel.tool_args import NonBlank, ToolArguments


def _label_only(value: Any) -> Any:
    """``"Yes"`` stands for ``{"label": "Yes"}``."""
    return {"label": value} if isinstance(value, str) else value


class OptionArguments(ToolArguments):
    label: NonBlank = Field(description="1-5 words")
    description: str = Field("", description="what choosing it means")


class QuestionArguments(ToolArguments):
    question: NonBlank = Field(description="the full question, ending with ?")
    header: str = Field("", description=f"short label, at most {MAX_HEADER} characters")
    options: list[Annotated[OptionArguments, BeforeValidator(_label_only)]] = Field(
        min_length=MIN_OPTIONS, max_length=MAX_OPTIONS
    )
    multi_select: bool = Field(
        False, validation_alias=AliasChoices("multi_select", "multiSelect"), description="several options may be chosen"
    )
    allow_free_text: bool = Field(
        True,
        validation_alias=AliasChoices("allow_free_text", "allowFreeText"),
        description="the user may type an answer (default true)",
    )

    @model_validator(mode="after")
    def _distinct_labels(self) -> QuestionArguments:
        labels = [option.label.strip() for option in self.options]
        if len(set(labels)) != len(labels):
            raise ValueError("options must have different labels")
        return self


class AskUserArguments(ToolArguments):
    questions: list[QuestionArguments] = Field(min_length=1, max_length=MAX_QUESTIONS)

    def to_questions(self) -> list[Question]:
        """The questions as ``userInput/requested`` carries them (ids ``q1``, ``q2``, ...)."""
        return [
            Question(
                id=f"q{index}",
                question=item.question.strip(),
                header=item.header.strip()[:MAX_HEADER],
                options=tuple(Option(o.label.strip(), o.description.strip()) for o in item.options),
                multi_select=item.multi_select,
                allow_free_text=item.allow_free_text,
            )
            for index, item in enumerate(self.questions, start=1)
        ]
