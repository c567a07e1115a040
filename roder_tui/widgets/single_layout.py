"""One layout pass per change for widgets in the streaming path.

After a layout, Textual hands each widget its new size (``Widget._size_updated``) and, by
default, sets the widget's ``virtual_size`` as a reactive that asks for *another* layout of the
screen. For a transcript growing line by line that doubled the work of every streamed update:
measured in the app over SSH, each coalesced flush was followed by two full layouts and two
compositions of the screen, 60-80 ms apart, the second one finding nothing to change. The sizes
it would recompute are the ones the first pass just computed; scroll bars are updated by
``_scroll_update`` either way (and ask for their own layout when one appears or disappears), and
anchoring to the end is done by the compositor during the first pass. So widgets with this
mixin take their new size without scheduling the second pass.

This leans on a private Textual method (``_size_updated``, stable through Textual 8): the
snapshot tests (tests/tui) and the streaming tests would show a widget drawn at a stale size.
"""

from __future__ import annotations

from textual.geometry import Size


class SingleLayout:
    """Mix in before the Textual widget class."""

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        resized: bool = super()._size_updated(size, virtual_size, container_size, layout=False)  # type: ignore[misc]
        return resized
