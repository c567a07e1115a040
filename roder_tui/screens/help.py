"""Help: every key of the app, grouped by where it works (from ``roder_tui.keymap``)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from roder_tui.keymap import SCOPE_TITLES, display, keys_by_scope
from roder_tui.screens.tinted import TintedModalScreen


def help_table(remapped: Mapping[str, str] | None = None) -> Group:
    """One section per place a key works: a title line, then key / description rows.
    ``remapped`` is ``[keys]`` of config.toml (binding id -> keys): those keys are shown."""
    remapped = remapped or {}
    sections: list[Text | Table] = []
    for scope, keys in keys_by_scope().items():
        sections.append(Text(SCOPE_TITLES[scope], style="bold underline"))
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for key in keys:
            shown = remapped.get(key.binding_id or "", key.keys) if key.binding_id else key.keys
            table.add_row(display(shown), key.description)
        sections.extend([table, Text("")])
    sections.append(Text("Palette (ctrl+p)", style="bold underline"))
    sections.append(
        Text("threads (switch, fork, new), models and providers, modes, themes, slash commands, compaction, export, copy")
    )
    return Group(*sections)


class HelpScreen(TintedModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,f1,question_mark", "dismiss_help", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 100%; max-width: 100; height: 100%; max-height: 40;
        background: $surface; border: round $primary; padding: 0 1; scrollbar-size-vertical: 1;
    }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "Keys · esc to close"
            yield Static(help_table(getattr(self.app, "_keymap", {})))

    def on_screen_resume(self) -> None:
        """Shown again (the app builds it once and reuses it): from the top, focused, and laid out
        anew (a screen built while hidden is not laid out again when pushed at the same size)."""
        scroll = self.query_one(VerticalScroll)
        scroll.scroll_home(animate=False, immediate=True)
        scroll.focus()
        self.refresh(layout=True)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
