"""Help (F1): every key of the app, grouped by where it works (from ``roder_tui.keymap``).

A panel on the main screen's overlay layer (``widgets/overlay.py``), mounted once after the first
frame and shown on each open, centred at most 100x40."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from roder_tui.keymap import SCOPE_TITLES, display, keys_by_scope
from roder_tui.widgets.overlay import OverlayPanel

#: The largest the panel gets; on a smaller screen it fills it.
MAX_WIDTH, MAX_HEIGHT = 100, 40


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


class KeyTable(Widget):
    """The key table, laid out once per width and style and drawn from those lines on every
    open: Rich's table layout (measuring each column, wrapping each description) was a quarter of
    what showing help cost."""

    DEFAULT_CSS = "KeyTable { height: auto; }"

    def __init__(self, table: Group) -> None:
        super().__init__()
        self.table = table
        self._laid_out: tuple[int, Style, list[Strip]] | None = None

    def lines(self, width: int) -> list[Strip]:
        style = self.rich_style
        if self._laid_out is None or self._laid_out[:2] != (width, style):
            console = self.app.console
            rendered = console.render_lines(self.table, console.options.update_width(width), style=style)
            self._laid_out = (width, style, [Strip(line, width) for line in rendered])
        return self._laid_out[2]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self.lines(width)
        return lines[y] if y < len(lines) else Strip.blank(width, self.rich_style)


class HelpPanel(OverlayPanel):
    BINDINGS = [
        Binding("escape,q,f1,question_mark", "close", "Close", show=False),
    ]
    DEFAULT_CSS = """
    HelpPanel > VerticalScroll {
        height: 1fr; background: $surface; border: round $primary; padding: 0 1; scrollbar-size-vertical: 1;
    }
    """

    def __init__(
        self, remapped: Mapping[str, str] | None = None, *, fallback_focus: Callable[[], Widget | None] | None = None
    ) -> None:
        super().__init__(id="help", fallback_focus=fallback_focus)
        self._remapped = remapped

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "Keys · esc to close"
            yield KeyTable(help_table(self._remapped))

    def place(self, size: Size) -> None:
        """Centred above the status bar's row: the margins place the panel (a layer has no
        alignment of its own). Reaching the last row would make the screen, which counts the
        docked status bar below its layers, a row taller than the terminal: a scrollbar and a
        redraw of everything."""
        above = size.height - 1
        width, height = min(size.width, MAX_WIDTH), min(above, MAX_HEIGHT)
        self.styles.width, self.styles.height = width, height
        self.styles.margin = ((above - height) // 2, 0, 0, (size.width - width) // 2)

    def focus_target(self) -> Widget:
        return self.query_one(VerticalScroll)

    def opened(self) -> None:
        """Each open starts at the top."""
        self.query_one(VerticalScroll).scroll_home(animate=False, immediate=True)
