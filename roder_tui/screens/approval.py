"""The approval dialog: what the agent wants to do, why it asks, and five one-key answers.

``y`` allow once, ``s`` allow for this session, ``a`` always (the exact rule it saves is shown),
``n`` deny, ``esc`` deny and interrupt. It fits a 40x20 terminal: however long the diff, the keys
and the rule stay on screen; the reason and the preview scroll inside their own area, so neither
is ever cut. An edit shows its changed lines with their line numbers (as its transcript card does),
a command says when it would keep running in the background.
"""

from __future__ import annotations

import json
import re

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from roder_core.ir import ApprovalDecision, ApprovalRequest
from roder_tui.terminal_text import has_unsafe, visible
from roder_tui.widgets.messages import numbered_diff

PREVIEW_LIMIT = 2000
BACKGROUND_NOTE = "\nruns in the background: it keeps running after this call returns (the tasks panel lists it)"
ARGUMENTS_LIMIT = 20_000
#: Said when what will run does not fit the dialog: the rest is below the preview's fold.
CUT_WARNING = "the preview is taller than this dialog; scroll it to see all of what will run"
#: Said when a word of the command has letters that can pass for plain ones (homoglyphs).
LOOKALIKE_WARNING = "this command has letters from another alphabet, which can pass for plain ones"
#: Said under a command that holds characters a terminal would hide or interpret.
HIDDEN_WARNING = "this command contains control or invisible characters, shown in the preview as ␛, ␍ or <U+…>"


class ApprovalScreen(ModalScreen[ApprovalDecision]):
    BINDINGS = [
        Binding("y", "decide('allow_once')", "Allow once"),
        Binding("s", "decide('allow_session')", "Allow for session"),
        Binding("a", "decide('allow_always')", "Always allow"),
        Binding("n", "decide('deny')", "Deny"),
        Binding("escape", "decide('deny_interrupt')", "Deny and interrupt"),
    ]
    #: The dialog is as tall as its content up to the screen; the title, reason and key legend
    #: (with the rule "always" saves) are docked, so only the preview scrolls, in its own area.
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    ApprovalScreen > Vertical {
        width: 100%; max-width: 110; height: auto; max-height: 100%;
        background: $surface; border: round $warning; padding: 0 1;
    }
    ApprovalScreen #approval-head { dock: top; height: auto; }
    ApprovalScreen #approval-title { text-style: bold; color: $warning; }
    ApprovalScreen #approval-reason { color: $text-muted; margin-bottom: 1; }
    ApprovalScreen #approval-notice { color: $error; text-style: bold; }
    ApprovalScreen VerticalScroll { height: auto; max-height: 100%; margin: 1 0; }
    ApprovalScreen #approval-what { background: $background; }
    ApprovalScreen #approval-keys { dock: bottom; height: auto; }
    """

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        self.rule = next((o.rule for o in request.options if o.id == "allow_always" and o.rule), None) or request.tool

    def compose(self) -> ComposeResult:
        req = self.request
        with Vertical():
            with Vertical(id="approval-head"):
                asker = f"{req.agent} asks: " if req.agent else ""
                yield Static(f"{asker}Allow {req.tool}?", id="approval-title", markup=False)
                notice = Static(self._notice(), id="approval-notice", markup=False)
                notice.display = bool(self._notice())
                yield notice
            with VerticalScroll(id="approval-preview"):
                if req.reason:
                    yield Static(req.reason, id="approval-reason", markup=False)
                yield Static(self._preview(), id="approval-what", markup=False)
            yield Static(self._keys(), id="approval-keys")

    def _preview(self) -> Group | Text:
        req = self.request
        if req.diff:
            lines: list[Text] = []
            for part in re.split(r"(?m)^(?=--- )", req.diff):  # one part per file
                path = next((line[4:].removeprefix("b/") for line in part.splitlines() if line.startswith("+++ ")), "")
                lines += ([Text(visible(path), style="bold")] if path else []) + numbered_diff(part, context=True)
            extra = len(lines) - PREVIEW_LIMIT
            shown = lines[:PREVIEW_LIMIT] + ([Text(f"… {extra} more lines", style="dim")] if extra > 0 else [])
            return Group(*shown)
        if req.command:
            # exactly what will run: every control, bidi or invisible character shown (a \r too)
            text = Text("$ ", style="bold")
            text.append(visible(req.command, line_endings=False), style="bold")
            if req.cwd and req.cwd != ".":
                text.append(f"\nin {visible(req.cwd)}", style="dim")
            if req.arguments.get("run_in_background"):
                text.append(BACKGROUND_NOTE, style="bold")
            return text
        if req.diff is not None:  # a preview that changes nothing (the file already reads so)
            return Text("no change: the file already has this content", style="bold")
        return argument_text(req.arguments)

    def _notice(self) -> str:
        """Said above the preview (which may scroll) when the command is not all in plain sight:
        it holds characters a terminal would hide or act on, or runs over several lines."""
        command = self.request.command or ""
        said = []
        if has_unsafe(command) or "\r" in command:
            said.append(HIDDEN_WARNING)
        lookalikes = _lookalike_words(command)
        if lookalikes:
            said.append(f"{LOOKALIKE_WARNING}: {'; '.join(lookalikes)}")
        lines = command.count("\n") + 1
        if lines > 1:
            said.append(f"the command is {lines} lines long; scroll the preview to see all of it")
        return "\n".join(said)

    def on_mount(self) -> None:
        self.call_after_refresh(self._say_when_cut)

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_when_cut)

    def _say_when_cut(self) -> None:
        """Measured, not guessed: whatever pushes the end of a command or of a call's arguments
        below the fold (one line of thousands of blank-looking characters, a long reason above
        it, a small terminal), the docked head says so once the preview is laid out. A diff
        that scrolls is left alone: its length is no disguise."""
        if self.request.diff is not None:
            return
        said = self._notice()
        scrolled = self.query_one("#approval-preview", VerticalScroll).max_scroll_y > 0
        if scrolled and "\n" not in (self.request.command or ""):  # several lines: already said
            said = f"{said}\n{CUT_WARNING}" if said else CUT_WARNING
        notice = self.query_one("#approval-notice", Static)
        notice.update(said)
        notice.display = bool(said)

    def _keys(self) -> Group:
        """The key legend, each row as two columns, so a label that wraps (the rule "always" saves, at 40
        columns) goes on under its label, never at the dialog's edge under the keys."""
        options = {o.id for o in self.request.options} or {
            "allow_once",
            "allow_session",
            "allow_always",
            "deny",
            "deny_interrupt",
        }
        # A compound command saves one rule per command, a line each, lined up under the first.
        always = "always allow: "
        rules = ("\n" + " " * len(always)).join(self.rule.splitlines())
        rows = [
            ("y", "allow once", "allow_once"),
            ("s", "allow for this session", "allow_session"),
            ("a", always + rules, "allow_always"),
            ("n", "deny", "deny"),
            ("esc", "deny and interrupt", "deny_interrupt"),
        ]
        legend: list[Table] = []
        for key, label, option in rows:
            if option in options:
                row = Table.grid(padding=(0, 1))  # a grid a row: each label starts right after its key
                row.add_column(no_wrap=True)
                row.add_column(overflow="fold")
                row.add_row(Text(f" {key} ", style="bold reverse"), Text(label))
                legend.append(row)
        return Group(*legend)

    def action_decide(self, decision: str) -> None:
        rule = self.rule if decision == "allow_always" else None
        # the binding's argument is a plain string: checked against ApprovalDecisionKind here
        self.dismiss(ApprovalDecision.model_validate({"decision": decision, "rule": rule}))


def _lookalike_words(command: str) -> list[str]:
    """Words of ``command`` holding letters outside ASCII and the Latin alphabets, each with
    those letters named (at most three words): ``curl`` spelt with a Cyrillic es (U+0441) looks
    like ``curl`` but names another program, as do fullwidth or mathematical letters."""
    import unicodedata

    found: list[str] = []
    for word in dict.fromkeys(command.split()):
        odd = [c for c in dict.fromkeys(word) if c.isalpha() and not unicodedata.name(c, "").startswith("LATIN ")]
        if odd and len(found) < 3:
            named = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in odd[:4])
            found.append(f"{visible(word)} ({named})")
    return found


def argument_text(arguments: dict[str, object]) -> Text:
    """A call's arguments as a person reads them: one ``name: value`` per argument, text with its
    real line breaks (JSON showed a file's content as one line of ``\\n``); everything shown as
    ``visible`` makes it, and cut at ``ARGUMENTS_LIMIT`` characters with the rest counted."""
    text = Text()
    for name, value in arguments.items():
        if text:
            text.append("\n")
        text.append(f"{visible(name)}:", style="bold")
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        cut = f"\n… {len(shown) - ARGUMENTS_LIMIT} more characters" if len(shown) > ARGUMENTS_LIMIT else ""
        if "\n" in shown:
            text.append("\n" + visible(shown[:ARGUMENTS_LIMIT]))
        else:
            text.append(" " + visible(shown[:ARGUMENTS_LIMIT], line_endings=False))
        if cut:
            text.append(cut, style="dim")
    return text
