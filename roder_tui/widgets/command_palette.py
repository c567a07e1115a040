"""The command palette (ctrl+p): a search box over every installed ``PaletteSource``'s rows.

A panel on the main screen's overlay layer (``widgets/overlay.py``), mounted once after the first
frame: opening it shows the ready panel with the rows it already has and asks for fresh ones in
the background. (Textual's own palette composes, styles and mounts a new screen, starts its
providers and gathers their hits on every open, and shows nothing until the last hit arrived:
0.6-1.2 s on a loaded machine.)

The panel knows nothing of the app: it gets the rows from ``load_rows`` and hands the chosen row
to ``run``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.fuzzy import Matcher
from textual.style import Style
from textual.widget import Widget
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from roder_tui.widgets.overlay import OverlayPanel

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand

PLACEHOLDER = "Search for commands…"
#: How much a match in the title counts over one in the help text.
TITLE_WEIGHT = 1.1
#: The matched letters of a title.
MATCH_STYLE = Style(bold=True, underline=True)


class CommandPalette(OverlayPanel):
    BINDINGS = [
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
        Binding("pagedown", "move(10)", show=False, priority=True),
        Binding("pageup", "move(-10)", show=False, priority=True),
    ]
    DEFAULT_CSS = """
    CommandPalette {
        margin-top: 3; width: 1fr; height: auto; max-height: 75%;
        background: $surface; &:dark { background: $panel-darken-1; }
        border: round $primary;
    }
    CommandPalette Input { border: hkey black 50%; background: transparent; }
    CommandPalette OptionList { height: auto; max-height: 100%; border: none; background: transparent; }
    CommandPalette OptionList > .option-list--option-highlighted { text-style: bold; }
    """

    def __init__(
        self,
        load_rows: Callable[[], Awaitable[list[PaletteCommand]]],
        run: Callable[[PaletteCommand], object],
        *,
        fallback_focus: Callable[[], Widget | None] | None = None,
    ) -> None:
        super().__init__(id="command-palette", fallback_focus=fallback_focus)
        self._load_rows = load_rows
        self._run = run
        #: Every source's rows, as last loaded.
        self.rows: list[PaletteCommand] = []
        #: The rows listed for the current search, in the list's order.
        self.shown: list[PaletteCommand] = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder=PLACEHOLDER, select_on_focus=False, id="palette-query")
        yield OptionList(id="palette-rows")

    @property
    def query_input(self) -> Input:
        return self.query_one("#palette-query", Input)

    @property
    def row_list(self) -> OptionList:
        return self.query_one("#palette-rows", OptionList)

    def reload(self) -> None:
        """Ask the sources for fresh rows; the list follows when they differ from the shown ones."""
        self.run_worker(self._reload(), group="palette-rows", exclusive=True, exit_on_error=False)

    async def _reload(self) -> None:
        rows = await self._load_rows()
        if rows != self.rows:
            self.rows = rows
            self._list(self.query_input.value)

    def on_mount(self) -> None:
        self.reload()

    def focus_target(self) -> Widget:
        return self.query_input

    def opened(self) -> None:
        """Each open starts from an empty search over the rows at hand; fresh rows are asked for
        once the palette is drawn, so the sources never delay its first frame."""
        query = self.query_input
        if query.value:
            query.value = ""  # lists every row (Input.Changed)
        elif self.shown != self.rows:
            self._list("")
        elif self.shown:
            self.row_list.highlighted = 0
            self.row_list.scroll_home(animate=False, immediate=True)
        self.call_after_refresh(self.reload)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._list(event.value)

    def _list(self, search: str) -> None:
        """The rows matching ``search`` (all of them for an empty one), best first."""
        rows = self.row_list
        search = search.strip()
        if not search:
            self.shown = list(self.rows)
            options = [_option(Content(c.title), c.help) for c in self.shown]
        else:
            matcher = Matcher(search, match_style=MATCH_STYLE)
            scored: list[tuple[float, int, PaletteCommand]] = []
            for index, command in enumerate(self.rows):
                score = max(matcher.match(f"{command.title} {command.help}"), matcher.match(command.title) * TITLE_WEIGHT)
                if score > 0:
                    scored.append((score, -index, command))
            scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
            self.shown = [command for _score, _index, command in scored]
            options = [_option(matcher.highlight(c.title), c.help) for c in self.shown]
        rows.set_options(options if options or not self.rows else [Option("No matches found", disabled=True)])
        rows.highlighted = 0 if self.shown else None

    def action_move(self, step: int) -> None:
        if self.shown:
            current = self.row_list.highlighted or 0
            self.row_list.highlighted = max(0, min(len(self.shown) - 1, current + step))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._choose(self.row_list.highlighted)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._choose(event.option_index)

    def _choose(self, index: int | None) -> None:
        if index is None or not 0 <= index < len(self.shown):
            return
        command = self.shown[index]
        self.close()
        self._run(command)


def _option(title: Content, help_text: str) -> Option:
    """A row: the title, and under it the help in a dim line."""
    if not help_text:
        return Option(title)
    return Option(Content.assemble(title, "\n", Content.styled(help_text, "dim")))
