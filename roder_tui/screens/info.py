"""A scrollable text dialog for command output: /tools, /mcp, /skills, /agents, /help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class InfoScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "close", "Close")]
    DEFAULT_CSS = """
    InfoScreen { align: center middle; }
    InfoScreen > VerticalScroll {
        width: 100%; max-width: 100; height: auto; max-height: 100%;
        background: $surface; border: round $primary; padding: 0 1; scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = f"{self.title_text} · esc to close"
            yield Static(self.text, markup=False)

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
