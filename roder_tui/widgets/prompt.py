"""The input box: multiline prompt with history, ``/`` command and ``@`` file completion.

Enter sends; shift+enter or ctrl+j inserts a newline; up/down walk the history when the cursor is
on the first/last line; tab accepts a completion, esc closes it. Enter on a ``/command`` completion
accepts it and runs the command at once (as Claude Code does: a typed or uniquely completed command
never needs a second enter); enter on an ``@file`` completion only inserts the file. Everything
else is a normal text area. The cursor does not blink (no idle repaints over slow links).

A paste longer than ``PASTE_FOLDED_OVER`` characters (a log, a file, a minified line) is shown
as one placeholder, ``[Pasted text #1: 10,000 lines, 178,894 characters]``, as Claude Code
does, and sent in full: the text area re-lays its text out on every key, and a 200,000-character
line cost half a second of CPU per key typed after it. The placeholder is text like any other:
delete it and the paste goes; ``ctrl+g`` opens the whole text in the editor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import TextArea

from roder_tui.file_mentions import mention, mention_being_typed, mentioned_paths

if TYPE_CHECKING:
    from roder_tui.widgets.completion import Completion, CompletionPopup

HISTORY_LIMIT = 500
FILE_SCAN_LIMIT = 20_000
_SKIP_DIRS = {
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    "dist",
    "build",
    ".pytest_cache",
    ".idea",
    ".roder",
}
#: Pastes longer than this are shown folded into a placeholder (and sent in full).
PASTE_FOLDED_OVER = 5_000
#: What an empty prompt says (a new thread's first screen has no other hint).
PLACEHOLDER = "Ask anything · / commands · @ files · ctrl+j new line · F1 keys · ctrl+p palette"
#: The placeholder's hints, most needed first: a prompt too narrow for all of them shows the
#: first ones that fit, whole and in the placeholder's order, instead of the text cut at its edge
#: (at 40 columns "F1 keys", the way to every other key, was cut off).
_HINTS_BY_NEED = ("Ask anything", "F1 keys", "ctrl+p palette", "/ commands", "@ files", "ctrl+j new line")


def placeholder_for(width: int) -> str:
    """The placeholder for a prompt ``width`` cells wide: whole hints only."""
    if len(PLACEHOLDER) <= width:
        return PLACEHOLDER
    order = PLACEHOLDER.split(" · ")
    kept: list[str] = []
    for hint in _HINTS_BY_NEED:
        trial = sorted([*kept, hint], key=order.index)
        if len(" · ".join(trial)) <= width:
            kept = trial
    return " · ".join(kept) if kept else _HINTS_BY_NEED[0][:width]


class PromptHistory:
    """Prompts sent before, newest last, kept across sessions in the data dir."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: list[str] = []
        if path is not None:
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                self.entries = [e for e in loaded if isinstance(e, str)][-HISTORY_LIMIT:]
            except (OSError, ValueError):
                self.entries = []
        self.cursor = len(self.entries)
        #: What was typed before walking up the history; walking back down returns it.
        self.draft = ""

    def add(self, text: str) -> None:
        if text.strip() and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
            del self.entries[:-HISTORY_LIMIT]
            if self.path is not None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self.path.write_text(json.dumps(self.entries), encoding="utf-8")
                except OSError:
                    pass  # history is a convenience; never fail a send over it
        self.cursor = len(self.entries)
        self.draft = ""

    def older(self, current: str = "") -> str | None:
        if self.cursor == 0:
            return None
        if self.cursor == len(self.entries):
            self.draft = current
        self.cursor -= 1
        return self.entries[self.cursor]

    def newer(self) -> str | None:
        if self.cursor >= len(self.entries):
            return None
        self.cursor += 1
        return self.entries[self.cursor] if self.cursor < len(self.entries) else self.draft


#: Lists one folder of a workspace the app cannot see (attached from another machine):
#: (name, is a folder) pairs, through the host's ``fs/readDirectory``.
ReadDirectory = Callable[[str], Awaitable[list[tuple[str, bool]]]]


async def remote_workspace_files(read_directory: ReadDirectory, root: str, limit: int = FILE_SCAN_LIMIT) -> list[str]:
    """``workspace_files`` for a workspace on the host, folder by folder over the control plane."""
    found: list[str] = []
    folders = [""]
    while folders:
        rel = folders.pop(0)
        entries = await read_directory(f"{root}/{rel}" if rel else root)
        for name, is_dir in sorted(entries):
            path = f"{rel}/{name}" if rel else name
            if is_dir:
                if (name not in _SKIP_DIRS and not name.startswith(".")) or name == ".github":
                    folders.append(path)
                continue
            found.append(path)
            if len(found) >= limit:
                return found
    return found


def _offered(path: str) -> bool:
    """Whether a file is worth offering: not inside VCS, caches or virtualenvs."""
    folders = path.split("/")[:-1]
    return not any((part in _SKIP_DIRS or part.startswith(".")) and part != ".github" for part in folders)


def workspace_files(root: Path, limit: int = FILE_SCAN_LIMIT) -> list[str]:
    """Relative paths of the workspace's files: the tools' walker (ripgrep, with the same ignore
    rules as ``glob``), in path order, without VCS, caches and virtualenvs. (The file brokers
    load with the first ``@`` completion, not before the app's first frame.)"""
    from roder_core.brokers.file_glob import ListingTimeout, ripgrep_files

    real = root.resolve()
    try:
        listed = ripgrep_files(real)
    except ListingTimeout:
        listed = None
    if listed is None:
        return _walked_files(root, limit)
    prefix = str(real) + "/"
    relative = sorted((path[len(prefix) :] for path in listed if path.startswith(prefix)), key=lambda p: p.split("/"))
    return [path for path in relative if _offered(path)][:limit]


def _walked_files(root: Path, limit: int) -> list[str]:
    """The same files from the file broker's own walk (its ignore rules are ripgrep's)."""
    from roder_core.brokers.fs import WorkspaceFileSystem

    found: list[str] = []
    for info in WorkspaceFileSystem(root).walk("."):
        if info.kind == "file" and _offered(info.display):
            found.append(info.display)
            if len(found) >= limit:
                break
    return found


def match_files(files: list[str], query: str, limit: int = 20) -> list[str]:
    """Files whose path contains ``query`` (case-insensitive), basename-prefix matches first."""
    q = query.lower()
    scored: list[tuple[int, int, str]] = []
    for path in files:
        low = path.lower()
        if q and q not in low:
            continue
        base = low.rsplit("/", 1)[-1]
        score = 0 if base.startswith(q) else 1 if low.startswith(q) else 2
        scored.append((score, len(path), path))
    scored.sort()
    return [p for _, _, p in scored[:limit]]


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput {
        height: auto; min-height: 3; max-height: 10; border: round $panel; padding: 0 1;
        scrollbar-size-vertical: 0; background: $surface;
    }
    PromptInput:focus { border: round $primary; }
    """

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class RecallQueued(Message):
        """``up`` on an empty prompt while steer messages wait: take the newest one back."""

    class PageTranscript(Message):
        """``pageup``/``pagedown`` typed in the prompt: scroll the transcript a page (``step``:
        -1 up, 1 down), as in Codex, so reading back needs no focus change (the text area
        would only move its cursor, which a prompt of a few lines does not need)."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def __init__(self, history: PromptHistory, *, id: str | None = None) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", placeholder=PLACEHOLDER, id=id)
        self.prompt_history = history
        self.cursor_blink = False
        self.completion: CompletionPopup | None = None  # created on the first completion
        #: Whether steer messages are queued (set by the app); ``up`` on an empty prompt recalls them.
        self.has_queued: Callable[[], bool] = lambda: False
        #: Brings the completion up to date with the text as it is now (set by ``PromptBar``).
        #: The bar follows the text through ``Changed`` messages, which it handles in its own
        #: queue; keys that arrive one by one (a browser sends each in its own message) can
        #: run ahead of them, so enter would accept the suggestions for an older token.
        self.sync_completion: Callable[[], None] = lambda: None
        #: The text is an entry recalled from the history and not edited since: up/down keep
        #: walking the history and no completion opens (an entry ending in ``@file`` would
        #: otherwise open one that takes the arrows, and the walk could not go on).
        self.walking_history = False
        #: The folded pastes, by their placeholder (``expanded`` puts them back). Kept after a
        #: send: ``ctrl+z`` brings a sent prompt's placeholders back, and they still mean the paste.
        self.pasted: dict[str, str] = {}
        #: Until the app can send (it says when): an enter typed before the app took the
        #: keyboard was turned into a newline (ctrl+j) by the terminal, so ctrl+j sends too.
        self.starting = True

    def on_resize(self) -> None:
        # The cursor takes the cell after the text: the placeholder may fill the rest.
        self.placeholder = placeholder_for(max(self.content_size.width - 1, 1))

    async def _on_key(self, event: events.Key) -> None:
        key = "enter" if self.starting and event.key == "ctrl+j" else event.key
        popup = self.completion
        if key not in ("up", "down"):
            self.walking_history = False
        if popup is not None and popup.display and not self.walking_history and key in ("tab", "enter", "up", "down"):
            self.sync_completion()  # the keys the suggestions take act on the current token's
        if popup is not None and popup.display and not self.walking_history:
            if key in ("tab", "enter"):
                event.stop()
                event.prevent_default()
                command = popup.completes_command
                popup.accept()
                if key == "enter" and command:
                    self._submit()
                return
            if key in ("up", "down"):
                event.stop()
                event.prevent_default()
                popup.move(-1 if key == "up" else 1)
                return
            if key == "escape":
                event.stop()
                event.prevent_default()
                popup.close()
                return
        if key == "enter":
            event.stop()
            event.prevent_default()
            self._submit()
            return
        if key in ("pageup", "pagedown"):
            event.stop()
            event.prevent_default()
            self.post_message(self.PageTranscript(-1 if key == "pageup" else 1))
            return
        if key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if key == "up" and not self.text and self.has_queued():
            event.stop()
            event.prevent_default()
            self.post_message(self.RecallQueued())
            return
        at_edge = (key == "up" and self.cursor_at_first_line) or (key == "down" and self.cursor_at_last_line)
        if at_edge:
            recalled = self.prompt_history.older(self.text) if key == "up" else self.prompt_history.newer()
            if recalled is not None:
                event.stop()
                event.prevent_default()
                self.walking_history = True
                if popup is not None:
                    popup.close()
                self._replace_all(recalled)
                return
        await super()._on_key(event)

    async def _on_paste(self, event: events.Paste) -> None:
        if len(event.text) <= PASTE_FOLDED_OVER or self.read_only:
            return  # the text area's own handler (next in the class order) inserts it
        event.stop()
        event.prevent_default()
        # Lines as the text area makes them of a paste it shows: terminals send a pasted newline
        # as a carriage return (as a typed enter).
        text = "\n".join(event.text.splitlines()) + ("\n" if event.text.endswith(("\r\n", "\n", "\r")) else "")
        lines = text.count("\n") + (not text.endswith("\n"))
        placeholder = (
            f"[Pasted text #{len(self.pasted) + 1}: {lines:,} line{'s' if lines != 1 else ''}, {len(text):,} characters]"
        )
        self.pasted[placeholder] = text
        result = self.replace(placeholder, *self.selection, maintain_selection_offset=False)  # as a paste does
        self.move_cursor(result.end_location)
        self.focus()

    def action_delete_to_start_of_line(self) -> None:
        """``ctrl+u``: to the start of the line as typed, not of the row it wraps onto (as in
        readline, Claude Code and Codex: one press clears a long sentence at 40 columns)."""
        row, column = self.selection.end
        if self.read_only or (column == 0 and self.selection.is_empty):
            super().action_delete_to_start_of_line()  # at a line's start: joins it to the one above
            return
        self._delete_via_keyboard(self.selection.end, (row, 0))

    async def action_delete_to_end_of_line_or_delete_line(self) -> None:
        """``ctrl+k``: to the end of the line as typed (an empty line goes, at the end the next
        line joins), not of the row the cursor is on."""
        row, column = self.selection.end
        line = self.document[row]
        if self.read_only or not line or (self.selection.is_empty and column == len(line)):
            await super().action_delete_to_end_of_line_or_delete_line()
            return
        self._delete_via_keyboard(self.selection.end, (row, len(line)))

    def expanded(self) -> str:
        """The prompt's text with each folded paste whose placeholder is still there put back."""
        if not self.pasted:
            return self.text
        placeholders = re.compile("|".join(re.escape(p) for p in self.pasted))
        return placeholders.sub(lambda match: self.pasted[match.group()], self.text)

    def _submit(self) -> None:
        text = self.expanded()
        if text.strip():
            self.prompt_history.add(text)
            self.post_message(self.Submitted(text))
            self.clear()

    def _replace_all(self, text: str) -> None:
        self.text = text
        self.move_cursor(self.document.end)

    def token_before_cursor(self) -> str:
        row, column = self.cursor_location
        return self.document[row][:column]


class PromptBar(Vertical):
    """Prompt plus its completion popup; the app supplies the command and file sources."""

    DEFAULT_CSS = """
    PromptBar { height: auto; }
    """

    def __init__(self, history: PromptHistory, workspace: Path) -> None:
        super().__init__()
        self.workspace = workspace
        self.input = PromptInput(history, id="prompt")
        self.input.sync_completion = self._complete
        self.popup: CompletionPopup | None = None  # mounted on first use, not before the first frame
        self.commands: list[Completion] = []
        #: MCP resources (``server:uri``) offered by ``@`` completion before workspace files.
        self.mentions: list[str] = []
        self._files: list[str] | None = None
        #: Whether the cursor ended an ``@`` mention at the last completion: each new mention
        #: lists the workspace again (in the background, the last listing meanwhile), so a file
        #: written since (by the model, a ``!`` command, another terminal) can be completed.
        self._mentioning = False
        #: Set when the workspace is on the host, not here: ``@`` completion lists it through this.
        self.read_directory: ReadDirectory | None = None

    def compose(self) -> ComposeResult:
        yield self.input

    @property
    def popup_open(self) -> bool:
        return self.popup is not None and bool(self.popup.display)

    def close_popup(self) -> None:
        if self.popup is not None:
            self.popup.close()

    def _show(self, token: str, items: list[Completion]) -> None:
        if self.popup is None:
            if not items:
                return
            from roder_tui.widgets.completion import CompletionPopup

            self.popup = CompletionPopup(self.input)
            self.input.completion = self.popup
            self.mount(self.popup, before=self.input)
        self.popup.show(token, items)

    def set_commands(self, rows: list[tuple[str, str, str]]) -> None:
        """(name, argument hint, description) rows for ``/`` completion."""
        from roder_tui.widgets.completion import Completion

        self.commands = [Completion(f"/{name} ", f"/{name}" + (f" {hint}" if hint else ""), desc) for name, hint, desc in rows]

    def set_mentions(self, mentions: list[str]) -> None:
        self.mentions = list(mentions)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._complete()

    def _complete(self) -> None:
        """The suggestions for the token before the cursor now (none: the popup closes)."""
        if self.input.walking_history:
            self.close_popup()
            return
        before = self.input.token_before_cursor()
        row = self.input.cursor_location[0]
        if row == 0 and before.startswith("/") and " " not in before:
            prefix = before[1:]
            self._show(before, [c for c in self.commands if c.value[1:].startswith(prefix)][:30])
            return
        typing = mention_being_typed(before)
        mentioning, self._mentioning = self._mentioning, typing is not None
        if typing is not None:
            token, query = typing
            files = self._files = self._files or []
            if not mentioning:
                if self.read_directory is not None:
                    self.run_worker(self._scan_remote(self.read_directory), exclusive=True, group="file-scan")
                else:
                    self.run_worker(self._scan_files, thread=True, exclusive=True, group="file-scan")
            from roder_tui.widgets.completion import Completion

            names = match_files(files, query)
            resources = [m for m in self.mentions if m.startswith(query)][:10]
            self._show(
                token,
                [Completion(f"@{m} ", f"@{m}", "MCP resource") for m in resources]
                + [Completion(f"{mention(n)} ", f"@{n}") for n in names],
            )
            return
        self.close_popup()

    def _scan_files(self) -> None:
        files = workspace_files(self.workspace)
        self.app.call_from_thread(self._files_ready, files)

    async def _scan_remote(self, read_directory: ReadDirectory) -> None:
        self._files_ready(await remote_workspace_files(read_directory, str(self.workspace)))

    async def known_files(self) -> list[str]:
        """The workspace's files (relative paths), listed now if they were not yet."""
        if self._files:
            return self._files
        if self.read_directory is not None:
            return await remote_workspace_files(self.read_directory, str(self.workspace))
        return workspace_files(self.workspace)

    def _files_ready(self, files: list[str]) -> None:
        self._files = files
        self._complete()


def attachments_in(text: str, workspace: Path, known: set[str] | None = None) -> list[Path]:
    """Workspace files named as ``@path`` or ``@"a path"`` in a prompt (missing ones are left as
    text). With ``known`` (the relative paths of a workspace on the host), those are the files
    that exist."""
    found: list[Path] = []
    for _, name in mentioned_paths(text):
        if known is not None:
            if name in known and workspace / name not in found:
                found.append(workspace / name)
            continue
        path = (workspace / name).resolve()
        try:
            path.relative_to(workspace.resolve())
        except ValueError:
            continue
        if path.is_file() and path not in found:
            found.append(path)
    return found
