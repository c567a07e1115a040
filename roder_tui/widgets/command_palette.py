"""The command palette (ctrl+p): a search line over every installed ``PaletteSource``'s rows.

A panel on the main screen's overlay layer (``widgets/overlay.py``), mounted once after the first
frame: opening it shows the ready panel with the rows it already has and asks for fresh ones in
the background. (Textual's own palette composes, styles and mounts a new screen, starts its
providers and gathers their hits on every open, and shows nothing until the last hit arrived:
0.6-1.2 s on a loaded machine.)

One widget draws it all (``render_lines``): the search line with its cursor, a rule, the rows
(each a title and a dim help line, wrapped to the width) and a scroll thumb. Built of Textual's
Input and OptionList it was four widgets to style and render on each open, and the search box
took the focus (a restyle of it and of the prompt). Focus stays where it was: the main screen
hands the keys to the open palette. Each row's height is measured once per width, its lines
drawn when shown; typing redraws the search line, and the rows only when the hits change.

The panel knows nothing of the app: it gets the rows from ``load_rows`` and hands the chosen row
to ``run``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.fuzzy import Matcher
from textual.geometry import Offset, Region, Size
from textual.strip import Strip
from textual.style import Style

from roder_tui.widgets.overlay import OverlayPanel

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand

PLACEHOLDER = "Search for commands…"
NO_MATCHES = "No matches found"
#: How much a match in the title counts over one in the help text.
TITLE_WEIGHT = 1.1
#: The matched letters of a title.
MATCH_STYLE = Style(bold=True, underline=True)
#: Content rows above the list: the search line and the rule under it.
HEAD_ROWS = 2
#: Columns of a list row besides its text: a blank either side, then the scroll thumb's column.
ROW_PAD_LEFT, ROW_PAD_RIGHT, THUMB = 1, 1, 1
#: The screen's rows above the panel (the top of the chat stays visible), and the share of the
#: screen's height it ends within (clear of the prompt).
TOP_MARGIN, MAX_SHARE = 3, 0.75
#: The panel's border and padding: rows, columns.
FRAME_ROWS, FRAME_COLUMNS = 2, 4
#: A row's help line: dim over the row's colours (the highlighted row's too).
HELP_STYLE = Style(dim=True)
#: A word and the blanks before it (ctrl+w deletes it).
_WORD_BACK = re.compile(r"\S*\s*$")


class CommandPalette(OverlayPanel):
    BINDINGS = [
        Binding("down", "move(1)", show=False),
        Binding("up", "move(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("enter", "choose", show=False),
        Binding("tab", "stay", show=False),  # the palette keeps the keys: tab moves nothing
    ]
    COMPONENT_CLASSES = {
        "command-palette--cursor",
        "command-palette--placeholder",
        "command-palette--rule",
        "command-palette--highlighted",
        "command-palette--disabled",
    }
    DEFAULT_CSS = """
    CommandPalette {
        margin-top: 3; width: 1fr; height: 6;
        padding: 0 1;
        background: $surface; &:dark { background: $panel-darken-1; }
        border: round $primary;
        & > .command-palette--cursor {
            background: $input-cursor-background; color: $input-cursor-foreground; text-style: $input-cursor-text-style;
        }
        & > .command-palette--placeholder { color: $text-disabled; }
        & > .command-palette--rule { color: $foreground 25%; }
        & > .command-palette--highlighted {
            color: $block-cursor-blurred-foreground; background: $block-cursor-blurred-background; text-style: bold;
        }
        & > .command-palette--disabled { color: $text-disabled; }
    }
    """

    def __init__(
        self,
        load_rows: Callable[[], Awaitable[list[PaletteCommand]]],
        run: Callable[[PaletteCommand], object],
    ) -> None:
        super().__init__(id="command-palette")
        self._load_rows = load_rows
        self._run = run
        #: Every source's rows, as last loaded.
        self.rows: list[PaletteCommand] = []
        #: The rows listed for the current search, in the list's order, and their places in ``rows``.
        self.shown: list[PaletteCommand] = []
        self._shown_at: list[int] = []
        #: The search as typed, and the cursor's place in it (characters).
        self.search = ""
        self.cursor_at = 0
        #: The highlighted row of ``shown`` (None when nothing is listed), and the first row drawn.
        self.highlighted: int | None = None
        self.top = 0
        self._matcher: Matcher | None = None
        #: Per text width: each row's height and help lines, made when the row is first drawn.
        self._row_lines: dict[int, dict[int, tuple[int, list[Strip], list[Strip]]]] = {}
        #: The rule and the list's lines as last drawn, and what they were drawn for.
        self._list_drawn: list[Strip] = []
        self._drawn: tuple[object, ...] = ()
        self._rows_version = 0

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Ask the sources for fresh rows; the list follows when they differ from the shown ones."""
        self.run_worker(self._reload(), group="palette-rows", exclusive=True, exit_on_error=False)

    async def _reload(self) -> None:
        rows = await self._load_rows()
        if rows != self.rows:
            self.rows = rows
            self._rows_version += 1
            self._row_lines.clear()
            self._list()
            if self.is_mounted:
                self.prepare(self.screen.size)

    # -- opening, placing, measuring

    def place(self, size: Size) -> None:
        """As wide as the screen, below its top rows, as tall as the rows need, ending within the
        top 3/4 of the screen."""
        self._fit(size)

    def prepare(self, size: Size) -> None:
        """Draw the panel's first view for a screen of ``size`` ahead of an open (while the app
        is idle: once built, and when the rows change while it is closed), so an open only shows
        it: measuring and drawing the rows was about a third of the first open."""
        if self.display or not size:
            return
        self.search, self.cursor_at = "", 0
        self._list()
        self._fit(size)
        self.prerender(size)

    def placed_size(self, screen: Size) -> Size:
        return Size(screen.width, int(self.styles.height.value) if self.styles.height else 0)

    def opened(self) -> None:
        """Each open starts from an empty search over the rows at hand; fresh rows are asked for
        once the palette is drawn, so the sources never delay its first frame."""
        self.search, self.cursor_at = "", 0
        self._list()
        self.call_after_refresh(self.reload)

    @staticmethod
    def _text_width(content_width: int) -> int:
        """The columns of a row's text in a panel of ``content_width`` (inside border and padding)."""
        return max(1, content_width - ROW_PAD_LEFT - ROW_PAD_RIGHT - THUMB)

    def _list_height(self, size: Size) -> int:
        """Content rows for the list on a screen of ``size`` (below the search line and the rule)."""
        return max(1, int(size.height * MAX_SHARE) - TOP_MARGIN - FRAME_ROWS - HEAD_ROWS)

    def _fit(self, size: Size) -> None:
        """The panel's height for the rows listed: no taller than they need, nor than the screen allows."""
        room = self._list_height(size)
        width = self._text_width(size.width - FRAME_COLUMNS)
        needed = 0
        for index in self._shown_at:
            needed += self._row(index, width)[0]
            if needed >= room:
                break
        self.styles.height = FRAME_ROWS + HEAD_ROWS + max(1, min(room, needed))

    def _row(self, index: int, width: int) -> tuple[int, list[Strip], list[Strip]]:
        """A row at ``width`` columns: its height, its title's lines (unmarked: a search marks the
        matched letters on its own) and its help's."""
        made = self._row_lines.setdefault(width, {})
        if (known := made.get(index)) is not None:
            return known
        command = self.rows[index]
        title_lines = [_strip(line) for line in Content(command.title).wrap(width)] or [Strip([])]
        help_lines = [_strip(line, HELP_STYLE) for line in Content(command.help).wrap(width)] if command.help else []
        made[index] = (len(title_lines) + len(help_lines), title_lines, help_lines)
        return made[index]

    # -- the search

    def _list(self) -> None:
        """The rows matching the search (all of them for an empty one), best first; the
        highlight on the first."""
        search = self.search.strip()
        if not search:
            self._matcher = None
            self._shown_at = list(range(len(self.rows)))
        else:
            matcher = self._matcher = Matcher(search, match_style=MATCH_STYLE)
            scored: list[tuple[float, int]] = []
            for index, command in enumerate(self.rows):
                score = max(matcher.match(f"{command.title} {command.help}"), matcher.match(command.title) * TITLE_WEIGHT)
                if score > 0:
                    scored.append((score, -index))
            scored.sort(reverse=True)
            self._shown_at = [-index for _score, index in scored]
        self.shown = [self.rows[index] for index in self._shown_at]
        self.highlighted = 0 if self.shown else None
        self.top = 0
        if self.display:
            self._fit(self.screen.size)
            self.refresh()

    def _edit(self, query: str, cursor_at: int) -> None:
        """The search changed: the search line is redrawn, the list when its hits change."""
        changed = query.strip() != self.search.strip()
        self.search, self.cursor_at = query, max(0, min(len(query), cursor_at))
        if changed:
            self._list()
        else:
            self.refresh(Region(0, 0, self.size.width, 1))  # the search line (content coordinates)
        self.show_cursor()

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        return character is not None and character.isprintable()

    async def _on_key(self, event: events.Key) -> None:
        """The search line's editing keys (the list's are bindings: up, down, pages, enter)."""
        query, at = self.search, self.cursor_at
        edits: dict[str, Callable[[], tuple[str, int]]] = {
            "backspace": lambda: (query[: at - 1] + query[at:], at - 1) if at else (query, at),
            "delete": lambda: (query[:at] + query[at + 1 :], at),
            "ctrl+d": lambda: (query[:at] + query[at + 1 :], at),
            "left": lambda: (query, at - 1),
            "right": lambda: (query, at + 1),
            "home": lambda: (query, 0),
            "ctrl+a": lambda: (query, 0),
            "end": lambda: (query, len(query)),
            "ctrl+e": lambda: (query, len(query)),
            "ctrl+u": lambda: (query[at:], 0),
            "ctrl+k": lambda: (query[:at], at),
            "ctrl+w": lambda: (_WORD_BACK.sub("", query[:at]) + query[at:], len(_WORD_BACK.sub("", query[:at]))),
        }
        if event.key in edits:
            self._edit(*edits[event.key]())
        elif event.is_printable and event.character is not None:
            self._edit(query[:at] + event.character + query[at:], at + 1)
        else:
            return
        event.stop()
        event.prevent_default()

    def _on_paste(self, event: events.Paste) -> None:
        """A paste goes into the search (its first line: the search is one line)."""
        event.stop()
        text = event.text.splitlines()[0] if event.text.strip() else ""
        self._edit(self.search[: self.cursor_at] + text + self.search[self.cursor_at :], self.cursor_at + len(text))

    # -- the list

    def action_move(self, step: int) -> None:
        if self.highlighted is None:
            return
        self._highlight(max(0, min(len(self.shown) - 1, self.highlighted + step)))

    def action_page(self, pages: int) -> None:
        self.action_move(pages * max(1, self.size.height - HEAD_ROWS) // 2)

    def action_stay(self) -> None:
        """Tab: the palette keeps the keys (focus does not leave a panel by tab)."""

    def action_choose(self) -> None:
        self._choose(self.highlighted)

    def _highlight(self, index: int) -> None:
        """Move the highlight, scrolling the list as little as keeps it in view; only the rows
        whose look changes are redrawn when nothing scrolls."""
        if index == self.highlighted:
            return
        before, self.highlighted = self.highlighted, index
        top = self.top
        if index < self.top:
            self.top = index
        else:
            width, room = self._text_width(self.size.width), self.size.height - HEAD_ROWS
            while self.top < index and sum(self._row(self._shown_at[i], width)[0] for i in range(self.top, index + 1)) > room:
                self.top += 1
        if self.top != top:
            self.refresh()
            return
        for y, row in enumerate(self.line_rows()):
            if row is not None and row in (before, index):
                self.refresh(Region(0, y, self.size.width, 1))

    def _choose(self, index: int | None) -> None:
        if index is None or not 0 <= index < len(self.shown):
            return
        command = self.shown[index]
        self.close()
        self._run(command)

    def on_click(self, event: events.Click) -> None:
        """A click on a row runs it (as enter on it would)."""
        event.stop()
        offset = event.get_content_offset(self)
        if offset is not None and 0 <= offset.y < len(rows := self.line_rows()):
            self._choose(rows[offset.y])

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self._scroll(1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self._scroll(-1)

    def _scroll(self, rows: int) -> None:
        top = max(0, min(max(0, len(self.shown) - 1), self.top + rows))
        if top != self.top:
            self.top = top
            self.refresh()

    # -- drawing

    def line_rows(self) -> list[int | None]:
        """The list row on each content line as drawn now (None: the search line, the rule, blanks)."""
        width, height = self.size
        text_width = self._text_width(width)
        rows: list[int | None] = [None] * HEAD_ROWS
        for shown_index in range(self.top, len(self.shown)):
            if len(rows) >= height:
                break
            rows += [shown_index] * self._row(self._shown_at[shown_index], text_width)[0]
        return rows[:height]

    def cursor(self) -> Offset | None:
        """The search line's cursor, where the terminal's cursor goes too (screen readers)."""
        x, y = self.content_region.offset
        return Offset(x + self.cursor_at - self._first_shown(self.content_region.width), y)

    def _first_shown(self, width: int) -> int:
        """The first character of the search shown: a search longer than the line scrolls."""
        return max(0, self.cursor_at - (width - 1))

    def view(self) -> Hashable:
        return (self.search, self.cursor_at, self.top, self.highlighted, self._matcher, tuple(self._shown_at), self._rows_version)

    def content_lines(self, width: int, height: int) -> list[Strip]:
        """The content lines are made once per pass (the styles looked up once, not per row)."""
        base = self.rich_style
        return [self._search_line(width, base), *self._draw_list(width, height, base)]

    def _draw_list(self, width: int, height: int, base: RichStyle) -> list[Strip]:
        """The rule and the list's lines for a content area of ``width`` x ``height``: drawn again
        only when what they show changed (typing that lists the same rows redraws only the
        search line)."""
        drawn = (width, height, base, self.top, self.highlighted, self._matcher, self._shown_at, self._rows_version)
        if drawn != self._drawn:
            self._drawn, self._list_drawn = drawn, [self._rule(width), *self._list_lines(width, height - HEAD_ROWS, base)]
        return self._list_drawn

    def _search_line(self, width: int, base: RichStyle) -> Strip:
        cursor = self.get_component_rich_style("command-palette--cursor")
        if not self.search:
            placeholder = base + self.get_component_rich_style("command-palette--placeholder")
            segments = [Segment(PLACEHOLDER[0], base + cursor), Segment(PLACEHOLDER[1:], placeholder)]
            return Strip(segments).crop_extend(0, width, base)
        first = self._first_shown(width)
        shown = self.search[first : first + width]
        at = self.cursor_at - first
        segments = [Segment(shown[:at], base), Segment(shown[at : at + 1] or " ", base + cursor), Segment(shown[at + 1 :], base)]
        return Strip(segments).crop_extend(0, width, base)

    def _rule(self, width: int) -> Strip:
        return Strip([Segment("─" * width, self.rich_style + self.get_component_rich_style("command-palette--rule"))], width)

    def _list_lines(self, width: int, height: int, base: RichStyle) -> list[Strip]:
        """The list's lines from ``top``, each row padded, the highlighted one marked, and the
        thumb's column; also which row each line belongs to (for clicks and redraws)."""
        drawn_rows: list[int] = []
        text_width = self._text_width(width)
        pad_left, pad_right = Strip.blank(ROW_PAD_LEFT, base), Strip.blank(ROW_PAD_RIGHT, base)
        if not self.shown:
            text = NO_MATCHES if self.rows else ""
            disabled = base + self.get_component_rich_style("command-palette--disabled")
            line = Strip([Segment(text[:text_width], disabled)]).crop_extend(0, text_width, base)
            lines = [Strip.join([pad_left, line, pad_right])]
        else:
            lines = []
            highlight = base + self.get_component_rich_style("command-palette--highlighted")
            for shown_index in range(self.top, len(self.shown)):
                if len(lines) >= height:
                    break
                index = self._shown_at[shown_index]
                _height, title_lines, help_lines = self._row(index, text_width)
                row_style = highlight if shown_index == self.highlighted else base
                if self._matcher is not None:
                    marked = self._matcher.highlight(self.rows[index].title)
                    title_lines = [_strip(line) for line in marked.wrap(text_width)] or [Strip([])]
                row_lines = title_lines + help_lines
                for line in row_lines:
                    filled = Strip.join([pad_left, line.crop_extend(0, text_width, None), pad_right])
                    lines.append(filled.apply_style(row_style))
                    drawn_rows.append(shown_index)
        del lines[height:]
        blank = Strip.blank(ROW_PAD_LEFT + text_width + ROW_PAD_RIGHT, base)
        lines += [blank] * (height - len(lines))
        thumb = self._thumb(height, len(set(drawn_rows[:height])), base)
        return [Strip.join([line, thumb[y]]) for y, line in enumerate(lines)]

    def _thumb(self, height: int, visible: int, base: RichStyle) -> list[Strip]:
        """The scroll thumb's column: where the shown rows are in the list (by rows), the track
        elsewhere; blank when every row fits."""
        total = len(self.shown)
        if visible >= total:
            return [Strip.blank(THUMB, base)] * height
        size = max(1, height * visible // total)
        start = min(height - size, (height - size) * self.top // max(1, total - visible))
        track = self.background_colors[1] + self.styles.scrollbar_background
        track_cell = Strip([Segment(" ", RichStyle(bgcolor=track.rich_color))], THUMB)
        thumb_cell = Strip([Segment(" ", RichStyle(bgcolor=(track + self.styles.scrollbar_color).rich_color))], THUMB)
        return [thumb_cell if start <= y < start + size else track_cell for y in range(height)]


def _strip(line: Content, style: Style | None = None) -> Strip:
    """A line of content as a strip, its own styles over ``style`` (the row's colours come later)."""
    return Strip(line.render_segments(style or Style.null()), line.cell_length)
