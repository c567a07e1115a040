"""An image from the system clipboard (alt+v, /paste-image).

Terminals paste text only, so the picture is fetched with the platform's clipboard tool:
``wl-paste`` (wl-clipboard) on Wayland, ``xclip`` on X11, and on macOS and Windows through
Pillow's ``ImageGrab`` (which asks the system itself). Over SSH or in a container there is no
clipboard to read: the user is told so, and told to paste or ``@``-mention a file instead.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from roder_core.brokers.host_programs import system_program

#: Clipboard formats asked for, best first (every tool offers PNG for a copied screenshot).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/bmp")
TIMEOUT = 5.0


class ClipboardError(Exception):
    """No clipboard, no image on it, or the tool failed; the message says which."""


@dataclass(frozen=True)
class ClipboardTool:
    name: str
    #: Command listing the clipboard's types (one per line); None when the tool cannot list.
    list_types: list[str] | None
    #: Command printing the clipboard's content of one type (``{type}`` is replaced).
    read: list[str] | None


def clipboard_tool(
    env: Mapping[str, str], which: Callable[[str], str | None] = system_program, platform: str = sys.platform
) -> ClipboardTool | None:
    """The tool that can read images from this session's clipboard, or None: run by its full
    path as ``which`` found it (the system's, ``host_programs``: it runs unconfined)."""
    if platform in ("darwin", "win32"):
        return ClipboardTool("system clipboard (Pillow ImageGrab)", None, None)
    if env.get("WAYLAND_DISPLAY") and (wl_paste := which("wl-paste")):
        return ClipboardTool("wl-paste", [wl_paste, "--list-types"], [wl_paste, "--no-newline", "--type", "{type}"])
    if env.get("DISPLAY") and (xclip := which("xclip")):
        return ClipboardTool(
            "xclip",
            [xclip, "-selection", "clipboard", "-t", "TARGETS", "-o"],
            [xclip, "-selection", "clipboard", "-t", "{type}", "-o"],
        )
    return None


def no_clipboard_message(env: Mapping[str, str]) -> str:
    if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
        where = "this is an SSH session, so the clipboard of your own machine cannot be read"
    elif env.get("WAYLAND_DISPLAY"):
        where = "install wl-clipboard (wl-paste) to paste images on Wayland"
    elif env.get("DISPLAY"):
        where = "install xclip to paste images on X11"
    else:
        where = "there is no graphical session here"
    return f"no clipboard to read an image from: {where}; attach a file with @path or paste its path instead"


def _run(command: list[str]) -> bytes:
    try:
        done = subprocess.run(command, capture_output=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClipboardError(f"{command[0]} failed: {exc}") from None
    if done.returncode != 0:
        return b""
    return done.stdout


def read_clipboard_image(env: Mapping[str, str], tool: ClipboardTool | None = None) -> bytes:
    """The clipboard's image as bytes (PNG where the tool offers it)."""
    tool = tool or clipboard_tool(env)
    if tool is None:
        raise ClipboardError(no_clipboard_message(env))
    if tool.read is None:
        return _grab_with_pillow()
    offered = _run(tool.list_types).decode("utf-8", "replace").split() if tool.list_types else list(IMAGE_TYPES)
    kind = next((t for t in IMAGE_TYPES if t in offered), None)
    if kind is None:
        shown = ", ".join(offered[:4]) or "nothing"
        raise ClipboardError(f"the clipboard holds no image (it holds: {shown})")
    data = _run([part.replace("{type}", kind) for part in tool.read])
    if not data:
        raise ClipboardError(f"{tool.name} returned no {kind} data")
    return data


def _grab_with_pillow() -> bytes:
    from PIL import Image, ImageGrab

    grabbed = ImageGrab.grabclipboard()
    if not isinstance(grabbed, Image.Image):
        raise ClipboardError("the clipboard holds no image")
    out = io.BytesIO()
    grabbed.save(out, format="PNG")
    return out.getvalue()
