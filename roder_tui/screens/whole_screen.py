"""A question that takes the whole screen before the app starts: the first-run screen (no
provider yet) and the trust prompt (a folder that brings its own items).

Nothing of the app shows around it, as in Claude Code's onboarding: the text scrolls in the
middle and the keys stay docked at the bottom, so they are on screen at every size down to 40x20.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class WholeScreenQuestion(ModalScreen[str]):
    """Dismisses with the choice its bindings name (``action_choose``). A subclass sets the title,
    the border's colour class, the keys' legend and its text (``body``)."""

    DEFAULT_CSS = """
    WholeScreenQuestion { align: center middle; background: $background; }
    WholeScreenQuestion > Vertical {
        width: 100%; max-width: 84; height: auto; max-height: 100%;
        background: $surface; border: round $primary; padding: 0 1;
    }
    WholeScreenQuestion > Vertical.-warning { border: round $warning; }
    WholeScreenQuestion VerticalScroll { height: auto; max-height: 1fr; }
    WholeScreenQuestion .question-keys { dock: bottom; height: auto; margin-top: 1; }
    """

    #: The box's border title.
    TITLE_TEXT: ClassVar[str] = ""
    #: ``"-warning"`` for a question about safety; empty for the primary colour.
    BORDER_CLASS: ClassVar[str] = ""
    #: (key, what it does) for the legend, in order.
    KEYS: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The legend's id (tests and styles find it by it).
    KEYS_ID: ClassVar[str] = ""

    def body(self) -> str:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with Vertical(classes=self.BORDER_CLASS) as box:
            box.border_title = self.TITLE_TEXT
            yield Static(self.legend(), id=self.KEYS_ID or None, classes="question-keys")
            with VerticalScroll():
                yield Static(self.body(), markup=False)

    @classmethod
    def legend(cls) -> Text:
        """One key a row, each key centred in a reversed cell as wide as the widest."""
        width = max((len(key) for key, _ in cls.KEYS), default=0) + 2
        keys = Text()
        for key, label in cls.KEYS:
            if keys:
                keys.append("\n")
            keys.append(key.center(width), style="bold reverse")
            keys.append(f" {label}")
        return keys

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
