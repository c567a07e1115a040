"""Pilot tests of daily-use flows beyond the listed ones, each as a user meets them: files with
spaces and brackets in their paths, long single-line output, a long pasted prompt, diffs at 40
columns, a queued message naming a file, copying a mouse selection, and a long ``!cmd``."""

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


@pytest.mark.parametrize(
    ("pasted", "hint"),
    [
        ("\n".join(f"pasted line {n}" for n in range(2000)), "… 1988 more lines (enter to expand)"),
        ("x" * 100_000, "… 99400 more characters"),
    ],
)
async def test_a_long_pasted_prompt_is_folded_in_the_transcript(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, pasted: str, hint: str
) -> None:
    """A 2,000-line paste (or one 100,000-character line) is sent whole but shown folded to its
    start, so the answer stays on the screen; enter on the message shows all of it."""
    app = make_app(workspace, [{"text": "ANSWER-SHOWN"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+l")
        app.prompt_bar.input.insert(pasted)
        await pilot.press("enter")
        await turn_done(pilot)
        [user] = entries_of(app, "user")
        assert user.items[0].text == pasted  # the model got all of it
        await pilot.pause()
        shown = painted(user.widget)
        assert len(shown.splitlines()) <= 20
        assert hint in shown
        user.widget.focus()
        await pilot.press("enter")
        await until(pilot, lambda: user.widget.size.height > 100, what="the whole prompt when expanded")
        assert hint not in painted(user.widget)
        assert user.widget.copy_text() == pasted  # y copies the whole prompt


async def test_a_long_changed_line_wraps_under_its_code_at_40_columns(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the approval dialog and on the card, a changed line too long for 40 columns goes on
    under the code, not under the line number, so the number column stays readable."""
    from roder_tui.screens.approval import ApprovalScreen

    (workspace / "notes.txt").write_text("line1\nline2\nline3\n")
    longer = "line two, a much longer replacement that needs wrapping at forty columns 你好世界 🎉 WRAPPED-END"
    steps = [
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "old_string": "line2", "new_string": longer}}]},
        {"text": "Edited."},
    ]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press(*"edit it", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        what = app.screen.query_one("#approval-what")
        await until(pilot, lambda: what.region.width > 0, what="the diff drawn")
        assert_hanging(painted(what), "   2 + line two")
        await pilot.press("y")
        await turn_done(pilot)
        [card] = [e for e in app.transcript.model.entries if e.kind == "tool"]
        await pilot.pause()
        assert_hanging(painted(card.widget), "   2 + line two")


def assert_hanging(shown: str, first: str) -> None:
    """The row starting with ``first`` goes on, to WRAPPED-END, in rows indented to its code."""
    rows = [row.replace("▌", " ").replace("│", " ").rstrip() for row in shown.splitlines()]
    start = next(i for i, row in enumerate(rows) if row.lstrip().startswith(first.lstrip()))
    indent = rows[start].index(first.lstrip()) + len("2 + ")
    end = next(i for i, row in enumerate(rows) if "WRAPPED-END" in row)
    assert end > start + 1, rows
    for row in rows[start + 1 : end + 1]:
        assert row[:indent].strip() == "" and row[indent] != " ", (row, rows)


async def test_a_queued_message_attaches_the_files_it_names(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``@notes.md`` typed while a turn runs is attached when the model takes the message, as in
    a prompt (the queued message went as text only, the file silently left out)."""
    (workspace / "notes.md").write_text("QUEUED-NOTES\n")
    wait = "until [ -f go ]; do sleep 0.05; done"  # the call runs until the test says go
    steps = [{"text": "Waiting.", "tool_calls": [{"name": "bash", "arguments": {"command": wait}}]}, {"text": "Read them."}]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: bool(entries_of(app, "tool")), what="the call to run")
        await pilot.press(*"also read @notes.md ", "enter")  # the space ends the mention: no completion open
        await until(pilot, lambda: app.queued.display, what="the queued line")
        (workspace / "go").write_text("")
        await turn_done(pilot, 2)
        steer = entries_of(app, "user")[-1].items[0]
        assert steer.steer and steer.text == "also read @notes.md"
        assert [(a.name, a.text) for a in steer.attachments] == [("notes.md", "QUEUED-NOTES\n")]
        assert "+ notes.md" in painted(entries_of(app, "user")[-1].widget)


async def test_ctrl_c_copies_text_selected_in_the_transcript(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text dragged over in the transcript is copied by ctrl+c, as in any Textual app (ctrl+c
    only offered to quit, and a second press did)."""
    app = make_app(workspace, [{"text": "An **answer** paragraph.\n\n```sh\nmake COPY-CODE\n```"}], monkeypatch)
    copied: list[str] = []
    monkeypatch.setattr("roder_tui.clipboard.copy_text", lambda _app, text: copied.append(text) or "clipboard")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"SELECT-THIS prompt text", "enter")
        await turn_done(pilot)
        [user] = entries_of(app, "user")
        await pilot.mouse_down(user.widget, offset=(2, 0))
        await pilot.hover(user.widget, offset=(13, 0))
        await pilot.mouse_up(user.widget, offset=(13, 0))
        await until(pilot, lambda: bool(app.screen.get_selected_text()), what="a selection")
        await pilot.press("ctrl+c")
        assert [text.strip() for text in copied] == ["SELECT-THIS"]
        # An answer is drawn by Rich (no character positions): a drag selects its blocks whole.
        answer = app.transcript.last_answer()
        assert answer is not None and answer.widget is not None
        await pilot.mouse_down(answer.widget, offset=(3, 0))
        await pilot.hover(answer.widget, offset=(5, 3))
        await pilot.mouse_up(answer.widget, offset=(5, 3))
        await until(pilot, lambda: bool(app.screen.get_selected_text()), what="a selection in the answer")
        await pilot.press("ctrl+c")
        assert copied[1] == "An **answer** paragraph.\n\nmake COPY-CODE"
        await pilot.press("ctrl+c")  # the selection is gone: this is the first press towards quitting
        await pilot.pause()
        assert app.is_running


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
async def test_a_running_shell_command_shows_and_stops(workspace: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """``!cmd`` shows its card at once, running (nothing showed until it ended, the status bar
    said idle, and no key stopped it); esc or ctrl+c stops it, and its process ends."""
    import os

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"!echo $$ > pid; until [ -f go ]; do sleep 0.05; done", "enter")
        await until(
            pilot, lambda: (workspace / "pid").exists() and (workspace / "pid").read_text().strip() != "", what="the command"
        )
        [card] = [e for e in app.transcript.model.entries if e.kind == "tool"]
        assert card.status == "running"
        await pilot.press(key)
        await until(pilot, lambda: card.status == "error", what="the card to end")
        assert "stopped" in painted(card.widget)
        pid = int((workspace / "pid").read_text())

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False

        await until(pilot, gone, what="the command's process to end")
        assert app.is_running and app.prompt_bar.input.text == ""


async def test_a_burst_typed_at_the_transcript_lands_whole_in_the_prompt(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys that arrive together while the transcript has the focus all reach the prompt: the
    first takes the focus there at once, so a ``k`` or ``j`` behind it is typed, not taken as
    transcript navigation (``look`` arrived as ``loo``)."""
    from textual import events

    app = make_app(workspace, [{"text": "An answer."}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"first", "enter")
        await turn_done(pilot)
        await pilot.press("ctrl+t")
        await until(pilot, lambda: app.focused is not None and app.focused is not app.prompt_bar.input, what="the transcript")
        for character in "look jk":
            app.post_message(events.Key("space" if character == " " else character, character))
        await until(
            pilot, lambda: app.prompt_bar.input.text == "look jk", what=f"the burst in the prompt: {app.prompt_bar.input.text!r}"
        )
