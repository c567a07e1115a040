"""Panels drawn over the main screen on a layer of their own: the command palette and help.

Why not a pushed screen: Textual draws a pushed screen whole, every time (the screen below
composed again through the modal's tint, the new screen's styles applied and laid out), which
took 7-16x a typed character's echo (bench/README.md, "Modal screens"). A panel is mounted once
on the main screen's ``overlay`` layer, hidden, and shown by a partial update of its own region.

Why focus does not move into it: a focus change makes Textual restyle the widget losing focus
and the one gaining it with all their component classes (the prompt, a search box), about a
quarter of what an open cost. So focus stays where it was (the prompt, usually) and the main
screen hands the keys to the open panel instead (``MainScreen.key_owner``, the one place that
decides where a key goes). A panel acts as a modal while it is open: every key and paste goes to
it, and what it does not use goes to the app's own keys (``ctrl+q``, ``shift+tab``), never to the
focused widget; esc closes it. A click outside it, or focus moving (the app focusing another
widget), closes it too, so a panel never sits open while the keys go somewhere else. At most one
panel is open, and toasts keep clear of it (``keep_toasts_clear``).
"""

from __future__ import annotations

from collections.abc import Hashable

from textual import events
from textual.binding import Binding
from textual.geometry import Offset, Region, Size
from textual.strip import Strip
from textual.widget import Widget

from roder_tui.widgets.toast_room import keep_toasts_clear

#: Renders of a panel kept for showing it again (a few crops: the whole panel, a line).
KEPT_RENDERS = 4


class OverlayPanel(Widget):
    """A hidden panel on the main screen's ``overlay`` layer that ``open`` shows and ``close`` hides.

    One widget draws the whole panel (``render_lines``): Textual renders every widget in an
    updated region, so a panel built of several widgets drew its rows several times."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]
    DEFAULT_CSS = "OverlayPanel { layer: overlay; display: none; }"
    can_focus = False

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        #: The content rows of the render under way, drawn by ``render_line``.
        self._content: list[Strip] = []
        #: Finished renders (border, background, filters applied) by what they were made from.
        self._renders: dict[Hashable, list[Strip]] = {}

    def view(self) -> Hashable:
        """What the panel's content rows show besides its size and styles (a scroll position, a
        search): two renders with equal views, sizes and styles are the same."""
        return None

    def content_lines(self, width: int, height: int) -> list[Strip]:
        """The panel's content rows (inside its border and padding) for a render."""
        return []

    def render_lines(self, crop: Region) -> list[Strip]:
        """The panel as drawn the last time it showed the same view at the same size and styles,
        or drawn now. Showing a panel makes Textual draw it whole again (its border, background
        and line filters, row by row: half of what an open cost), though it mostly shows what it
        showed when it closed, or what ``prerender`` drew while the app was idle."""
        key = self._render_key(crop, self.region.size)
        if (rendered := self._renders.get(key)) is None:
            self._content = self.content_lines(*self.size)
            rendered = self._keep(key, super().render_lines(crop))
        return rendered

    def placed_size(self, screen: Size) -> Size:
        """The panel's size on a screen of ``screen`` once ``place`` placed it (border included)."""
        return Size(0, 0)

    def prerender(self, screen: Size) -> None:
        """Draw the panel as its next open on a screen of ``screen`` will show it, while it is
        hidden (the app idle): as Textual would (``StylesCache.render_widget``, which needs the
        region a shown widget has), so that open only shows it."""
        size = self.placed_size(screen)
        if self.display or not size:
            return
        crop = size.region
        key = self._render_key(crop, size)
        if key in self._renders:
            return
        gutter = self.styles.gutter
        content = Size(max(0, size.width - gutter.width), max(0, size.height - gutter.height))
        self._content = self.content_lines(*content)
        base_background, background = self.background_colors
        title = self._border_title
        strips = self._styles_cache.render(
            self.styles,
            size,
            base_background,
            background,
            self.render_line,
            self.get_line_filters(),
            None if title is None else (title, *self._get_title_style_information(base_background)),
            None,
            content_size=content,
            padding=self.styles.padding,
            crop=crop,
            opacity=self.opacity,
            ansi_theme=self.app.ansi_theme,
            native_ansi=self.app.native_ansi_color,
        )
        self._styles_cache.clear()  # drawn for a size the hidden panel does not have
        self._keep(key, strips)

    def _render_key(self, crop: Region, size: Size) -> Hashable:
        """Everything a render of ``crop`` of the panel at ``size`` depends on."""
        filters = tuple((id(line_filter), line_filter.enabled) for line_filter in self.get_line_filters())
        styles = (self.rich_style, self.background_colors, self.styles.border_top, self._border_title, self.app.theme)
        return (crop, size, styles, filters, self.view())

    def _keep(self, key: Hashable, rendered: list[Strip]) -> list[Strip]:
        if len(self._renders) >= KEPT_RENDERS:
            del self._renders[next(iter(self._renders))]
        self._renders[key] = rendered
        return rendered

    def render_line(self, y: int) -> Strip:
        return self._content[y] if y < len(self._content) else Strip.blank(self.size.width, self.rich_style)

    @property
    def is_open(self) -> bool:
        return self.display

    def opened(self) -> None:
        """Called on each open, before the panel is drawn: start from a clean state."""

    def place(self, size: Size) -> None:
        """Position the panel for a screen of ``size`` (each open, and on resize while open)."""

    def cursor(self) -> Offset | None:
        """Where the terminal's cursor goes while the panel is open (screen coordinates), for
        screen readers and input methods that follow it; None leaves it where it is."""
        return None

    def open(self) -> None:
        """Show the panel; it takes the keys until it closes (another open panel closes first)."""
        if self.display:
            return
        for other in self.screen.children:
            if isinstance(other, OverlayPanel) and other is not self:
                other.close()
        self.place(self.screen.size)
        self.display = True
        self.opened()
        self.keep_toasts_clear()
        self.call_after_refresh(self.show_cursor)

    def close(self) -> None:
        """Hide the panel: the keys go to the focused widget again, and so does the cursor."""
        if not self.display:
            return
        self.display = False
        keep_toasts_clear(self.screen, None)
        focused = self.screen.focused
        at = getattr(focused, "cursor_screen_offset", None)  # Input's and TextArea's
        if isinstance(at, Offset):
            self.app.cursor_position = at

    def show_cursor(self) -> None:
        """Put the terminal's cursor where the panel says (after a layout: it needs the region)."""
        if self.display and (at := self.cursor()) is not None:
            self.app.cursor_position = at

    def keep_toasts_clear(self) -> None:
        """Toasts go in the rows the open panel leaves free (``toast_room``)."""
        if self.display:
            margin, size = self.styles.margin, self.placed_size(self.screen.size)
            keep_toasts_clear(self.screen, Region(margin.left, margin.top, size.width, size.height))

    def action_close(self) -> None:
        self.close()

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        """Whether the panel takes ``key`` as typed text (so no binding above it runs for it)."""
        return False

    def on_resize(self, event: events.Resize) -> None:
        self.show_cursor()
        self.keep_toasts_clear()
