"""Questions to the user: what ``ask_user`` sends in ``userInput/requested`` and what answers are.

A request carries one to four questions. Each has an ``id``, the ``question``, a short
``header`` (a chip label), two to four ``options`` (``label`` and ``description``), whether
several may be chosen (``multiSelect``) and whether the user may type an answer of their own
(``allowFreeText``). ``session/resolve_user_input`` answers with ``answers`` keyed by question
id: a string (an option's label, or free text) or a list of strings (several options, and
possibly free text). Empty ``answers`` means the user declined to answer.

Clients read questions with ``Question.from_json``, which also accepts the bare
``{id, question}`` shape other tools may send (no options: free text only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_QUESTIONS = 4
MIN_OPTIONS = 2
MAX_OPTIONS = 4
#: Longest header shown as a chip.
MAX_HEADER = 20


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    header: str = ""
    options: tuple[Option, ...] = ()
    multi_select: bool = False
    allow_free_text: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "header": self.header,
            "question": self.question,
            "options": [{"label": o.label, "description": o.description} for o in self.options],
            "multiSelect": self.multi_select,
            "allowFreeText": self.allow_free_text,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], index: int = 0) -> Question:
        """A question as a client received it (lenient: unknown keys ignored, defaults filled)."""
        options = tuple(
            Option(str(o.get("label", "")), str(o.get("description", "")))
            for o in data.get("options") or []
            if isinstance(o, dict) and str(o.get("label", "")).strip()
        )
        return cls(
            id=str(data.get("id") or f"q{index + 1}"),
            question=str(data.get("question") or data.get("text") or ""),
            header=str(data.get("header") or "")[:MAX_HEADER],
            options=options,
            multi_select=bool(data.get("multiSelect", False)),
            allow_free_text=bool(data.get("allowFreeText", True)) or not options,
        )

    def selected(self, value: Any) -> tuple[list[str], str]:
        """An answer split into the chosen option labels and any free text."""
        values = value if isinstance(value, list) else [value] if value not in (None, "") else []
        labels = {o.label for o in self.options}
        chosen = [str(v) for v in values if str(v) in labels]
        free = [str(v).strip() for v in values if str(v) not in labels and str(v).strip()]
        return chosen, "\n".join(free)

    def describe_answer(self, value: Any) -> str:
        chosen, free = self.selected(value)
        parts = list(chosen)
        if free:
            parts.append(f"(their own words) {free}")
        return ", ".join(parts) if parts else "(no answer)"


@dataclass
class AnswerSheet:
    """The answers to one request, read against its questions."""

    questions: list[Question]
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def declined(self) -> bool:
        return not any(self.questions_answered())

    def questions_answered(self) -> list[Question]:
        answered = []
        for question in self.questions:
            chosen, free = question.selected(self.answers.get(question.id))
            if chosen or free:
                answered.append(question)
        return answered

    def summary(self) -> str:
        """What the model reads: each question and the user's answer."""
        lines = []
        for number, question in enumerate(self.questions, 1):
            lines.append(f'{number}. "{question.question}" → {question.describe_answer(self.answers.get(question.id))}')
        return "\n".join(lines)
