"""The resume picker (``roder -r`` without an id, ctrl+r): this folder's threads, filterable."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from roder_core.ir import ThreadSummary
from roder_tui.screens.filtered_list import FilteredListScreen
from roder_tui.widgets.sidebar import age
from roder_tui.wording import plural


class ResumePicker(FilteredListScreen):
    DEFAULT_CSS = """
    ResumePicker { align: center middle; }
    ResumePicker > Vertical {
        width: 100%; max-width: 100; height: 100%; max-height: 30;
        background: $surface; border: round $primary; padding: 0 1;
    }
    ResumePicker OptionList { height: 1fr; border: none; }
    ResumePicker #resume-empty { color: $text-muted; }
    """

    def __init__(self, threads: list[ThreadSummary]) -> None:
        super().__init__()
        self.threads = threads

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Resume a thread · enter to open, esc to close"
            yield Input(placeholder="filter by title or id", id="resume-filter")
            if not self.threads:
                yield Static("No earlier threads in this folder.", id="resume-empty")
            yield OptionList(id="resume-list")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one(Input).focus()

    def _fill(self, query: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        now = time.time()
        q = query.lower()
        for t in self.threads:
            if q and q not in (t.title or "").lower() and q not in t.id:
                continue
            title = (t.title or "untitled").replace("[", r"\[")
            fork = "⑂ " if t.parent is not None else ""  # a fork (a rewind's, an /undo's) is marked
            meta = (
                f"{'fork · ' if fork else ''}{age(now - t.updated_at)} ago · {plural(t.turn_count, 'turn')} · {t.model} · {t.id}"
            )
            options.add_option(Option(f"{fork}{title}\n[dim]{meta}[/dim]", id=t.id))
        if options.option_count:
            options.highlighted = 0
