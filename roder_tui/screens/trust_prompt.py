"""Trust this folder? Asked once, on the first open of a folder that brings its own items.

A folder's own config (with its hooks), extensions, skills, commands, agents, workflows and MCP
servers load only once the user trusts it. The app asks before the runtime starts, so a "yes"
loads them in this very session and a "no" loads nothing of them; either answer is remembered
(``roder trust`` / ``roder untrust`` / ``/trust`` change it later).
"""

from __future__ import annotations

from rich.text import Text
from roder_ext_tui.segments import home_relative
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

TRUST_TEXT = """\
{folder} brings its own:
{items}

Trusted, they load: its config and hooks can run commands, its extensions run as code, its MCP \
servers start. Not trusted, Roder works here without them (`/trust` later changes that).\
"""


class TrustPromptScreen(ModalScreen[str]):
    """Dismisses with ``"trust"``, ``"untrust"`` or ``"quit"``.

    Like the first-run screen it is the whole screen: the text scrolls in the middle and the keys
    stay docked at the bottom, on screen at every size down to 40x20."""

    BINDINGS = [
        Binding("y,enter", "choose('trust')", "Trust"),
        Binding("n", "choose('untrust')", "Do not trust"),
        Binding("q,escape", "choose('quit')", "Quit"),
    ]
    DEFAULT_CSS = """
    TrustPromptScreen { align: center middle; background: $background; }
    TrustPromptScreen > Vertical {
        width: 100%; max-width: 84; height: auto; max-height: 100%;
        background: $surface; border: round $warning; padding: 0 1;
    }
    TrustPromptScreen VerticalScroll { height: auto; max-height: 1fr; }
    TrustPromptScreen #trust-keys { dock: bottom; height: auto; margin-top: 1; }
    """

    def __init__(self, folder: str, items: list[str]) -> None:
        super().__init__()
        self.folder = folder
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Trust this folder?"
            yield Static(self._keys(), id="trust-keys")
            with VerticalScroll():
                listed = "\n".join(f"  {item}" for item in self.items)
                yield Static(TRUST_TEXT.format(folder=home_relative(self.folder), items=listed), markup=False)

    @staticmethod
    def _keys() -> Text:
        keys = Text()
        for key, label in (("y", "trust: load them"), ("n", "do not trust"), ("q", "quit")):
            if keys:
                keys.append("\n")
            keys.append(f" {key} ", style="bold reverse")
            keys.append(f" {label}")
        return keys

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
