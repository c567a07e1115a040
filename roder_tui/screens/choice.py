"""A filterable list to choose one row from: the ``/model`` picker and the rewind screens use it.

Rows are ``(id, label)``; the screen returns the chosen id, or None on esc. Typing filters the
rows; up/down move; enter chooses.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from roder_tui.screens.filtered_list import FilteredListScreen


class ChoiceScreen(FilteredListScreen):
    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical {
        width: 100%; max-width: 100; height: auto; max-height: 100%;
        background: $surface; border: round $primary; padding: 0 1;
    }
    ChoiceScreen OptionList { height: auto; max-height: 24; border: none; }
    ChoiceScreen #choice-empty { color: $text-muted; }
    ChoiceScreen #choice-note { color: $warning; max-height: 8; }
    """

    def __init__(
        self,
        title: str,
        rows: list[tuple[str, str]],
        *,
        empty: str = "nothing to choose from",
        highlight: str | None = None,
        placeholder: str = "type to filter",
        note: str = "",
    ) -> None:
        super().__init__()
        self.note = note
        self.title_text = title
        self.choices = rows
        self.empty = empty
        self.initial = highlight
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = f"{self.title_text} · enter to choose, esc to close"
            if self.note:
                yield Static(self.note, id="choice-note", markup=False)
            yield Input(placeholder=self.placeholder, id="choice-filter")
            if not self.choices:
                yield Static(self.empty, id="choice-empty", markup=False)
            yield OptionList(id="choice-list")

    def on_mount(self) -> None:
        self._fill("")
        options = self.query_one(OptionList)
        for index, (row_id, _) in enumerate(self._shown):
            if row_id == self.initial:
                options.highlighted = index
        self.query_one(Input).focus()

    def _fill(self, query: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        q = query.lower()
        self._shown = [(i, label) for i, label in self.choices if not q or q in label.lower() or q in i.lower()]
        for row_id, label in self._shown:
            options.add_option(Option(label.replace("[", r"\["), id=row_id))
        if options.option_count:
            options.highlighted = len(self._shown) - 1 if self.initial == "@last" else 0
