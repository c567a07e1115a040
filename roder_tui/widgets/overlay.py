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
panel is open.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.geometry import Offset, Size
from textual.widget import Widget


class OverlayPanel(Widget):
    """A hidden panel on the main screen's ``overlay`` layer that ``open`` shows and ``close`` hides.

    One widget draws the whole panel (``render_lines``): Textual renders every widget in an
    updated region, so a panel built of several widgets drew its rows several times."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]
    DEFAULT_CSS = "OverlayPanel { layer: overlay; display: none; }"
    can_focus = False

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
        self.call_after_refresh(self.show_cursor)

    def close(self) -> None:
        """Hide the panel: the keys go to the focused widget again, and so does the cursor."""
        if not self.display:
            return
        self.display = False
        focused = self.screen.focused
        at = getattr(focused, "cursor_screen_offset", None)  # Input's and TextArea's
        if isinstance(at, Offset):
            self.app.cursor_position = at

    def show_cursor(self) -> None:
        """Put the terminal's cursor where the panel says (after a layout: it needs the region)."""
        if self.display and (at := self.cursor()) is not None:
            self.app.cursor_position = at

    def action_close(self) -> None:
        self.close()

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        """Whether the panel takes ``key`` as typed text (so no binding above it runs for it)."""
        return False

    def on_resize(self, event: events.Resize) -> None:
        self.show_cursor()
