"""The status bar: ``StatusSegment`` services rendered left to right, fitted to the width.

When the segments do not fit, the lowest-priority ones are dropped first, so a 50-column phone
keeps activity, mode and model while a wide terminal also shows context, cost, branch and cwd.
A segment that raises is skipped (and reported once) rather than breaking the bar.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from textual.content import Content
from textual.message import Message
from textual.widgets import Static

if TYPE_CHECKING:
    from roder_core.kernel.services import StatusSegment, StatusView

log = logging.getLogger(__name__)
SEPARATOR = " │ "
NARROW_SEPARATOR = " "


def fit_segments(views: list[StatusView], width: int, separator: str) -> list[StatusView]:
    """Drop lowest-priority views (keeping order) until the bar fits ``width`` cells."""
    kept = list(views)

    def length(rows: list[StatusView]) -> int:
        return sum(len(v.text) for v in rows) + len(separator) * max(len(rows) - 1, 0)

    while kept and length(kept) > width:
        kept.remove(min(kept, key=lambda v: v.priority))
    return kept


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { dock: bottom; height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, segments: list[StatusSegment] | None = None, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.segments: list[StatusSegment] = segments or []
        self.state: dict[str, Any] = {}
        self._failed: set[str] = set()

    def set_segments(self, segments: list[StatusSegment]) -> None:
        self.segments = segments
        self.refresh_bar()

    class Changed(Message):
        """The state changed in ``keys`` (the app's palette lists mode and model rows)."""

        def __init__(self, keys: frozenset[str]) -> None:
            super().__init__()
            self.keys = keys

    def update_state(self, **changes: Any) -> None:
        changed = frozenset(k for k, v in changes.items() if self.state.get(k) != v)
        if not changed:
            return
        self.state.update(changes)
        self.refresh_bar()
        self.post_message(self.Changed(changed))

    def on_resize(self) -> None:
        self.refresh_bar()

    def refresh_bar(self) -> None:
        width = max(self.size.width - 2, 10) if self.size.width else 118
        narrow = width < 78
        state = {**self.state, "narrow": narrow}
        views: list[StatusView] = []
        for segment in self.segments:
            try:
                view = segment.render(state)
            except Exception as exc:
                if segment.id() not in self._failed:
                    self._failed.add(segment.id())
                    log.warning("status segment %s failed: %s", segment.id(), exc)
                continue
            if view is not None and view.text:
                views.append(view)
        separator = NARROW_SEPARATOR if narrow else SEPARATOR
        kept = fit_segments(views, width, separator)
        parts: list[Content | tuple[str, str]] = []
        for index, view in enumerate(kept):
            if index:
                parts.append((separator, "dim"))
            parts.append(Content.styled(view.text, view.style) if view.style else Content(view.text))
        # One row, docked: new text never changes its size, so no layout of the whole screen
        # (the elapsed-seconds counter updates it every second while a turn runs).
        self.update(Content.assemble(*parts), layout=False)
