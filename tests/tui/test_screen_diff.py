"""ScreenDiff: frames reach the terminal without the parts it already shows, and look the same.

The equivalence tests draw the same frames twice in tmux, once as Textual wrote them and once
through the filter, and compare the panes cell by cell, styles included.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from roder_tui.screen_diff import ScreenDiff, merge_styles

DIM = "\x1b[38;5;253;48;5;234m"
BOLD = "\x1b[1;38;5;215;48;5;233m"
RESET = "\x1b[0m"


def _row(row: int, column: int, text: str, style: str = DIM) -> str:
    return f"\x1b[{row};{column}H{style}{text}{RESET}"


class Sink:
    def __init__(self) -> None:
        self.writes: list[str] = []
        self.size = (80, 24)

    def diff(self) -> ScreenDiff:
        return ScreenDiff(self.writes.append, lambda: self.size)


def test_a_repeated_frame_sends_only_what_changed() -> None:
    sink = Sink()
    screen = sink.diff()
    frame = _row(1, 1, "first line") + "\n" + _row(2, 1, "second line") + "\x1b[5;3H"
    screen.write(frame)
    screen.write(_row(1, 1, "first line") + "\n" + _row(2, 1, "second LINE") + "\x1b[5;3H")
    assert "first line" in sink.writes[0] and "second line" in sink.writes[0]
    assert "first line" not in sink.writes[1] and "second LINE" in sink.writes[1]
    assert "\x1b[5;3H" in sink.writes[1], "bare cursor moves are always sent"
    assert screen.skipped > 0


def test_overwritten_cells_and_non_frame_writes_and_resizes_force_a_resend() -> None:
    sink = Sink()
    screen = sink.diff()
    base = _row(3, 1, "a status line that stays")
    screen.write(base)
    screen.write(_row(3, 10, "popup", BOLD))  # drawn over part of it
    screen.write(base)
    assert "stays" in sink.writes[-1], "cells under the popup changed, so the line goes out again"
    screen.write(base)
    assert "stays" not in "".join(sink.writes[3:]), "now it is on screen as sent"
    screen.write("\x1b[?2026h")  # synchronized output changes no cell
    screen.write(base)
    assert "stays" not in "".join(sink.writes[3:])
    screen.write("\x1b[?1049h")  # the alternate screen again (after a suspend): start over
    screen.write(base)
    assert "stays" in sink.writes[-1]
    sink.size = (100, 30)
    screen.write(base)
    assert "stays" in sink.writes[-1], "a resize forgets everything"


def test_merge_styles_drops_only_resets_followed_by_the_same_style() -> None:
    same = _row(1, 1, "ab") + _row(2, 1, "cd")
    assert merge_styles(same) == f"\x1b[1;1H{DIM}ab\x1b[2;1Hcd{RESET}"
    other = _row(1, 1, "ab") + _row(1, 3, "cd", BOLD) + "plain"
    assert merge_styles(other) == f"\x1b[1;1H{DIM}ab\x1b[1;3H\x1b[0;1;38;5;215;48;5;233mcd{RESET}plain"


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _frames() -> list[str]:
    """A scrolling transcript, a popup over it and its removal, a status bar: Textual's shapes."""
    lines = [f"line {n}: the runtime folds every event into thread state" for n in range(40)]
    frames = []
    for top in (0, 0, 3, 3, 6, 9, 9):  # some frames scroll, some repeat (text grows below)
        rows = []
        for y in range(1, 11):
            rows.append(_row(y, 1, " ", "\x1b[48;5;233m") + _row(y, 2, lines[top + y].ljust(60)[:60]))
            rows.append(_row(y, 62, "▐", "\x1b[38;5;75;48;5;233m"))
        rows.append(_row(12, 1, f" ● working {top}s │ ask ".ljust(70), BOLD))
        frames.append("\n".join(rows) + "\x1b[11;5H")
        if top == 3:
            frames.append(_row(5, 20, "╭ popup ╮", BOLD) + "\n" + _row(6, 20, "│ wide 漢字 │", BOLD))
    return frames


def _pane(socket: str, data: Path) -> str:
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "s", "-x", "80", "-y", "14", f"cat {data}; sleep 30"],
        check=True,
        timeout=10,
    )
    try:
        previous = None
        for _ in range(100):  # until the pane stops changing (cat is done at once)
            shown = subprocess.run(
                ["tmux", "-L", socket, "capture-pane", "-p", "-e", "-t", "s"], capture_output=True, text=True, check=True
            ).stdout
            if shown == previous and "line" in shown:
                return shown
            previous = shown
            subprocess.run(["tmux", "-L", socket, "wait-for", "-S", "nothing"], timeout=10)  # a round trip
        return previous or ""
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)


@needs_tmux
def test_tmux_shows_the_same_cells_with_and_without_the_filter(tmp_path: Path) -> None:
    frames = _frames()
    sink = Sink()
    screen = sink.diff()
    for frame in frames:
        screen.write(frame)
    raw, filtered = tmp_path / "raw.bytes", tmp_path / "filtered.bytes"
    raw.write_text("\x1b[2J" + "".join(frames), encoding="utf-8")
    filtered.write_text("\x1b[2J" + "".join(sink.writes), encoding="utf-8")
    assert filtered.stat().st_size < raw.stat().st_size * 0.8
    tag = uuid.uuid4().hex[:8]
    assert _pane(f"diff-raw-{tag}", raw) == _pane(f"diff-filtered-{tag}", filtered)
