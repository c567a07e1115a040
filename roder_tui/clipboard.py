"""Copy text to the clipboard in every place a terminal can be.

OSC 52 reaches the clipboard of the machine the terminal runs on, even over SSH and through tmux
(with ``set-clipboard on``); pyperclip reaches the local desktop clipboard when there is one.
Both are tried, so copying works locally, remotely and headless-in-a-container alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App


def copy_text(app: App[Any], text: str) -> str:
    """Copy ``text``; returns a short description of where it went, for the notification."""
    app.copy_to_clipboard(text)  # OSC 52
    where = "terminal clipboard (OSC 52)"
    try:
        import pyperclip

        pyperclip.copy(text)
        where = "clipboard"
    except Exception:  # no local clipboard (SSH, container): OSC 52 already did its part
        pass
    return where
