"""The keys of a modal list filtered by typing: the ``/model`` and rewind choices, the resume picker.

The screen holds an ``Input`` (the filter) above an ``OptionList``; typing refills the list
(``_fill``), up/down move the highlight from inside the filter, enter or a click chooses (the
screen returns the row's id), esc closes with None.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList


class FilteredListScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Close")]

    def _fill(self, query: str) -> None:
        """Show the rows matching ``query``."""
        raise NotImplementedError  # abstract: every list says what its rows are

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None and options.option_count:
            self.dismiss(options.get_option_at_index(options.highlighted).id)

    def on_key(self, event: events.Key) -> None:
        options = self.query_one(OptionList)
        if event.key in ("up", "down") and options.option_count:
            event.stop()
            current = options.highlighted or 0
            options.highlighted = (current + (1 if event.key == "down" else -1)) % options.option_count

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
