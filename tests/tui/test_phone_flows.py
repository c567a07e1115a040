"""A developer on a phone over SSH: 40x20 and 60x24, keys only. What an answer holds is on
screen somewhere, whole or with a marker saying how to see the rest."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.geometry import Region

from tests.tui.helpers import ask, make_app, ready, until

CELLS = [
    ["name", "description", "owner", "status", "notes"],
    *[[f"row{i}", f"a fairly long description of row {i}", f"someone{i}@example.org", "active", f"ENDCOL{i}"] for i in range(3)],
]
TABLE = "\n".join(
    ["| " + " | ".join(CELLS[0]) + " |", "|" + "---|" * len(CELLS[0])] + ["| " + " | ".join(row) + " |" for row in CELLS[1:]]
)


@pytest.mark.parametrize("size", [(40, 20), (60, 24)])
async def test_a_wide_table_is_folded_whole_into_a_narrow_transcript(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A table wider than the screen: every cell's every character is drawn (a word wider than
    its column folds onto the next row), none is cut with "…"."""
    from roder_tui.widgets.markdown_stream import ProseBlock

    app = make_app(workspace, [{"text": "The owners:\n\n" + TABLE + "\n\nTABLE-END"}], monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await ask(pilot, "who owns what")
        answer = app.transcript.last_answer()
        assert answer is not None
        [block] = [b for b in answer.widget.body.children if isinstance(b, ProseBlock) and "|" in b.source]  # type: ignore[attr-defined]
        rows = [strip.text for strip in block.render_lines(Region(0, 0, block.size.width, block.size.height))]
    drawn = "\n".join(rows)
    assert "…" not in drawn, drawn
    assert max(len(row.rstrip()) for row in rows) <= size[0]
    table = drawn[drawn.index("The owners:") + len("The owners:") : drawn.index("TABLE-END")]
    expected = Counter("".join("".join(row) for row in CELLS).replace(" ", ""))
    assert Counter(table.replace(" ", "").replace("\n", "").replace("─", "")) == expected, drawn


async def test_a_file_written_after_the_first_completion_is_offered(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``@`` lists the workspace again for each new mention: a file the model, a ``!`` command or
    another terminal wrote since the last ``@`` can be completed and attached, deep in the tree."""
    deep = workspace / "services" / "authentication" / "providers" / "oauth2" / "handlers"
    deep.mkdir(parents=True)
    (deep / "session_store.py").write_text("x\n")
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        bar = app.prompt_bar

        def offered() -> list[str]:
            return [item.value for item in bar.popup.items] if bar.popup_open and bar.popup is not None else []

        await pilot.press(*"see @session_st")
        await until(pilot, lambda: any("session_store.py" in v for v in offered()), what="the first file offered")
        await pilot.press("ctrl+u")
        (deep / "refresh_token_handler.py").write_text("y\n")
        await pilot.press(*"see @refresh_tok")
        await until(pilot, lambda: any("refresh_token_handler.py" in v for v in offered()), what="the new file offered")
        await pilot.press("enter")
        assert "@services/authentication/providers/oauth2/handlers/refresh_token_handler.py" in app.prompt_bar.input.text


@pytest.mark.parametrize("size", [(40, 20), (60, 24)])
async def test_home_and_end_focus_the_first_and_last_message_for_y_to_copy(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """Keys only: ``ctrl+t``, ``home``, ``y`` copies the first message; ``pagedown`` then ``end``,
    ``y`` copies the last. The key never lands in the prompt as text."""
    from tests.tui.helpers import write_long_thread

    thread_id = await write_long_thread(workspace, 12)
    app = make_app(workspace, None, monkeypatch, resume=thread_id)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        transcript = app.transcript
        await pilot.press("ctrl+t", "home")
        await until(pilot, lambda: transcript.focused_entry() is transcript.model.entries[0], what="the first message focused")
        await pilot.press("y")
        assert copied == ["question 0: what does step 0 do?"]
        await pilot.press("pagedown", "pagedown", "end")
        await until(pilot, lambda: transcript.focused_entry() is transcript.model.entries[-1], what="the last message focused")
        await pilot.press("y")
        assert copied[-1].startswith("Answer 5.")
        assert app.prompt_bar.input.text == ""
        await pilot.press("k", "enter")  # still walking the messages
        assert transcript.focused_entry() is transcript.model.entries[-2]


@pytest.mark.parametrize("size", [(40, 20), (60, 24), (120, 40)])
async def test_the_prompts_hints_are_whole_and_name_f1_at_every_width(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The empty prompt's hints fit its width, each whole (never cut at the edge), and "F1 keys",
    the way to every other key, is among them however narrow."""
    from roder_tui.widgets.prompt import PLACEHOLDER

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        await until(pilot, lambda: "F1 keys" in prompt.render_line(0).text, what="the hints fitted to the prompt")
        shown = prompt.render_line(0).text.strip()
        width = prompt.content_size.width
    assert len(shown) < width
    assert all(hint in PLACEHOLDER.split(" · ") for hint in shown.split(" · ")), shown
    assert shown.startswith("Ask anything")


async def test_a_folded_paste_is_sent_whole_after_the_screen_turns(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A phone turned between a huge paste and enter (40x20 to 60x24 and back): what is sent is
    the whole paste, never its placeholder."""
    from textual import events

    from tests.tui.helpers import entries_of, turn_done

    pasted = "".join(f"line {n}: lorem ipsum dolor\n" for n in range(3000))
    app = make_app(workspace, [{"text": "got it"}], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        await pilot.press(*"sum: ")
        app.post_message(events.Paste(pasted))
        await until(pilot, lambda: "[Pasted text #1" in prompt.text, what="the placeholder")
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        await pilot.resize_terminal(40, 20)
        await pilot.pause()
        await pilot.press(*" thanks", "enter")
        await turn_done(pilot)
        [sent] = [item.text for e in entries_of(app, "user") for item in e.items]
    assert sent == f"sum: {pasted} thanks"


@pytest.mark.parametrize(
    ("typed", "written", "json_format"),
    [
        ("/export exports/deep/dir/out.md", "exports/deep/dir/out.md", False),
        ("/export logs/today.json", "logs/today.json", True),
        ("/export json my notes/thread", "my notes/thread", True),
        ("/export md", None, False),
    ],
    ids=["a-path-alone", "a-json-path", "a-format-and-a-path-with-a-space", "a-format-alone"],
)
async def test_export_writes_where_it_is_told(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, typed: str, written: str | None, json_format: bool
) -> None:
    """``/export PATH`` writes to PATH (it used to take the path for a format and write
    ``roder-THREAD.md`` instead, saying so only in a toast); the format follows the suffix or
    the word before the path."""
    import json

    from tests.tui.helpers import turn_done

    app = make_app(workspace, [{"text": "EXPORTED-ANSWER"}], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press(*"hello", "enter")
        await turn_done(pilot)
        await pilot.press(*typed, "enter")
        target = workspace / (written or f"roder-{app.thread_id}.md")
        await until(pilot, target.exists, what=f"the export to {target}")
    text = target.read_text()
    if json_format:
        assert "EXPORTED-ANSWER" in json.loads(text)["turns"][0]["items"][-1]["text"]
    else:
        assert "EXPORTED-ANSWER" in text and not text.lstrip().startswith("{")
    assert [p.name for p in workspace.glob("roder-*")] == ([] if written else [target.name])


@pytest.mark.parametrize("size", [(40, 20), (60, 24)])
async def test_an_unknown_command_is_one_short_notice_drawn_whole(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A mistyped ``/command`` names the closest commands and how to list them all, in a notice
    a narrow screen draws whole (it listed every command, forty user commands included, and lost
    its last rows there)."""
    (roder_home / "commands").mkdir()
    for n in range(40):
        (roder_home / "commands" / f"team-runbook-{n}.md").write_text("Follow the runbook.\n")
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot)
        await pilot.press(*"/compcat")
        await pilot.press("enter")
        await until(pilot, lambda: [t for t in app.screen.query("Toast") if t.region.height > 0], what="the notice")
        [message] = [n.message for n in app._notifications if "unknown command" in n.message]
        assert "/compact" in message and "/help" in message and "runbook" not in message
        toast = next(t for t in app.screen.query("Toast") if t.region.height > 0)
        box = toast.region
        drawn = " ".join(strip.text.replace("▌", "") for strip in toast.render_lines(Region(0, 0, box.width, box.height)))
    assert " ".join(message.split()) in " ".join(drawn.split()), drawn
