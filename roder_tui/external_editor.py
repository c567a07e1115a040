"""``ctrl+g``: edit the prompt in ``$VISUAL`` / ``$EDITOR`` (as OpenCode and Codex allow).

With neither set it falls back as git does: ``editor`` (the system's choice on Debian-like
systems) if it is installed, else ``vi``; the app then names the editor it opened, so a user who
lands in vi knows why and how to choose another. With none of them, a one-line error says so.
The fallback is a program Roder picks and runs outside any sandbox, so it is looked up as every
such program is (``host_programs.system_program``: the system's folders first), never a ``vi``
the agent's commands left in a workspace folder on the PATH.

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

from roder_core.brokers.host_programs import system_program

if TYPE_CHECKING:
    from textual.app import App


class EditorError(Exception):
    pass


#: Tried in order when neither $VISUAL nor $EDITOR is set, as git does.
FALLBACK_EDITORS = ("editor", "vi")


def editor_command() -> tuple[list[str], str]:
    """The editor to run, and a notice naming it when it is a fallback ("" for the user's own)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if editor and editor.strip():
        return shlex.split(editor), ""
    found = system_program(*FALLBACK_EDITORS)
    if found:
        return [found], f"opened {found}: $VISUAL and $EDITOR are unset (set one to choose your editor)"
    raise EditorError("no editor: $VISUAL and $EDITOR are unset and neither editor nor vi is installed")


def edit_text(app: App[Any], text: str) -> tuple[str, str]:
    """Run the editor on ``text``; the edited text and the fallback notice of ``editor_command``
    (raises EditorError)."""
    from textual.app import SuspendNotSupported

    if "web_driver" in os.environ.get("TEXTUAL_DRIVER", ""):  # `roder web`: the editor would get the page's pipe
        raise EditorError("ctrl+g needs a terminal; in the browser, edit the prompt in place (ctrl+j adds a line)")
    command, notice = editor_command()
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
    return (edited[:-1] if edited.endswith("\n") else edited), notice


def _run(command: list[str], path: Path) -> int:
    try:
        return subprocess.call([*command, str(path)])
    except OSError as exc:
        raise EditorError(f"cannot start {command[0]}: {exc}") from exc
