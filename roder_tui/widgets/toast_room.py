"""Where toasts go while something is open over the screen (a dialog, the palette, help): in the
rows it leaves free, never over it.

Textual draws toasts on a layer above everything, at the top right here (the app's CSS), so a
notice that arrived while a dialog was open covered the dialog's rows: a retry notice over the
approval's diff, a sign-in result over the palette's list.
"""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.geometry import Region
from textual.screen import Screen
from textual.widgets._toast import ToastRack

#: The rules ``keep_toasts_clear`` sets on the toast rack, over the app's CSS.
RULES = ("dock", "align_vertical", "max_height", "margin")
#: The rows one toast needs (its line and padding): with fewer free, toasts show over what is open.
TOAST_ROWS = 3


def keep_toasts_clear(screen: Screen[object], covered: Region | None) -> None:
    """Put ``screen``'s toasts in the taller band of rows ``covered`` leaves free, above or below
    it (above the status bar's row), no taller than that band. ``None``, or no band a toast fits
    in (help, a dialog as tall as the screen): the toasts go where the app's CSS puts them, over
    it, since a toast hidden until it closes expires unseen when it stays open past its timeout."""
    try:
        rack = screen.get_child_by_type(ToastRack)
    except NoMatches:
        return
    styles = rack.styles
    above, below = (covered.y, max(0, screen.size.height - 1 - covered.bottom)) if covered else (0, 0)
    if covered is None or max(above, below) < TOAST_ROWS:
        if any([styles.clear_rule(rule) for rule in RULES]):
            rack.refresh(layout=True)
        return
    if below >= above:
        styles.dock, styles.align_vertical, styles.margin = "bottom", "bottom", (0, 0, 1, 0)
    else:
        styles.dock, styles.align_vertical, styles.margin = "top", "top", (0, 0, 0, 0)
    styles.max_height = max(above, below)
