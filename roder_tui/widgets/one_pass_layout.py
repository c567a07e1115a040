"""Transcript widgets that a layout places once, not twice.

When a layout gives a widget a new size, Textual records the widget's new virtual size through a
reactive that asks for another layout and a repaint of the widget. For the transcript and its
entries that second pass finds nothing to move (the first already arranged their children at the
new size and, anchored, scrolled to the end) but draws their rows again: while an answer streamed,
every growth cost two full frames of the transcript region (bench/README.md, "Rows 2 and 8").
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


class OnePassLayout(Widget):
    """Records a new size without asking for a second layout; a scrollbar that appears or goes
    still asks for its own."""

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        return super()._size_updated(size, virtual_size, container_size, layout=False)
