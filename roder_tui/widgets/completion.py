"""Completion suggestions under the prompt: ``/command`` at the start, ``@file`` anywhere.

Imported and mounted on the first completion, so the first frame does not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from textual.widgets import TextArea


@dataclass(frozen=True)
class Completion:
    value: str  # text that replaces the token being completed
    label: str
    help: str = ""


class CompletionPopup(OptionList):
    """Suggestions for the token at the cursor: ``/command`` at the start, ``@file`` anywhere."""

    DEFAULT_CSS = """
    CompletionPopup { height: auto; max-height: 8; border: none; background: $panel; display: none; }
    """

    def __init__(self, prompt: TextArea) -> None:
        """``prompt``: the text area it completes in (the app's ``PromptInput``)."""
        super().__init__()
        self.prompt = prompt
        self.can_focus = False
        self.items: list[Completion] = []
        self._token = ""

    def show(self, token: str, items: list[Completion]) -> None:
        self._token = token
        self.items = items
        self.clear_options()
        if not items:
            self.display = False
            return
        # Content, not markup: a path (``app/[id]/page.tsx``) or a hint (``[instructions]``) is text.
        self.add_options([Option(Content.assemble(c.label, ("  " + c.help, "dim") if c.help else "")) for c in items])
        # What is typed in full is the choice, even where longer names share it (/plan, /plan-review).
        self.highlighted = next((i for i, c in enumerate(items) if c.value.strip() == token), 0)
        self.display = True

    @property
    def completes_command(self) -> bool:
        """Completing a ``/command`` (enter then runs it), not an ``@file``."""
        return self._token.startswith("/")

    def move(self, step: int) -> None:
        if self.items:
            self.highlighted = ((self.highlighted or 0) + step) % len(self.items)

    def close(self) -> None:
        self.display = False
        self.items = []

    def accept(self) -> None:
        if not self.items:
            self.close()
            return
        choice = self.items[self.highlighted or 0]
        row, column = self.prompt.cursor_location
        start = (row, column - len(self._token))
        self.prompt.replace(choice.value, start, (row, column))
        self.close()
