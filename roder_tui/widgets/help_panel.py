"""Help (F1): every key of the app, grouped by where it works (from ``roder_tui.keymap``).

A panel on the main screen's overlay layer (``widgets/overlay.py``), mounted once after the first
frame and shown on each open, centred at most 100x40.

One widget draws the whole panel: the key table's lines (laid out once per width), its own
scroll position and a one-column scroll thumb. Showing it repaints its region, and Textual
renders every widget in that region, the ones it covers too: as a container holding a scroll
view holding the table, help was three widgets drawing the same rows plus Textual's scroll bar
(about half of what opening it cost; bench/README.md, "Modal screens").
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.strip import Strip

from roder_tui.keymap import SCOPE_TITLES, display, keys_by_scope
from roder_tui.widgets.overlay import OverlayPanel

#: The largest the panel gets; on a smaller screen it fills it.
MAX_WIDTH, MAX_HEIGHT = 100, 40
#: Columns right of the table: a blank one, then the scroll thumb's.
RIGHT_COLUMNS = 2


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


class HelpPanel(OverlayPanel):
    BINDINGS = [
        Binding("escape,q,f1,question_mark", "close", "Close", show=False),
        Binding("down", "scroll_rows(1)", show=False),
        Binding("up", "scroll_rows(-1)", show=False),
        Binding("pagedown,space", "scroll_pages(1)", show=False),
        Binding("pageup", "scroll_pages(-1)", show=False),
        Binding("home", "scroll_rows(-1_000_000)", show=False),
        Binding("end", "scroll_rows(1_000_000)", show=False),
    ]
    DEFAULT_CSS = """
    HelpPanel { background: $surface; border: round $primary; padding: 0 0 0 1; }
    """

    def __init__(self, remapped: Mapping[str, str] | None = None) -> None:
        super().__init__(id="help")
        self.table = help_table(remapped)
        self.border_title = "Keys · esc to close"
        #: The first table line shown.
        self.top = 0
        self._laid_out: tuple[int, Style, list[Strip]] | None = None

    def lines(self, width: int, style: Style | None = None) -> list[Strip]:
        """The table's lines at ``width`` columns, laid out once per width and style: Rich's table
        layout (measuring each column, wrapping each description) is too slow for every open."""
        style = self.rich_style if style is None else style
        if self._laid_out is None or self._laid_out[:2] != (width, style):
            console = self.app.console
            rendered = console.render_lines(self.table, console.options.update_width(width), style=style)
            self._laid_out = (width, style, [Strip(line, width) for line in rendered])
        return self._laid_out[2]

    def prepare(self, size: Size) -> None:
        """Lay the table out and draw the panel for a screen of ``size`` ahead of an open (while
        the app is idle), so the first open only shows it."""
        if self.display:
            return
        self.place(size)
        width = min(size.width, MAX_WIDTH) - self.styles.gutter.width - RIGHT_COLUMNS
        if width > 0:
            self.lines(width)
            self.top = 0
            self.prerender(size)

    def placed_size(self, screen: Size) -> Size:
        """At most 100x40, and above the status bar's row (``place`` says why)."""
        return Size(min(screen.width, MAX_WIDTH), min(screen.height - 1, MAX_HEIGHT))

    def place(self, size: Size) -> None:
        """Centred above the status bar's row: the margins place the panel (a layer has no
        alignment of its own). Reaching the last row would make the screen, which counts the
        docked status bar below its layers, a row taller than the terminal: a scrollbar and a
        redraw of everything."""
        above = size.height - 1
        width, height = self.placed_size(size)
        self.styles.width, self.styles.height = width, height
        self.styles.margin = ((above - height) // 2, 0, 0, (size.width - width) // 2)

    def opened(self) -> None:
        """Each open starts at the top."""
        self.top = 0

    def view(self) -> Hashable:
        return self.top

    def content_lines(self, width: int, height: int) -> list[Strip]:
        """The rows are made once per pass (the widget's style, the table's lines, the thumb's
        colours looked up once, not per row as ``render_line`` would)."""
        style = self.rich_style
        text_width = max(0, width - RIGHT_COLUMNS)
        lines = self.lines(text_width, style)
        blank, gap = Strip.blank(text_width, style), Strip.blank(RIGHT_COLUMNS - 1, style)
        thumb = self._thumb(height, len(lines), style)
        return [
            Strip.join([lines[row] if row < len(lines) else blank, gap, thumb[y]])
            for y, row in enumerate(range(self.top, self.top + height))
        ]

    def _thumb(self, height: int, total: int, style: Style) -> list[Strip]:
        """The scroll thumb's column, row by row: the thumb where the shown rows are within the
        table, the track elsewhere; blank when the whole table fits."""
        if total <= height:
            return [Strip.blank(1, style)] * height
        size = max(1, height * height // total)
        start = (height - size) * self.top // (total - height)
        track = self.background_colors[1] + self.styles.scrollbar_background
        track_cell = Strip([Segment(" ", Style(bgcolor=track.rich_color))], 1)
        thumb_cell = Strip([Segment(" ", Style(bgcolor=(track + self.styles.scrollbar_color).rich_color))], 1)
        return [thumb_cell if start <= y < start + size else track_cell for y in range(height)]

    def _show_from(self, top: int) -> None:
        width, height = self.size
        last = max(0, len(self.lines(max(0, width - RIGHT_COLUMNS))) - height)
        top = max(0, min(last, top))
        if top != self.top:
            self.top = top
            self.refresh()

    def action_scroll_rows(self, rows: int) -> None:
        self._show_from(self.top + rows)

    def action_scroll_pages(self, pages: int) -> None:
        self._show_from(self.top + pages * max(1, self.size.height - 1))

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self._show_from(self.top + 3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self._show_from(self.top - 3)
