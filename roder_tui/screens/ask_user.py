"""The question dialog: the model's ``ask_user`` questions, answered from the keyboard.

Each question shows its header chip and text, its options (a radio list, or a checkbox list when
several may be chosen; arrows move, space or enter picks) and, when allowed, a line for an
answer in the user's own words. Tab moves between them; ctrl+s (or enter in the last text
line, or the Send button) sends; esc declines, which tells the model the user chose not to
answer. It fits a 40-column screen: everything stacks and scrolls inside the dialog.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, RadioButton, RadioSet, SelectionList, Static

from roder_core.kernel.questions import Question


class OptionButton(RadioButton):
    """A radio option whose label wraps: Textual's is one row, cut with "…" at the edge, and an
    option's description is what the choice means."""

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return Widget.get_content_height(self, container, viewport, width)  # the label's wrapped height, not 1


class AskUserScreen(ModalScreen[dict[str, Any] | None]):
    """Dismissed with the answers (keyed by question id), or None when the user declined."""

    BINDINGS = [
        Binding("ctrl+s", "send", "Send answers"),
        Binding("escape", "decline", "Decline"),
    ]
    DEFAULT_CSS = """
    AskUserScreen { align: center middle; }
    AskUserScreen > Vertical {
        width: 100%; max-width: 100; height: auto; max-height: 100%;
        background: $surface; border: round $accent; padding: 0 1;
    }
    AskUserScreen #ask-title { text-style: bold; color: $accent; }
    AskUserScreen VerticalScroll { height: auto; max-height: 1fr; }
    AskUserScreen .ask-question { margin-top: 1; text-style: bold; }
    AskUserScreen .ask-header { color: $text-muted; }
    AskUserScreen RadioSet, AskUserScreen SelectionList { width: 100%; height: auto; max-height: 10; }
    AskUserScreen OptionButton { height: auto; text-wrap: wrap; text-overflow: fold; }
    AskUserScreen Input { margin-bottom: 0; }
    /* The buttons and keys are docked together: the questions scroll, the keys are never cut. */
    AskUserScreen #ask-foot { dock: bottom; height: auto; }
    AskUserScreen #ask-buttons { height: auto; margin-top: 1; }
    AskUserScreen #ask-keys { height: auto; color: $text-muted; }
    """

    def __init__(self, questions: list[Question], *, asker: str = "") -> None:
        super().__init__()
        self.questions = questions
        self.asker = asker

    def compose(self) -> ComposeResult:
        title = "The agent asks" + (f" ({self.asker})" if self.asker else "")
        with Vertical():
            yield Static(title, id="ask-title", markup=False)
            with VerticalScroll(id="ask-questions"):
                for question in self.questions:
                    if question.header:
                        yield Static(f"[{question.header}]", classes="ask-header", markup=False)
                    yield Static(question.question, classes="ask-question", markup=False)
                    if question.options and question.multi_select:
                        yield SelectionList[str](
                            *[(_label(o.label, o.description), o.label) for o in question.options],
                            id=f"choice-{question.id}",
                        )
                    elif question.options:
                        with RadioSet(id=f"choice-{question.id}"):
                            for option in question.options:
                                yield OptionButton(_label(option.label, option.description))
                    if question.allow_free_text:
                        placeholder = "or answer in your own words" if question.options else "your answer"
                        yield Input(placeholder=placeholder, id=f"text-{question.id}")
            with Vertical(id="ask-foot"):
                with Horizontal(id="ask-buttons"):
                    yield Button("Send", id="ask-send", variant="primary")
                    yield Button("Decline", id="ask-decline")
                yield Static("tab: next · space/enter: choose · ctrl+s: send · esc: decline", id="ask-keys")

    def on_mount(self) -> None:
        self.focus_next()

    def answers(self) -> dict[str, Any]:
        """What the user chose and typed, keyed by question id (unanswered questions left out)."""
        answers: dict[str, Any] = {}
        for question in self.questions:
            values: list[str] = []
            if question.options and question.multi_select:
                values += list(self.query_one(f"#choice-{question.id}", SelectionList).selected)
            elif question.options:
                index = self.query_one(f"#choice-{question.id}", RadioSet).pressed_index
                if index >= 0:
                    values.append(question.options[index].label)
            if question.allow_free_text:
                text = self.query_one(f"#text-{question.id}", Input).value.strip()
                if text:
                    values.append(text)
            if values:
                answers[question.id] = values if question.multi_select or len(values) > 1 else values[0]
        return answers

    def action_send(self) -> None:
        self.dismiss(self.answers())

    def action_decline(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "ask-send":
            self.action_send()
        else:
            self.action_decline()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in a text line moves on; in the last question's line it sends."""
        event.stop()
        last = self.questions[-1]
        if event.input.id == f"text-{last.id}":
            self.action_send()
        else:
            self.focus_next()


def _label(label: str, description: str) -> Text:
    text = Text(label, style="bold")
    if description:
        text.append(f" — {description}", style="")
    return text
