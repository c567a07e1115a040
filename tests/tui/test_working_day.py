"""Pilot tests of daily-use flows beyond the listed ones: files with spaces and brackets in their
paths, long single-line output, long pasted prompts and narrow diffs, each as a user meets them."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget

from tests.tui.helpers import entries_of, make_app, ready, turn_done, until


async def test_a_completed_path_with_spaces_is_attached(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The completion writes a spaced path quoted, and the quoted mention attaches the file (a
    bare ``@src/my dir/...`` was inserted and then silently not attached)."""
    (workspace / "src" / "my dir").mkdir(parents=True)
    (workspace / "src" / "my dir" / "notes one.md").write_text("SPACED = 1\n")
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"read @notes")
        popup = app.prompt_bar.popup
        await until(pilot, lambda: popup is not None and popup.display and popup.items, what="file suggestions")
        assert popup is not None
        assert popup.items[0].value == '@"src/my dir/notes one.md" '
        await pilot.press("tab")
        assert app.prompt_bar.input.text == 'read @"src/my dir/notes one.md" '
        await pilot.press(*'and @"src/my', "enter")  # typing a quoted path completes it too
        assert app.prompt_bar.input.text == 'read @"src/my dir/notes one.md" and @"src/my dir/notes one.md" '
        await pilot.press("enter")
        await turn_done(pilot)
        user = entries_of(app, "user")[0].items[0]
        assert [(a.name, a.text) for a in user.attachments] == [("notes one.md", "SPACED = 1\n")]


async def test_completion_rows_show_brackets_as_text(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route folder (``app/[id]``) and a command's argument hint (``[instructions]``) are shown
    as typed, not read as markup and dropped."""
    (workspace / "app" / "[id]").mkdir(parents=True)
    (workspace / "app" / "[id]" / "page.tsx").write_text("export default 1\n")
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"@page")
        popup = app.prompt_bar.popup
        await until(pilot, lambda: popup is not None and popup.display and popup.items, what="file suggestions")
        assert popup is not None
        await pilot.pause()
        assert "@app/[id]/page.tsx" in painted(popup)
        await pilot.press("ctrl+u", *"/compact")
        await until(pilot, lambda: popup.display and popup.items[0].value == "/compact ", what="/compact offered")
        await pilot.pause()
        assert "/compact [instructions]  summarize" in painted(popup)


def painted(widget: Widget) -> str:
    """The widget's rows as drawn."""
    return "\n".join(line.text for line in widget.render_lines(Region(0, 0, widget.outer_size.width, widget.outer_size.height)))


async def test_a_long_output_line_takes_one_row_until_expanded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3,000-character line in a collapsed card is one row ending in "…" (it filled 75 rows at
    40 columns); expanded, it is shown whole."""
    command = "printf 'Z%.0s' $(seq 3000); echo; echo tail"
    steps = [
        {"text": "Printing.", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "Done."},
    ]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press(*"print it", "enter")
        await turn_done(pilot)
        [card] = [e for e in app.transcript.model.entries if e.kind == "tool"]
        await pilot.pause()
        rows = painted(card.widget).splitlines()
        assert len(rows) <= 6, rows
        assert any(row.rstrip().endswith("Z…") for row in rows), rows
        assert rows[-1].split() == ["▌", "tail"]
        card.widget.focus()
        await pilot.press("enter")
        await until(pilot, lambda: card.widget.size.height > 70, what="the whole line when expanded")
        whole = painted(card.widget).splitlines()
        assert sum(row.count("Z") for row in whole if set(row[2:].strip()) == {"Z"}) == 3000
