"""Trust this folder? Asked once, on the first open of a folder that brings its own items.

A folder's own config (with its hooks), extensions, skills, commands, agents, workflows and MCP
servers load only once the user trusts it. The app asks before the runtime starts, so a "yes"
loads them in this very session and a "no" loads nothing of them; either answer is remembered
(``roder trust`` / ``roder untrust`` / ``/trust`` change it later).
"""

from __future__ import annotations

from roder_ext_tui.segments import home_relative
from textual.binding import Binding

from roder_tui.screens.whole_screen import WholeScreenQuestion

TRUST_TEXT = """\
{folder} brings its own:
{items}

Trusted, they load: its config and hooks can run commands, its extensions run as code, its MCP \
servers start. Not trusted, Roder works here without them (`/trust` later changes that).\
"""


class TrustPromptScreen(WholeScreenQuestion):
    """Dismisses with ``"trust"``, ``"untrust"`` or ``"quit"``."""

    BINDINGS = [
        Binding("y,enter", "choose('trust')", "Trust"),
        Binding("n", "choose('untrust')", "Do not trust"),
        Binding("q,escape", "choose('quit')", "Quit"),
    ]
    TITLE_TEXT = "Trust this folder?"
    BORDER_CLASS = "-warning"
    KEYS = (("y", "trust: load them"), ("n", "do not trust"), ("q", "quit"))
    KEYS_ID = "trust-keys"

    def __init__(self, folder: str, items: list[str]) -> None:
        super().__init__()
        self.folder = folder
        self.items = items

    def body(self) -> str:
        listed = "\n".join(f"  {item}" for item in self.items)
        return TRUST_TEXT.format(folder=home_relative(self.folder), items=listed)
