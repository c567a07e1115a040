"""Pilot tests of the working-day flows that must work on the first keypress and drop nothing:
a slash command runs on the first enter, history walks past ``@file`` entries, a refused send
keeps the prompt, and the other rough edges of a day in the app."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.helpers import ask, make_app, ready, shown, turn_done, until


def _screen_name(app: object) -> str:
    return type(app.screen).__name__  # type: ignore[attr-defined]


@pytest.mark.parametrize("typed", ["/tools", "/too", "/mc"])
async def test_enter_runs_a_typed_or_uniquely_completed_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, typed: str
) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*typed)
        await until(pilot, lambda: app.prompt_bar.popup_open, what="the completion list")
        await pilot.press("enter")
        await until(pilot, lambda: _screen_name(app) == "InfoScreen", what=f"{typed} to run on the first enter")
        assert app.prompt_bar.input.text == ""
        assert app.screen.title_text == ("/mcp" if typed == "/mc" else "/tools")  # type: ignore[attr-defined]


async def test_enter_on_a_full_name_picks_it_over_longer_names(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/plan`` also prefixes ``/plan-review``: enter runs what was typed, /plan."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"/plan")
        await until(pilot, lambda: app.prompt_bar.popup_open, what="the completion list")
        assert len(app.prompt_bar.popup.items) > 1  # type: ignore[union-attr]
        await pilot.press("enter")
        await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode")


@pytest.mark.parametrize(
    ("shown_for", "rest", "key", "expected"), [("/c", "ost", "enter", "/cost"), ("/m", "ode", "tab", "/mode ")]
)
async def test_keys_that_outrun_the_suggestions_act_on_what_is_typed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, shown_for: str, rest: str, key: str, expected: str
) -> None:
    """In ``roder web`` each key comes in its own message, and enter can reach the prompt before
    the suggestions follow the last letters: ``/cost`` then enter ran ``/co/clear`` (the list
    still held ``/c``'s suggestions and replaced its two letters). Here the letters land and the
    key is handled before the prompt bar has seen them change, as in the browser."""
    from textual import events

    app = make_app(workspace, [{"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 2}}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        await pilot.press(*shown_for)
        await until(pilot, lambda: app.prompt_bar.popup_open, what=f"{shown_for}'s suggestions")
        prompt = app.prompt_bar.input
        prompt.insert(rest)  # its Changed message is not handled yet
        await prompt._on_key(events.Key(key, "\r" if key == "enter" else "\t"))
        if key == "enter":
            await until(pilot, lambda: type(app.screen).__name__ == "InfoScreen", what="/cost's report")
            assert app.screen.title_text == expected  # type: ignore[attr-defined]
            assert prompt.text == ""
        else:
            assert prompt.text == expected
        assert not any("unknown command" in n.message for n in app._notifications)


async def test_enter_on_a_file_completion_only_inserts_it(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "notes.md").write_text("x\n")
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"read @not")
        await until(pilot, lambda: app.prompt_bar.popup_open and app.prompt_bar.popup.items, what="the file list")
        await pilot.press("enter")
        assert app.prompt_bar.input.text == "read @notes.md "
        assert app.thread_id is not None and not app.transcript.model.entries


async def test_history_walks_past_an_entry_ending_in_a_file(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "notes.md").write_text("x\n")
    app = make_app(workspace, [{"text": "one"}, {"text": "two"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        await pilot.press(*"read @notes.md")
        await until(pilot, lambda: app.prompt_bar.popup_open, what="the file list")
        await pilot.press("escape", "enter")
        await turn_done(pilot, 2)
        prompt = app.prompt_bar.input
        await pilot.press(*"my draft")
        for key, expected in (("up", "read @notes.md"), ("up", "first"), ("down", "read @notes.md"), ("down", "my draft")):
            await pilot.press(key)
            await pilot.pause()
            assert prompt.text == expected, key
            assert not app.prompt_bar.popup_open
        await pilot.press("backspace", *"t @no")  # editing again: completion is back
        await until(pilot, lambda: app.prompt_bar.popup_open, what="the file list after an edit")


async def test_a_refused_send_keeps_the_prompt(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path) -> None:
    """An image for a model that cannot see it is refused with the reason; the prompt keeps it."""
    import base64

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    (workspace / "shot.png").write_bytes(base64.b64decode(png))
    (roder_home / "config.toml").write_text('[models."mock/mock"]\nimages = false\n')
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press(*"what is in @shot.png")
        await pilot.press("escape", "enter")
        await until(pilot, lambda: any("does not accept images" in n.message for n in app._notifications), what="the refusal")
        assert app.prompt_bar.input.text == "what is in @shot.png"
        assert not app.transcript.model.entries


async def test_reopening_a_running_turn_keeps_its_elapsed_time(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attached (or reopened) mid-turn, the status bar counts from the turn's start on the host,
    not from the moment the app caught up with it."""
    steps = [{"text": "x" * 400, "chunk_size": 1, "delay_ms": 50}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: app.turn_id is not None, what="the turn")
        runtime = app.client.runtime  # type: ignore[union-attr]
        runtime.threads.find(app.thread_id).runner.turn.started_at -= 14  # the host began it 14 s ago
        assert await app.switch_thread(app.thread_id or "")
        await until(pilot, lambda: app.turn_id is not None, what="the caught-up turn")
        assert (app.status_bar.state.get("elapsed") or 0) >= 14
        await pilot.press("escape")


async def test_retry_toasts_replace_each_other_clear_of_the_prompt(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 40x20 a provider's retries show as one toast (the latest), in the upper half, never
    over the prompt."""
    from roder_core.threads.events import ModelRetrying

    steps = [{"text": "x" * 300, "chunk_size": 1, "delay_ms": 30}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(40, 20), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press(*"hello", "enter")
        await until(pilot, lambda: app.turn_id is not None, what="the turn")
        runtime = app.client.runtime  # type: ignore[union-attr]
        reason = "HTTP 503 from the provider: the service is overloaded right now, try again later"
        for attempt in (1, 2, 3):
            event = ModelRetrying(
                thread_id=app.thread_id, turn_id=app.turn_id, attempt=attempt, max_attempts=4, wait=30.0, reason=reason
            )
            await runtime.emit(event)
        await until(pilot, lambda: any("retry 3 of 4" in n.message for n in app._notifications), what="the third notice")
        await until(
            pilot,
            lambda: [t for t in app.screen.query("Toast") if t.region.height > 0],
            what="the toast drawn",
        )
        await pilot.pause()
        toasts = [t for t in app.screen.query("Toast") if t.region.height > 0]
        assert len([n for n in app._notifications if n.title == "retrying"]) == 1
        assert len(toasts) == 1
        prompt = app.prompt_bar.input.region
        for toast in toasts:
            assert not toast.region.overlaps(prompt) and toast.region.bottom <= 10, toast.region
        await pilot.press("escape")


@pytest.mark.parametrize("size", [(40, 20), (50, 20), (100, 30), (120, 40)])
async def test_the_first_run_screen_fits_every_size(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The key legend is on screen without scrolling, every line of the text is reachable (it
    wraps and scrolls, nothing is cut), and nothing of the app shows around it."""
    from textual.containers import VerticalScroll

    from roder_tui.screens.first_run import FirstRunScreen

    app = make_app(workspace, None, monkeypatch, provider=None)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: shown(app, FirstRunScreen), what="the first-run screen")
        screen = app.screen
        keys = screen.query_one("#first-run-keys")
        await until(pilot, lambda: keys.region.height > 0, what="the screen laid out")
        assert screen.region.contains_region(keys.region) and keys.region.height == 2
        assert "continue with the mock model" in keys.render().plain  # type: ignore[attr-defined]
        text = screen.query_one(VerticalScroll)
        assert screen.region.contains_region(text.region) and not text.region.overlaps(keys.region)
        assert text.virtual_size.width <= text.scrollable_content_region.width  # wrapped, not cut
        assert screen.styles.background.a == 1  # opaque: the sidebar does not show around it
        await pilot.press("enter")
        await ready(pilot)
        assert app.status_bar.state["provider"] == "mock"


async def test_a_remapped_key_the_prompt_also_binds_works_while_typing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path
) -> None:
    (roder_home / "config.toml").write_text('[keys]\ntoggle_sidebar = "f6"\nhelp = "f2"\nnope = "f9"\n')
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press(*"half a thought")
        assert app.focused is app.prompt_bar.input and app.sidebar.display
        await pilot.press("f6")
        assert not app.sidebar.display, "f6 toggles the sidebar while typing"
        assert app.prompt_bar.input.text == "half a thought" and not app.prompt_bar.input.selected_text
        notes = "\n".join(n.message for n in app._notifications if n.title == "keys")
        assert "f6 now runs toggle_sidebar also while typing" in notes
        assert "f2 is bound to both help and tasks" in notes
        assert "nope: no such key binding" in notes


async def test_typing_on_the_focused_transcript_reaches_the_prompt(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "an answer"}], monkeypatch)
    async with app.run_test(size=(50, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        await pilot.click("#transcript")
        entry = app.transcript._entry_widgets()[-1]
        entry.focus()
        await pilot.pause()
        assert app.focused is entry
        await pilot.press(*"why is that")  # y is a message key: the first letter that is not goes on
        await until(pilot, lambda: app.focused is app.prompt_bar.input, what="the prompt to take the focus")
        assert app.prompt_bar.input.text.endswith("hy is that")


async def test_in_a_browser_a_tap_on_the_transcript_keeps_the_prompt_focused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.app import App

    app = make_app(workspace, [{"text": "an answer"}], monkeypatch)
    monkeypatch.setattr(App, "is_web", property(lambda _self: True))
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        entry = app.transcript._entry_widgets()[-1]
        await pilot.click(entry)
        await pilot.pause()
        assert app.focused is app.prompt_bar.input
        await pilot.press(*"more")
        assert app.prompt_bar.input.text == "more"


async def test_rewind_and_resume_tell_rows_apart(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same prompt twice: numbered rows with their age; a pure ``echo`` is not "not
    restorable"; each /undo's fork has its own title; the resume picker marks forks."""
    from roder_tui.screens.choice import ChoiceScreen
    from roder_tui.screens.resume import ResumePicker

    steps = [
        {"text": "Looking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo checking && ls"}}]},
        {"text": "Fixed."},
        {"text": "Again.", "tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "x\n"}}]},
        {"text": "Fixed again."},
    ]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await ask(pilot, "fix it")
        await ask(pilot, "fix it", answers=2)
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), what="the rewind list")
        labels = [label for _id, label in app.screen.choices]  # type: ignore[attr-defined]
        assert len(labels) == 2 and labels[0] != labels[1]
        assert labels[0].startswith("1. fix it") and labels[1].startswith("2. fix it") and "ago" in labels[0]
        first = app.screen
        await pilot.press("down", "up", "enter")  # the first prompt
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen) and app.screen is not first, what="the restore list")
        assert "not restorable" not in app.screen.note  # type: ignore[attr-defined]
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ChoiceScreen), what="the list closed")

        original = app.thread_id
        await app.undo()
        first_fork = app.thread_id
        await app.undo()
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams

        titles = [
            (await app.client.call(THREAD_READ, ThreadReadParams(thread_id=t or ""))).thread.title  # type: ignore[union-attr]
            for t in (original, first_fork, app.thread_id)
        ]
        assert len(set(titles)) == 3, titles
        assert titles[1:] == ["fix it · before 2. “fix it”", "fix it · before 1. “fix it”"]

        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, ResumePicker), what="the resume picker")
        from textual.widgets import OptionList

        shown = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
        assert sum(1 for row in shown if row.startswith("⑂ ") and "fork ·" in row) == 2
        assert sum(1 for row in shown if not row.startswith("⑂ ")) == 1


@pytest.mark.parametrize("how", ["slash", "key"])
async def test_plugin_adds_a_marketplace_in_the_app(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path, tmp_path: Path, how: str
) -> None:
    """``/plugin marketplace add SOURCE``, or typing the source in /plugin and ctrl+o, adds it and
    lists its plugins."""
    from tests.plugins.support import marketplace, write_json

    source = marketplace(tmp_path / "shop", "shop", [{"name": "greeter", "source": "./greeter", "description": "says hello"}])
    write_json(source / "greeter" / ".claude-plugin" / "plugin.json", {"name": "greeter", "description": "says hello"})
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        if how == "slash":
            await app.send(f"/plugin marketplace add {source}")
        else:
            await pilot.press(*"/plugin")
            await pilot.press("escape", "enter")
            await until(pilot, lambda: _screen_name(app) == "PluginScreen", what="/plugin")
            app.screen.query_one("#plugin-filter").value = str(source)  # type: ignore[attr-defined]
            await pilot.press("ctrl+o")
        await until(pilot, lambda: _screen_name(app) == "PluginScreen" and app.screen.results, what="the new catalog's plugins")  # type: ignore[attr-defined]
        assert [r.name for r in app.screen.results] == ["greeter"]  # type: ignore[attr-defined]
        status = str(app.screen.query_one("#plugin-status").render())
        assert "added the marketplace shop: 1 plugin" in status and "plugins" not in status


@pytest.mark.parametrize("pasted", ["x" * 200_000, "".join(f"line number {n}\n" for n in range(1, 10_001))])
async def test_a_long_paste_is_folded_in_the_prompt_and_sent_whole(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, pasted: str
) -> None:
    """A 200,000-character line (or 10,000 lines) pasted into the prompt shows as one placeholder,
    as in Claude Code, so the keys typed after it stay quick; what is sent is the whole paste with
    the words around it. A short paste lands as it is."""
    from textual import events

    from tests.tui.helpers import entries_of

    app = make_app(workspace, [{"text": "got it"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        await pilot.press(*"look: ")
        app.post_message(events.Paste(pasted))  # as the terminal's bracketed paste arrives
        lines = pasted.count("\n") or 1
        placeholder = f"[Pasted text #1: {lines:,} line{'s' if lines > 1 else ''}, {len(pasted):,} characters]"
        await until(pilot, lambda: placeholder in prompt.text, what="the placeholder")
        await pilot.press(*" thanks")
        assert prompt.text == f"look: {placeholder} thanks"
        await pilot.press("enter")
        await turn_done(pilot)
        [sent] = [item.text for e in entries_of(app, "user") for item in e.items]
        assert sent == f"look: {pasted} thanks"
        assert prompt.text == ""
        app.post_message(events.Paste("short paste"))
        await until(pilot, lambda: prompt.text == "short paste", what="the short paste as it is")


async def test_pageup_in_the_prompt_scrolls_the_transcript(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading back with the keyboard needs no focus change: pageup/pagedown typed in the prompt
    scroll the transcript a page (as in Codex), and what is typed next still lands in the prompt."""
    from tests.tui.helpers import write_long_thread

    thread_id = await write_long_thread(workspace, 60)
    app = make_app(workspace, None, monkeypatch, resume=thread_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        transcript, prompt = app.transcript, app.prompt_bar.input
        await until(
            pilot, lambda: transcript.max_scroll_y > 0 and transcript.scroll_y >= transcript.max_scroll_y - 1, what="the end"
        )
        bottom = transcript.scroll_y
        await pilot.press("pageup")
        await until(pilot, lambda: transcript.scroll_y < bottom - 5, what="a page up")
        assert app.focused is prompt
        await pilot.press("pagedown")
        await until(pilot, lambda: transcript.scroll_y >= bottom - 1, what="a page down")
        await pilot.press(*"typed")
        assert prompt.text == "typed"


async def test_ctrl_u_and_ctrl_k_act_on_the_line_as_typed_not_the_wrapped_row(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 40 columns a sentence wraps over several rows; ``ctrl+u`` clears back to its start in
    one press and ``ctrl+k`` to its end (they used to stop at the row's edge)."""
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        sentence = "word " * 30
        await pilot.press(*"first line", "ctrl+j", *sentence)
        await pilot.press("ctrl+u")
        assert prompt.text == "first line\n"
        await pilot.press(*sentence)
        prompt.move_cursor((1, 10))
        await pilot.press("ctrl+k")
        assert prompt.text == "first line\nword word "


async def test_a_folded_paste_brought_back_by_undo_is_sent_whole(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ctrl+z`` after sending brings the prompt's text back, placeholder included: sending it
    again sends the paste, never the placeholder's own words."""
    from textual import events

    from tests.tui.helpers import entries_of

    app = make_app(workspace, [{"text": "got it"}, {"text": "again"}], monkeypatch)
    pasted = "q" * 6_000
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        app.post_message(events.Paste(pasted))
        await until(pilot, lambda: "[Pasted text #1" in prompt.text, what="the placeholder")
        await pilot.press("enter")
        await turn_done(pilot)
        await pilot.press("ctrl+z")
        await until(pilot, lambda: "[Pasted text #1" in prompt.text, what="the text back")
        await pilot.press("enter")
        await until(pilot, lambda: len(entries_of(app, "user")) == 2, what="the second prompt")
        sent = [item.text for e in entries_of(app, "user") for item in e.items]
        assert sent == [pasted, pasted]


async def test_a_folded_paste_with_the_terminals_carriage_returns_is_sent_as_lines(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terminals send a pasted newline as a carriage return (as a typed enter): the text area
    turns them into lines, and so does a folded paste, which says how many lines it holds and
    sends them as the unfolded paste would, never as one line of carriage returns."""
    from textual import events

    from tests.tui.helpers import entries_of

    app = make_app(workspace, [{"text": "got it"}], monkeypatch)
    lines = [f"line number {n}" for n in range(1, 1_001)]
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        prompt = app.prompt_bar.input
        app.post_message(events.Paste("\r".join(lines) + "\r"))
        await until(pilot, lambda: "[Pasted text #1: 1,000 lines" in prompt.text, what="the placeholder with its lines")
        await pilot.press("enter")
        await turn_done(pilot)
        [sent] = [item.text for e in entries_of(app, "user") for item in e.items]
        assert sent.rstrip("\n") == "\n".join(lines)  # (the prompt's trailing blank line is not sent)
