"""Panels drawn over the main screen on a layer of their own: the command palette and help.

Why not a pushed screen: Textual draws a pushed screen whole, every time (the screen below
composed again through the modal's tint, the new screen's styles applied and laid out), which
took 7-16x a typed character's echo (bench/README.md, "Modal screens"). A panel is mounted once
on the main screen's ``overlay`` layer, hidden, and shown by a partial update of its own region.

A panel acts as a modal while it is open: focus moves into it and tab stays in it
(``trap_focus``); esc closes it and focus returns where it was. Focus leaving it any other way
(a click elsewhere, the app focusing the prompt) closes it too, so a panel never sits open while
the keys go somewhere else.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.widget import Widget


class OverlayPanel(Vertical):
    """A hidden panel on the main screen's ``overlay`` layer that ``open`` shows and ``close`` hides."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]
    DEFAULT_CSS = "OverlayPanel { layer: overlay; display: none; }"

    def __init__(self, *, id: str, fallback_focus: Callable[[], Widget | None] | None = None) -> None:
        super().__init__(id=id)
        #: Where focus goes on close when the widget it came from is gone or hidden.
        self._fallback_focus = fallback_focus
        self._return_to: Widget | None = None
        self.trap_focus()

    @property
    def is_open(self) -> bool:
        return self.display

    def focus_target(self) -> Widget:
        """The widget that has focus when the panel opens."""
        return self

    def opened(self) -> None:
        """Called on each open, before the panel is drawn: start from a clean state."""

    def place(self, size: Size) -> None:
        """Position the panel for a screen of ``size`` (each open, and on resize while open)."""

    def open(self) -> None:
        if not self.display:
            focused = self.screen.focused
            self._return_to = None if focused is None or self in focused.ancestors_with_self else focused
            self.place(self.screen.size)
            self.display = True
            self.opened()
        self.focus_target().focus()

    def close(self) -> None:
        """Hide the panel and give focus back to where it was when it opened."""
        if not self.display:
            return
        back, self._return_to = self._return_to, None
        self.display = False
        if back is None or not back.is_attached or not back.focusable:
            back = self._fallback_focus() if self._fallback_focus is not None else None
        if back is not None:
            back.focus()

    def action_close(self) -> None:
        self.close()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        """Focus moved out of the panel (a click elsewhere, the app focusing another widget):
        the panel closes and leaves focus where it went."""
        focused = self.screen.focused
        if self.display and (focused is None or self not in focused.ancestors_with_self):
            self._return_to = None
            self.display = False
