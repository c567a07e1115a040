"""Every notice the app shows, kept whole, and each toast cut to the room it really has, with a
marker saying where the rest is.

The toast rack is at most half the screen (the app's CSS), or the band a dialog leaves free
(``widgets/toast_room.py``), and it clips what does not fit: at 40x20 a long error lost its last
rows without a sign, and toasts past the rack's bottom were not drawn at all. So after each
layout of a screen showing toasts (``watch_toasts``: new toasts, a resize, a dialog or panel
narrowing the rack all end in one), its toasts are planned together against the toasts' real
content width and the rack's real height (``plan_rack``): a message that does not fit shows the
rows that do, then a marker naming the notices key; toasts with no room left are left out, and
the oldest one shown counts them. The whole text of every notice stays in ``NoticeLog``, which
that key opens.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from weakref import WeakKeyDictionary, WeakSet

from textual.content import Content
from textual.css.query import NoMatches
from textual.notifications import Notification
from textual.screen import Screen
from textual.widgets._toast import Toast, ToastHolder, ToastRack


@dataclass(frozen=True)
class Notice:
    """One notice as it was raised, whole."""

    title: str
    message: str
    severity: str
    at: float


#: How many notices a session keeps for the notices dialog (the newest).
NOTICES_KEPT = 1000


class NoticeLog:
    """The notices of this session, oldest first, each whole (a toast may show only its start)."""

    def __init__(self, kept: int = NOTICES_KEPT) -> None:
        self.notices: deque[Notice] = deque(maxlen=kept)
        #: Notices older than the ``kept`` newest, no longer held (the dialog says how many).
        self.dropped = 0
        #: Identities of the notices logged lately, oldest first (a dict keeps their order).
        self._seen: dict[str, None] = {}

    def add(self, notification: Notification) -> None:
        """Log ``notification`` once (Textual hands a message to each class's handler in turn,
        so the app's handler may see the same one twice); markup is logged as its text."""
        if notification.identity in self._seen:
            return
        self._seen[notification.identity] = None
        if len(self._seen) > 2 * (self.notices.maxlen or 0):
            del self._seen[next(iter(self._seen))]
        if len(self.notices) == self.notices.maxlen:
            self.dropped += 1
        text = Content.from_markup(notification.message).plain if notification.markup else notification.message
        self.notices.append(Notice(notification.title, text, notification.severity, notification.raised_at))

    def text(self) -> str:
        """The log as the notices dialog shows it, newest first."""
        if not self.notices:
            return "No notices yet."
        blocks = []
        for notice in reversed(self.notices):
            stamp = time.strftime("%H:%M:%S", time.localtime(notice.at))
            head = f"{stamp} {notice.severity}" + (f" · {notice.title}" if notice.title else "")
            blocks.append(f"{head}\n{notice.message}")
        if self.dropped:
            blocks.append(f"({self.dropped} older notices are no longer kept)")
        return "\n\n".join(blocks)


@dataclass(frozen=True)
class Wrapped:
    """A notification's title and message as its toast wraps them at one width."""

    notification: Notification
    width: int
    title_rows: int
    lines: list[Content]

    @classmethod
    def at(cls, notification: Notification, width: int) -> Wrapped:
        width = max(1, width)
        title_rows = len(Content(notification.title).wrap(width)) if notification.title else 0
        body = Content.from_markup(notification.message) if notification.markup else Content(notification.message)
        return cls(notification, width, title_rows, body.wrap(width))

    @property
    def rows(self) -> int:
        return self.title_rows + len(self.lines)

    def marked_rows(self, marker: str) -> int:
        """The fewest rows it can show in: its title and the marker."""
        return self.title_rows + len(Content(marker).wrap(self.width))

    def fit(self, rows: int, marker: str, *, always: bool = False) -> Notification:
        """Cut to ``rows`` rows (its title counted), the last row(s) the ``marker``; as it is when it
        fits and not ``always``. With room for the marker alone, the marker alone: a toast that
        says it was cut beats one that silently was."""
        if self.rows <= rows and not always:
            return self.notification
        mark = Content(marker).wrap(self.width)
        keep = max(0, rows - self.title_rows - len(mark))
        cut = Content("\n").join([*self.lines[:keep], *mark])
        return replace(self.notification, message=cut.markup, markup=True)


def plan_rack(wrapped: list[Wrapped], rows: int, extra: int, key: str) -> list[Notification | None]:
    """What each toast of a rack shows (``wrapped`` newest first; ``None``: hidden), in ``rows``
    rows, each toast taking ``extra`` rows beyond its text (margin, padding). The newest get
    their rows first; when older ones do not fit at all they are hidden, and the oldest shown one
    says how many (its marker), so a toast that falls off the rack is never silently gone."""
    for shown in range(len(wrapped), 0, -1):
        hidden = len(wrapped) - shown
        plan: list[Notification | None] = []
        left = rows
        for index, toast in enumerate(wrapped[:shown]):
            earlier = hidden if index == shown - 1 else 0
            room = left - extra
            cut = toast.rows > room
            marker = "… " + ", ".join(
                [*(["cut"] if cut else []), *([f"{earlier} earlier"] if earlier else []), f"{key} shows all"]
            )
            need = toast.marked_rows(marker) if cut or earlier else toast.rows
            if room < need and index > 0:
                break
            fitted = toast.fit(max(1, room), marker, always=earlier > 0)
            plan.append(fitted)
            left -= extra + Wrapped.at(fitted, toast.width).rows
        else:
            return plan + [None] * hidden
    return []


def rack_rows(screen: Screen[object], rack: ToastRack) -> int:
    """The rows the rack may take on ``screen`` now: its max-height (half the screen, or the band
    a dialog leaves free) within the screen, less its margins."""
    height = screen.size.height
    limit = rack.styles.max_height
    room = height if limit is None else int(limit.resolve(screen.size, screen.size))
    margin = rack.styles.margin
    return max(0, min(room, height - margin.top - margin.bottom))


#: The racks whose screen's layouts refit their toasts (one subscription each).
_watched: WeakSet[ToastRack] = WeakSet()
#: What each rack was last fitted for (toasts, width, rows, marker), so a layout that changed
#: nothing for it does not wrap its messages again.
_fitted_for: WeakKeyDictionary[ToastRack, tuple[object, ...]] = WeakKeyDictionary()


def watch_toasts(screen: Screen[object]) -> None:
    """Refit ``screen``'s toasts after each of its layouts: the one chokepoint every room change
    goes through (a toast laid out, the screen resized, a dialog or panel narrowing the rack)."""
    try:
        rack = screen.get_child_by_type(ToastRack)
    except NoMatches:
        return
    if rack not in _watched and rack.is_running:
        _watched.add(rack)
        screen.screen_layout_refresh_signal.subscribe(rack, lambda _screen: fit_toasts(screen))


def fit_toasts(screen: Screen[object]) -> None:
    """Fit the laid-out toasts on ``screen`` to the rack's room now (``plan_rack``), from their
    notifications as raised (a toast may already show a cut copy, fitted for another room)."""
    try:
        rack = screen.get_child_by_type(ToastRack)
    except NoMatches:
        return
    whole = {notification.identity: notification for notification in screen.app._notifications}
    toasts = [t for t in reversed(rack.query(Toast)) if t._notification.identity in whole]
    holders = [t.parent if isinstance(t.parent, ToastHolder) else t for t in toasts]
    widths = [t.size.width for t in toasts if t.size.width > 0]
    if not widths:
        # None laid out yet (new, or all left out before): show them, the next layout measures.
        for holder in holders:
            holder.display = True
        return
    width = widths[0]
    from roder_tui.keymap import NOTICES_KEY, display

    key = display(screen.app._keymap.get("notices", NOTICES_KEY))
    rows = rack_rows(screen, rack)
    fitted_for = (tuple(t._notification.identity for t in toasts), width, rows, key)
    if _fitted_for.get(rack) == fitted_for:
        return
    _fitted_for[rack] = fitted_for
    margin, padding = toasts[0].styles.margin, toasts[0].styles.padding
    extra = margin.top + margin.bottom + padding.top + padding.bottom
    plan = plan_rack([Wrapped.at(whole[t._notification.identity], width) for t in toasts], rows, extra, key)
    for toast, holder, fitted in zip(toasts, holders, plan, strict=True):
        holder.display = fitted is not None
        if fitted is not None and (fitted.message, fitted.markup) != (toast._notification.message, toast._notification.markup):
            toast._notification = fitted
            toast.refresh(layout=True)
