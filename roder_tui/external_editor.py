"""``ctrl+g``: edit the prompt in ``$VISUAL`` / ``$EDITOR`` (as OpenCode and Codex allow).

The prompt's text goes to a temporary Markdown file; the app suspends (the editor gets the
terminal), and what the file holds when the editor exits becomes the prompt. A failing editor
leaves the prompt as it was.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App


class EditorError(Exception):
    pass


def editor_command() -> list[str]:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor or not editor.strip():
        raise EditorError("set $VISUAL or $EDITOR to edit the prompt in your editor")
    return shlex.split(editor)


def edit_text(app: App[Any], text: str) -> str:
    """Run the editor on ``text`` and return the edited text (raises EditorError)."""
    from textual.app import SuspendNotSupported

    if "web_driver" in os.environ.get("TEXTUAL_DRIVER", ""):  # `roder web`: the editor would get the page's pipe
        raise EditorError("ctrl+g needs a terminal; in the browser, edit the prompt in place (ctrl+j adds a line)")
    command = editor_command()
    handle, name = tempfile.mkstemp(prefix="roder-prompt-", suffix=".md")
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        try:
            with app.suspend():
                code = _run(command, path)
        except SuspendNotSupported:  # headless (tests, web): nothing to hand over
            code = _run(command, path)
        if code != 0:
            raise EditorError(f"{command[0]} exited with status {code}; the prompt is unchanged")
        edited = path.read_text(encoding="utf-8")
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    return edited[:-1] if edited.endswith("\n") else edited


def _run(command: list[str], path: Path) -> int:
    try:
        return subprocess.call([*command, str(path)])
    except OSError as exc:
        raise EditorError(f"cannot start {command[0]}: {exc}") from exc
