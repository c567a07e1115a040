"""A notice longer than the room toasts have is cut with a marker naming the notices key, and
every notice stays whole in the notices log that key opens: nothing the app says is dropped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.content import Content

from roder_tui.screens.info import InfoScreen
from tests.tui.helpers import make_app, ready, until

WORDS = " ".join(f"word{i:03d}" for i in range(240)) + " END-OF-WORDS"
PATH = "/" + "/".join(f"directory{i:03d}" for i in range(120)) + "/missing-file-END.py"
SHORT = "saved"


def _screen_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def _toasts(app: Any) -> list[Any]:
    from textual.widgets._toast import Toast

    return list(app.screen.query(Toast))


def _fitted(app: Any) -> bool:
    """Every toast on the screen is laid out and shows all of its (possibly cut) text: its
    content's rows match its height."""
    toasts = _toasts(app)
    if not toasts:
        return False
    for toast in [t for t in toasts if _holder_shown(t)]:
        width = toast.size.width
        if width <= 0:
            return False
        if toast.get_content_height(toast.size, toast.size, width) != toast.size.height:
            return False
    return True


def _holder_shown(toast: Any) -> bool:
    return bool(toast.parent.display)


async def _check(app: Any, pilot: Any, messages: dict[str, str], key: str = "f4") -> None:
    """Every toast the rack shows is drawn whole, a cut one ending with the marker; toasts the rack
    has no room for are counted on the oldest one shown; each message as raised is in the log,
    and the notices key shows every message whole."""
    from textual.widgets._toast import ToastRack

    from roder_tui.notices import rack_rows

    marker = re.compile(rf"… (?P<cut>cut, )?(?:(?P<earlier>\d+) earlier, )?{key} shows all$")
    await until(pilot, lambda: len(_toasts(app)) == len(messages) and _fitted(app), what="toasts fitted")
    await pilot.pause()
    rows = rack_rows(app.screen, app.screen.get_child_by_type(ToastRack))
    toasts = _toasts(app)
    shown = [t for t in toasts if _holder_shown(t)]
    hidden = len(toasts) - len(shown)
    assert shown and shown[-1] is toasts[-1]  # the newest is always shown
    assert sum(t.outer_size.height + t.styles.margin.top for t in shown) <= rows
    visible = {w: region.intersection(clip) for w, (region, clip) in app.screen._compositor.visible_widgets.items()}
    drawn_rows = _screen_text(app).splitlines()
    for toast in shown:
        assert visible.get(toast) == toast.region, (toast.region, visible.get(toast))  # drawn whole
        region = toast.region
        drawn = "\n".join(row[region.x : region.right].strip() for row in drawn_rows[region.y : region.bottom])
        title, text = toast._notification.title, toast.render().plain.split("\n", 1)[1]
        whole = messages[title]
        cut = marker.search(text.replace("\n", ""))
        if toast is shown[0] and hidden:
            assert cut and cut["earlier"] == str(hidden), text
        if toast._notification.message == whole:
            continue
        assert cut, text
        assert marker.search(drawn.replace("\n", "")), drawn  # the marker is on the screen
        kept = text.replace("\n", "")[: cut.start()].replace(" ", "")
        if cut["cut"]:
            assert whole.replace(" ", "").startswith(kept)  # its start, in order
        else:
            assert kept == whole.replace(" ", "")  # whole, then the count of earlier ones
    logged = {notice.title: notice.message for notice in app.notices.notices}
    for title, message in messages.items():
        assert logged[title] == message
    before = app.screen
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, InfoScreen), what="the notices dialog")
    text = app.screen.text
    for message in messages.values():
        assert message in text
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is before, what="the notices dialog closed")


SIZES = pytest.mark.parametrize("size", [(40, 20), (60, 24), (120, 40)], ids=["40x20", "60x24", "120x40"])
DIALOG = pytest.mark.parametrize("dialog", [False, True], ids=["main", "dialog"])


async def _open_dialog(app: Any, pilot: Any) -> None:
    """The tasks dialog, which narrows the rack to the rows it leaves free."""
    from roder_tui.screens.tasks import TasksScreen

    await pilot.press("f2")
    await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the tasks dialog")


@SIZES
@DIALOG
@pytest.mark.parametrize("message", [WORDS, PATH], ids=["words", "path"])
async def test_a_long_notice_is_cut_with_a_marker_and_kept_whole(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int], dialog: bool, message: str
) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot)
        if dialog:
            await _open_dialog(app, pilot)
        app.notify(message, title="error", severity="error", timeout=600)
        await _check(app, pilot, {"error": message})
        (toast,) = _toasts(app)
        assert toast._notification.message != message  # too long for any of these sizes


@SIZES
@DIALOG
async def test_several_toasts_at_once_each_kept_whole(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int], dialog: bool
) -> None:
    """Short ones shown as they are, long ones cut, the newest first; those raised before a
    dialog opens are carried onto it and refitted to its smaller room; what the rack cannot
    hold is counted on the oldest toast shown, and is in the log."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot)
        messages = {"one": SHORT, "two": WORDS, "three": PATH, "four": SHORT + " again"}
        app.notify(SHORT, title="one", timeout=600)
        app.notify(WORDS, title="two", severity="warning", timeout=600)
        if dialog:
            await _open_dialog(app, pilot)
        app.notify(PATH, title="three", severity="error", timeout=600)
        app.notify(SHORT + " again", title="four", timeout=600)
        await _check(app, pilot, messages)
        shown = {t._notification.title: t._notification.message for t in _toasts(app) if _holder_shown(t)}
        assert shown["four"].startswith(SHORT + " again")  # the newest, whole
        newest = next(n for n in app._notifications if n.title == "four")
        app._unnotify(newest)  # as when it expires: the room goes to the older ones again
        del messages["four"]
        await _check(app, pilot, messages)
        assert any(t._notification.title == "three" and _holder_shown(t) for t in _toasts(app))


async def test_the_notices_key_follows_a_remap(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remapped, the marker names the key the user chose, and that key opens the log."""
    app = make_app(workspace, None, monkeypatch)
    app._apply_keymap({"notices": "f9"})
    async with app.run_test(size=(40, 20), notifications=True) as pilot:
        await ready(pilot)
        app.notify(PATH, title="error", timeout=600)
        await _check(app, pilot, {"error": PATH}, key="f9")
        assert "… cut, f9 shows all" in _screen_text(app).replace("\n", "")


async def test_a_notice_raised_past_the_apps_notify_is_logged_and_fitted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A widget's ``notify`` and a ``Notify`` message posted directly (as Textual's own parts may)
    reach the same log and the same fitting as the app's ``notify``; markup is logged as text."""
    from textual.notifications import Notification, Notify

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(40, 20), notifications=True) as pilot:
        await ready(pilot)
        app.status_bar.notify(WORDS, title="widget", timeout=600)
        app.post_message(Notify(Notification("[b]bold[/b] " + PATH, title="direct", timeout=600, markup=True)))
        await until(pilot, lambda: len(_toasts(app)) == 2, what="both toasts")
        assert [n.title for n in app.notices.notices] == ["widget", "direct"]  # each once
        await _check(app, pilot, {"widget": WORDS, "direct": "bold " + PATH})


@given(
    texts=st.lists(st.text(alphabet="ab /-é界", max_size=400), min_size=1, max_size=6),
    width=st.integers(5, 80),
    rows=st.integers(3, 30),
)
@settings(max_examples=200, deadline=None)
def test_a_rack_plan_fits_its_rows_and_never_hides_a_notice_silently(texts: list[str], width: int, rows: int) -> None:
    """Whatever the messages, width and rows: the newest toast is always shown; what is shown fits
    the rows (once the newest's title and marker do); a cut toast ends with the marker; and the
    oldest shown toast counts exactly the toasts left out."""
    from textual.notifications import Notification

    from roder_tui.notices import Wrapped, plan_rack

    wrapped = [Wrapped.at(Notification(text, title=f"t{i}"), width) for i, text in enumerate(texts)]
    plan = plan_rack(wrapped, rows, 1, "f4")
    assert len(plan) == len(wrapped) and plan[0] is not None
    shown = [(w, p) for w, p in zip(wrapped, plan, strict=True) if p is not None]
    hidden = len(wrapped) - len(shown)
    assert all(p is None for p in plan[len(shown) :])  # the newest ones are the ones shown
    used = sum(1 + Wrapped.at(p, width).rows for _, p in shown)
    if 1 + wrapped[0].marked_rows("… cut, 9 earlier, f4 shows all") <= rows:
        assert used <= rows, (used, rows)
    for index, (whole, fitted) in enumerate(shown):
        text = Content.from_markup(fitted.message).plain if fitted.markup else fitted.message
        if fitted.message != whole.notification.message:
            flat = text.replace("\n", "").replace(" ", "")  # wrapping drops the spaces it breaks at
            match = re.search(r"…(cut,)?(?:(\d+)earlier,)?f4showsall$", flat)
            assert match, flat
            assert (match[2] or "0") == (str(hidden) if index == len(shown) - 1 else "0")
        else:
            assert not (hidden and index == len(shown) - 1)


def test_the_notice_log_keeps_the_newest_and_says_how_many_went() -> None:
    """A session that runs for weeks on a host keeps a bounded log: the newest notices, and a
    line saying how many older ones are no longer kept; a notice seen twice is logged once."""
    from textual.notifications import Notification

    from roder_tui.notices import NoticeLog

    log = NoticeLog(kept=3)
    notes = [Notification(f"notice {n}", title="", severity="information") for n in range(5)]
    for note in [*notes, notes[-1]]:
        log.add(note)
    assert [n.message for n in log.notices] == ["notice 2", "notice 3", "notice 4"]
    shown = log.text()
    assert shown.index("notice 4") < shown.index("notice 2")
    assert shown.endswith("(2 older notices are no longer kept)")
