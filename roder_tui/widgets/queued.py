"""The pending line above the prompt: steer messages queued for the running turn.

A message typed while a turn runs waits here until the model's next call receives it. ``up`` on
an empty prompt takes the newest one back into the prompt (to edit it, or clear it to drop it);
if the turn ends without delivering them (interrupted, failed), they all return to the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static


@dataclass(frozen=True)
class Queued:
    item_id: str
    text: str


class QueuedSteers(Static):
    DEFAULT_CSS = """
    QueuedSteers { height: auto; max-height: 5; padding: 0 2; color: $text-muted; display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.queued: list[Queued] = []

    def add(self, item_id: str, text: str) -> None:
        """Queue one for display; the same message reported twice (this client's call and the
        host's ``turn/steer/queued`` to every client) shows once."""
        if any(q.item_id == item_id for q in self.queued):
            return
        self.queued.append(Queued(item_id, text))
        self._show()

    def discard(self, item_id: str) -> Queued | None:
        """Forget one (delivered to the model, or taken back); returns it if it was queued."""
        found = next((q for q in self.queued if q.item_id == item_id), None)
        if found is not None:
            self.queued.remove(found)
            self._show()
        return found

    def take_all(self) -> list[Queued]:
        taken, self.queued = self.queued, []
        self._show()
        return taken

    def _show(self) -> None:
        self.display = bool(self.queued)
        text = Text()
        for index, queued in enumerate(self.queued):
            if index:
                text.append("\n")
            text.append("queued ", style="bold")
            text.append(" ".join(queued.text.split())[:200])
        if self.queued:
            text.append("  (↑ on an empty prompt to edit)", style="dim")
        self.update(text)
