"""The approval dialog: what the agent wants to do, why it asks, and five one-key answers.

``y`` allow once, ``s`` allow for this session, ``a`` always (the exact rule it saves is shown),
``n`` deny, ``esc`` deny and interrupt. It fits a 40x20 terminal: however long the diff, the keys
and the rule stay on screen and the preview scrolls inside its own area.
"""

from __future__ import annotations

import json

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from roder_core.ir import ApprovalDecision, ApprovalRequest
from roder_tui.terminal_text import has_unsafe, visible
from roder_tui.widgets.messages import diff_lines

PREVIEW_LIMIT = 2000
ARGUMENTS_LIMIT = 20_000
#: Said under a command that holds characters a terminal would hide or interpret.
HIDDEN_WARNING = "this command contains control or invisible characters, shown above as ␛, ␍ or <U+…>"


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
    ApprovalScreen #approval-reason { color: $text-muted; max-height: 3; }
    ApprovalScreen VerticalScroll { height: auto; max-height: 100%; background: $background; margin: 1 0; }
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
                if req.reason:
                    yield Static(req.reason, id="approval-reason", markup=False)
            with VerticalScroll(id="approval-preview"):
                yield Static(self._preview(), markup=False)
            yield Static(self._keys(), id="approval-keys")

    def _preview(self) -> Group | Text:
        req = self.request
        if req.diff:
            lines = diff_lines(req.diff)
            extra = len(lines) - PREVIEW_LIMIT
            shown = lines[:PREVIEW_LIMIT] + ([Text(f"… {extra} more lines", style="dim")] if extra > 0 else [])
            return Group(*shown)
        if req.command:
            # exactly what will run: every control, bidi or invisible character shown (a \r too)
            text = Text("$ ", style="bold")
            text.append(visible(req.command, line_endings=False), style="bold")
            if req.cwd and req.cwd != ".":
                text.append(f"\nin {visible(req.cwd)}", style="dim")
            if has_unsafe(req.command) or "\r" in req.command:
                text.append(f"\n{HIDDEN_WARNING}", style="bold red")
            return text
        arguments = json.dumps(req.arguments, indent=2, ensure_ascii=False)
        text = Text(arguments[:ARGUMENTS_LIMIT])
        if len(arguments) > ARGUMENTS_LIMIT:
            text.append(f"\n… {len(arguments) - ARGUMENTS_LIMIT} more characters", style="dim")
        return text

    def _keys(self) -> Text:
        options = {o.id for o in self.request.options} or {
            "allow_once",
            "allow_session",
            "allow_always",
            "deny",
            "deny_interrupt",
        }
        rows = [
            ("y", "allow once", "allow_once"),
            ("s", "allow for this session", "allow_session"),
            ("a", f"always allow: {self.rule}", "allow_always"),
            ("n", "deny", "deny"),
            ("esc", "deny and interrupt", "deny_interrupt"),
        ]
        text = Text()
        for key, label, option in rows:
            if option in options:
                if text:
                    text.append("\n")
                text.append(f" {key} ", style="bold reverse")
                text.append(f" {label}")
        return text

    def action_decide(self, decision: str) -> None:
        rule = self.rule if decision == "allow_always" else None
        # the binding's argument is a plain string: checked against ApprovalDecisionKind here
        self.dismiss(ApprovalDecision.model_validate({"decision": decision, "rule": rule}))
