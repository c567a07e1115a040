"""How a team member's status and spend read, in the team bar, a member pane's border and
``/team``: one place, so the marks agree everywhere (and the panes and the bar need not import
each other for them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roder_core.ir import Usage

STATUS_MARKS = {
    "working": "●",
    "waitingApproval": "?",
    "idle": "○",
    "failed": "✗",
    "interrupted": "■",
    "stopped": "-",
}


def tokens(usage: Usage) -> str:
    count = usage.total_tokens
    return f"{count / 1000:.1f}k tok" if count >= 1000 else f"{count} tok"


def usage_text(usage: Usage) -> str:
    return f"{tokens(usage)} · ${usage.cost_usd:.4f}"
