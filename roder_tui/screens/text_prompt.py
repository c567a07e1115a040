"""A one-line question: a comment on a plan, a rejection reason, rewrite instructions.

Returns the text on enter, or None on esc. ``required`` keeps enter from accepting an empty line.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class TextPromptScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    TextPromptScreen { align: center middle; }
    TextPromptScreen > Vertical {
        width: 100%; max-width: 100; height: auto;
        background: $surface; border: round $primary; padding: 0 1;
    }
    TextPromptScreen #text-prompt-note { color: $text-muted; max-height: 6; }
    TextPromptScreen #text-prompt-error { color: $error; }
    """

    def __init__(self, title: str, *, note: str = "", placeholder: str = "", required: bool = True) -> None:
        super().__init__()
        self.title_text, self.note, self.placeholder, self.required = title, note, placeholder, required

    def compose(self):  # type: ignore[override]
        with Vertical() as box:
            box.border_title = f"{self.title_text} · enter to send, esc to cancel"
            if self.note:
                yield Static(self.note, id="text-prompt-note", markup=False)
            yield Input(placeholder=self.placeholder, id="text-prompt-input")
            yield Static("", id="text-prompt-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if self.required and not text:
            self.query_one("#text-prompt-error", Static).update("type something first (esc cancels)")
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
