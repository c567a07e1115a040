"""Which inline image protocol the terminal speaks, told from its environment (never by querying
it, which would cost a round trip at every start).

kitty, Ghostty and WezTerm speak the kitty graphics protocol; foot, mlterm, Windows Terminal,
Konsole, iTerm2 (3.5 and later) and WezTerm draw sixel images. Inside tmux or screen, which
drop graphics sequences, and in any other terminal, images are shown as text cards.
``RODER_IMAGE_PREVIEW`` (``kitty``, ``sixel``, ``off``) overrides the guess, and so does
``image_preview`` in config.toml.

The previews are drawn by textual-image. It asks the terminal about cell sizes once, which is
only possible before the app takes over the terminal: ``prepare_previews`` does that at start,
and only where a protocol was found.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

log = logging.getLogger(__name__)

Protocol = Literal["kitty", "sixel"]
PROTOCOLS: tuple[Protocol, ...] = ("kitty", "sixel")
_KITTY_PROGRAMS = {"ghostty", "wezterm"}
_SIXEL_TERMS = ("foot", "mlterm", "yaft", "contour")
_SIXEL_PROGRAMS = {"iterm.app", "konsole", "mintty", "vscode"}


def image_protocol(env: Mapping[str, str], setting: str = "") -> Protocol | None:
    """The protocol to draw previews with, or None for text cards."""
    forced = (env.get("RODER_IMAGE_PREVIEW") or setting or "auto").strip().lower()
    if forced in ("off", "none", "text", "false"):
        return None
    if forced in PROTOCOLS:
        return forced
    if env.get("TMUX") or env.get("STY"):
        return None  # tmux and screen swallow graphics sequences
    term = env.get("TERM", "").lower()
    program = env.get("TERM_PROGRAM", "").lower()
    if term == "xterm-kitty" or env.get("KITTY_WINDOW_ID") or program in _KITTY_PROGRAMS:
        return "kitty"
    if term.startswith(_SIXEL_TERMS) or "sixel" in term or program in _SIXEL_PROGRAMS or env.get("WT_SESSION"):
        return "sixel"
    if env.get("LC_TERMINAL", "").lower() == "iterm2":
        return "sixel"
    return None


_WIDGETS: dict[str, Any] = {}


def prepare_previews(protocol: Protocol | None) -> Protocol | None:
    """Load textual-image for ``protocol`` before the app starts; None when it cannot draw."""
    if protocol is None:
        return None
    try:
        from textual_image import widget as image_widgets
    except Exception as exc:  # not installed, or the terminal query failed: text cards
        log.info("inline image previews are off: %s", exc)
        return None
    _WIDGETS[protocol] = image_widgets.TGPImage if protocol == "kitty" else image_widgets.SixelImage
    return protocol


def preview_widget_class(protocol: Protocol | None) -> Any | None:
    """The textual-image widget class ``prepare_previews`` loaded for ``protocol``."""
    return _WIDGETS.get(protocol) if protocol is not None else None
