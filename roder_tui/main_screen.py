"""The app's main screen: the chat, the sidebar, and the panels drawn over them.

Two differences from Textual's default screen, both for speed:

- A focus change repaints only the widgets it restyles. Textual's screen repaints itself whole
  on every focus change (its ``focused`` is a repainting reactive), though what focus changes
  is drawn by the widgets that gain or lose it (their ``:focus`` and ``:focus-within`` styles,
  which Textual updates and repaints on its own). Opening the palette moves focus, and that
  whole-screen repaint was most of its cost once it stopped being a screen of its own.
- An ``overlay`` layer over the chat, for the command palette and help (``widgets/overlay.py``).
"""

from __future__ import annotations

from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class MainScreen(Screen[None]):
    DEFAULT_CSS = "MainScreen { layers: default overlay; }"
    #: The prompt has the focus from the first key: Textual's default (the first focusable
    #: widget, the transcript) took the keys typed while the app starts, and it passes on only
    #: characters, so an enter typed ahead was lost.
    AUTO_FOCUS = "#prompt"

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
