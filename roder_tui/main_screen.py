"""The app's main screen: the chat, the sidebar, and the panels drawn over them.

Four differences from Textual's default screen, all for speed:

- A focus change repaints only the widgets it restyles. Textual's screen repaints itself whole
  on every focus change (its ``focused`` is a repainting reactive), though what focus changes
  is drawn by the widgets that gain or lose focus (their ``:focus`` and ``:focus-within`` styles,
  which Textual updates and repaints on its own).
- An ``overlay`` layer over the chat, for the command palette and help (``widgets/overlay.py``).
- An open panel takes the keys without taking the focus (``key_owner``): a focus change restyles
  the widgets losing and gaining it, a quarter of what opening the palette cost.
- Widgets under an open panel are not drawn where it covers them (``PanelCompositor``).
"""

from __future__ import annotations

from collections.abc import Iterable

from textual import events
from textual._compositor import Compositor
from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.geometry import Region
from textual.keys import key_to_character
from textual.reactive import Reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

from roder_tui.widgets.overlay import OverlayPanel


class PanelCompositor(Compositor):
    """Textual's compositor, except that a widget behind an open overlay panel is not rendered in
    the rows the panel covers.

    Textual draws an update of a region by rendering every widget that overlaps it, back ones
    included, and cutting each one's rows at every widget edge; the front one wins each cell.
    Showing help (nearly the whole screen) rendered and cut the sidebar, the transcript, the
    prompt and their containers under it: about a third of what an open cost. A widget's cells
    under a panel can never show (Textual does not blend widgets of different layers: the front
    one's cell is drawn as it is), so only the parts of a back widget the panel leaves visible
    within the updated rows (above, below and beside it) are rendered.
    """

    @property
    def cuts(self) -> list[list[int]]:
        """Where each row is cut (every edge of a widget drawn in it), without the edges of the
        widgets a panel hides in that row. Textual cuts every row at every widget's edges, and
        the panel's rows were cut at the edges of the sidebar, the transcript and the prompt behind
        it, then joined again: a tenth of an open. The edges kept are those of exactly the parts
        ``_get_renders`` renders (a widget's parts beside and around the panels in front of it)."""
        if self._cuts is not None:
            return self._cuts
        width, height = self.size
        cuts = [[0, width] for _ in range(height)]
        panels: list[Region] = []
        for widget, (region, clip) in self.visible_widgets.items():
            visible = region.intersection(clip)
            if not visible:
                continue
            for part in _uncovered_parts(visible, None, panels):
                for row in cuts[part.y : part.bottom]:
                    row.extend((part.x, part.right))
            if isinstance(widget, OverlayPanel):
                panels.append(visible)
        self._cuts = [sorted(set(row)) for row in cuts]
        return self._cuts

    def _get_renders(self, crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        panels: list[Region] = []
        # Front to back: a panel hides what comes after it (its own children come before it).
        for widget, (region, clip) in self.visible_widgets.items():
            visible = region.intersection(clip)
            if not visible or (crop is not None and not crop.overlaps(visible)):
                continue
            for part in _uncovered_parts(visible, crop, panels):
                yield region, part, widget.render_lines(part.translate(-region.offset))
            if isinstance(widget, OverlayPanel):
                panels.append(visible)


def _uncovered_parts(visible: Region, crop: Region | None, panels: list[Region]) -> list[Region]:
    """The parts of ``visible`` (a widget's visible part) in the rows of ``crop`` (the update's
    area: cells outside it are not drawn by this update) that no panel in front of it hides: above,
    below, left and right of each panel. A widget a panel half covers (the transcript beside
    help) is drawn, and its rows cut, only beside the panel, so the panel's rows are cut at the
    panel's edges alone."""
    parts = [visible]
    for panel in panels:
        parts = [piece for part in parts for piece in _minus(part, panel)]
    if crop is None:
        return [part for part in parts if part]
    # The update's rows only, but whole columns: each part's edges are the cuts of its rows.
    rows = [
        Region(part.x, max(part.y, crop.y), part.width, min(part.bottom, crop.bottom) - max(part.y, crop.y)) for part in parts
    ]
    return [part for part in rows if part.height > 0 and part.width > 0 and part.overlaps(crop)]


def _minus(part: Region, hidden: Region) -> list[Region]:
    """``part`` without ``hidden``: up to four pieces (the rows above and below it, whole; the
    columns left and right of it in its rows)."""
    if not part.overlaps(hidden):
        return [part]
    top, bottom = max(part.y, hidden.y), min(part.bottom, hidden.bottom)
    return [
        Region(part.x, part.y, part.width, top - part.y),
        Region(part.x, bottom, part.width, part.bottom - bottom),
        Region(part.x, top, max(0, hidden.x - part.x), bottom - top),
        Region(hidden.right, top, max(0, part.right - hidden.right), bottom - top),
    ]


class MainScreen(Screen[None]):
    DEFAULT_CSS = "MainScreen { layers: default overlay; }"
    #: The prompt has the focus from the first key: Textual's default (the first focusable
    #: widget, the transcript) took the keys typed while the app starts, and it passes on only
    #: characters, so an enter typed ahead was lost.
    AUTO_FOCUS = "#prompt"

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name, id, classes)
        self._compositor = PanelCompositor()

    @property
    def key_owner(self) -> OverlayPanel | None:
        """The open panel, which gets every key and paste while it is open (the app routes them
        here: ``RoderApp.on_event``); None when the focused widget gets them."""
        for child in self.children:
            if isinstance(child, OverlayPanel) and child.display:
                return child
        return None

    @property
    def _binding_chain(self) -> list[tuple[DOMNode, BindingsMap]]:
        """The bindings a key is looked up in: while a panel is open, the panel's, the screen's
        and the app's (the focused widget's are left out: its keys are not in play), as Textual
        makes the chain from a focused widget: a key the panel takes as text runs no binding
        above it, and the app's remapped keys apply."""
        owner = self.key_owner
        if owner is None:
            return super()._binding_chain
        chain: list[tuple[DOMNode, BindingsMap]] = [(node, node._bindings.copy()) for node in owner.ancestors_with_self]
        for _node, bindings in chain[1:]:
            for key in [key for key in bindings.key_to_bindings if owner.check_consume_key(key, key_to_character(key))]:
                del bindings.key_to_bindings[key]
        if keymap := self.app._keymap:
            for node, bindings in chain:
                if clashes := bindings.apply_keymap(keymap).clashed_bindings:
                    self.app.handle_bindings_clash(clashes, node)
        return chain

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True, from_app_focus: bool = False) -> None:
        """Focus moving while a panel is open closes it: the keys follow the focus again. The
        terminal losing and regaining focus (Textual drops the focus and puts it back) does not."""
        moved = widget is not self.focused and self.app.app_focus and not from_app_focus
        if moved and (panel := self.key_owner) is not None:
            panel.close()
        super().set_focus(widget, scroll_visible, from_app_focus)

    def _forward_event(self, event: events.Event) -> None:
        """A press outside an open panel closes it (and then does what it does there)."""
        panel = self.key_owner if isinstance(event, events.MouseDown) else None
        if panel is not None and not panel.region.contains(event.x, event.y):  # type: ignore[attr-defined]
            panel.close()
        super()._forward_event(event)
