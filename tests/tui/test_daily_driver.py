"""Pilot tests of issue 16's defects: model switching, terminal tool states, queued steers, the
view following a new prompt, ctrl+c, the approval dialog with a long diff, and the rough edges."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from roder_core.brokers import host_programs
from roder_core.server.protocol import THREAD_START, ThreadStartParams
from tests.tui.helpers import ask, help_shown, make_app, palette, ready, turn_done, until


def _is_choice(screen: object) -> bool:
    """The picker screen (by name: the tests also run against code from before it existed)."""
    return type(screen).__name__ == "ChoiceScreen"


def _runtime(app: object) -> object:
    return app.client.runtime  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- 1. model switching


async def test_slash_model_switches_the_open_thread(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}, {"text": "two"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        assert app.status_bar.state["context_window"] == 128_000
        await pilot.press(*"/model mock/mock-large")
        await pilot.press("escape")  # close the completion list
        await pilot.press("enter")
        await until(pilot, lambda: app.status_bar.state.get("model") == "mock-large", what="the status bar")
        await ask(pilot, "second", answers=2)
        thread = _runtime(app).thread(app.thread_id)  # type: ignore[attr-defined]
        assert (thread.provider, thread.model) == ("mock", "mock-large")
        # The window reported by the turn is the one of the model that actually answered.
        assert app.status_bar.state["context_window"] == 1_000_000


async def test_palette_model_switches_the_open_thread(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}, {"text": "two"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        await palette(pilot, "Model: mock/mock-large")
        await until(
            pilot,
            lambda: _runtime(app).thread(app.thread_id).model == "mock-large",  # type: ignore[attr-defined]
            what="the open thread to switch",
        )
        await ask(pilot, "second", answers=2)
        assert app.status_bar.state["model"] == "mock-large"
        assert app.status_bar.state["context_window"] == 1_000_000


async def test_slash_model_without_argument_opens_a_picker(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"/model")
        await pilot.press("escape")
        await pilot.press("enter")
        await until(pilot, lambda: _is_choice(app.screen), what="the model picker")
        await pilot.press(*"large", "enter")
        await until(
            pilot,
            lambda: _runtime(app).thread(app.thread_id).model == "mock-large",  # type: ignore[attr-defined]
            what="the open thread to switch",
        )
        assert app.status_bar.state["model"] == "mock-large"


# --------------------------------------------------------------------------- 3. terminal states


def _no_card_animates(app: object) -> bool:
    from roder_tui.widgets.messages import ToolCardView

    return all(card._timer is None for card in app.query(ToolCardView))  # type: ignore[attr-defined]


SLEEP_STEPS = [{"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}]


async def _reopened(workspace: Path, thread_id: str, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The thread's tool cards and notices as a fresh app shows them after ``roder -r``."""
    again = make_app(workspace, None, monkeypatch, resume=thread_id)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert again.thread_id == thread_id
        assert _no_card_animates(again)
        return [(e.kind, e.status, e.items[0]) for e in again.transcript.model.entries if e.kind in ("tool", "notice")]


async def test_denied_call_ends_denied_live_and_after_resume(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.approval import ApprovalScreen

    app = make_app(
        workspace, [{"text": "Let me.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}], monkeypatch
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        await pilot.press("escape")  # deny and interrupt
        await until(pilot, lambda: app.turn_id is None and app.status_bar.state.get("activity") == "idle", what="the turn to end")
        card = next(e for e in app.transcript.model.entries if e.kind == "tool")
        assert card.status == "denied"
        await until(pilot, lambda: _no_card_animates(app), what="the spinner to stop")
        assert app.transcript.model.entries[-1].items[0].kind == "interrupted"  # the marker ends the turn
        stored = app.client.runtime.thread(app.thread_id)  # type: ignore[union-attr]
        result = next(i for i in stored.items() if i.type == "toolResult")
        assert result.is_error
        assert result.data["policy_denied"]
        thread_id = app.thread_id
    shown = await _reopened(workspace, thread_id, monkeypatch)  # type: ignore[arg-type]
    assert [(kind, status) for kind, status, _ in shown] == [("tool", "denied"), ("notice", "done")]
    assert shown[-1][2].kind == "interrupted"  # type: ignore[attr-defined]


async def test_interrupted_call_ends_interrupted_live_and_after_resume(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, SLEEP_STEPS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(
            pilot,
            lambda: any(e.kind == "tool" and e.status == "running" for e in app.transcript.model.entries),
            what="the command to run",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.turn_id is None, what="the turn to stop")
        card = next(e for e in app.transcript.model.entries if e.kind == "tool")
        await until(pilot, lambda: card.status == "interrupted", what="the card to say interrupted")
        await until(pilot, lambda: _no_card_animates(app), what="the spinner to stop")
        assert "[interrupted]" in card.widget._render_item().renderables[0].plain  # type: ignore[union-attr]
        thread_id = app.thread_id
    shown = await _reopened(workspace, thread_id, monkeypatch)  # type: ignore[arg-type]
    assert [(kind, status) for kind, status, _ in shown] == [("tool", "interrupted"), ("notice", "done")]


async def test_quitting_mid_call_leaves_a_terminal_state(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, SLEEP_STEPS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(
            pilot,
            lambda: any(e.kind == "tool" and e.status == "running" for e in app.transcript.model.entries),
            what="the command to run",
        )
        thread_id = app.thread_id
        await pilot.press("ctrl+q")
    shown = await _reopened(workspace, thread_id, monkeypatch)  # type: ignore[arg-type]
    assert shown
    assert shown[0][:2] == ("tool", "interrupted")


async def test_a_card_left_without_result_by_a_crash_is_not_running(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread written by a process that was killed mid-call (no terminal state saved)."""
    from roder_core.ir import ToolCallItem, UserMessageItem, new_id
    from roder_core.runtime.bootstrap import StartSettings
    from roder_core.server.client import LocalAppClient
    from roder_core.threads.events import ItemCompleted, TurnStarted

    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock"))
    try:
        thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
        turn_id = new_id("turn")
        await client.runtime.emit(TurnStarted(thread_id=thread.id, turn_id=turn_id))
        await client.runtime.emit(ItemCompleted(thread_id=thread.id, turn_id=turn_id, item=UserMessageItem(text="go")))
        await client.runtime.emit(
            ItemCompleted(
                thread_id=thread.id, turn_id=turn_id, item=ToolCallItem(call_id="c1", name="bash", arguments={"command": "x"})
            )
        )
    finally:
        await client.close()  # no turn runner ever finishes that turn, as after a crash
    shown = await _reopened(workspace, thread.id, monkeypatch)
    assert [(kind, status) for kind, status, _ in shown] == [("tool", "interrupted"), ("notice", "done")]


# --------------------------------------------------------------------------- 5. queued steers

LONG_STREAM = [{"text": "word " * 3000, "chunk_size": 5, "delay_ms": 20}, {"text": "Fresh answer."}]


async def test_queued_steer_is_shown_and_returns_to_the_prompt_on_interrupt(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(workspace, LONG_STREAM, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: app.transcript.last_answer() is not None, what="the answer to stream")
        await pilot.press(*"also check tests", "enter")
        await until(pilot, lambda: app.queued.display, what="the pending line")
        assert "also check tests" in app.queued.render().plain  # type: ignore[attr-defined]
        await pilot.press("escape")
        await until(pilot, lambda: app.turn_id is None, what="the turn to stop")
        assert app.prompt_bar.input.text == "also check tests"
        assert not app.queued.display
        app.prompt_bar.input.text = ""
        await ask(pilot, "unrelated", answers=2)
        users = [e.items[0] for e in app.transcript.model.entries if e.kind == "user"]
        assert [u.text for u in users] == ["start", "unrelated"]  # the steer never joined the next turn


async def test_up_takes_a_queued_steer_back_to_edit(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, LONG_STREAM, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: app.turn_id is not None, what="the turn to start")
        await pilot.press(*"typo here", "enter")
        await until(pilot, lambda: app.queued.display, what="the pending line")
        await pilot.press("up")
        await until(pilot, lambda: app.prompt_bar.input.text == "typo here", what="the steer back in the prompt")
        assert not app.queued.display
        state = app.client.runtime.threads.get(app.thread_id)  # type: ignore[union-attr]
        assert state.steers == []  # taken back from the runtime, not just hidden
        await pilot.press("escape")
        await until(pilot, lambda: app.turn_id is None, what="the turn to stop")


# --------------------------------------------------------------------------- 2. the view follows a new prompt


@pytest.mark.parametrize("how", ["home", "pageup"])
async def test_sending_while_scrolled_up_follows_the_new_turn(workspace: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    from tests.tui.helpers import write_long_thread

    thread_id = await write_long_thread(workspace, 200)
    app = make_app(workspace, [{"text": "The fresh answer."}], monkeypatch, resume=thread_id)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        transcript = app.transcript
        await pilot.press("ctrl+t")
        for _ in range(3):
            await pilot.press(how)
        await until(pilot, lambda: transcript.scroll_y < transcript.max_scroll_y - 10, what="the view to scroll up")
        await pilot.press("ctrl+l", *"new question", "enter")
        await until(
            pilot,
            lambda: app.turn_id is None and transcript.last_answer().items[0].text == "The fresh answer.",
            what="the answer",
        )
        await pilot.pause()
        question = [e for e in transcript.model.entries if e.kind == "user"][-1]
        assert question.items[0].text == "new question"
        answer = transcript.last_answer()
        assert question.widget is not None
        assert answer.widget is not None
        await until(pilot, lambda: transcript.is_vertical_scroll_end, what="the view at the new turn")


# --------------------------------------------------------------------------- 6. ctrl+c


async def test_ctrl_c_interrupts_a_turn_then_clears_then_quits(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, LONG_STREAM, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: app.transcript.last_answer() is not None, what="the answer to stream")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.turn_id is None, what="the turn to stop")
        stored = app.client.runtime.thread(app.thread_id)  # type: ignore[union-attr]
        assert stored.turns[-1].status == "interrupted"
        assert app.is_running
        await pilot.press(*"draft")
        await pilot.press("ctrl+c")
        assert app.prompt_bar.input.text == ""
        assert app.is_running
        await pilot.press("ctrl+c")
        assert app.is_running  # one press on an empty prompt only warns
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, what="the app to quit")
    assert app.return_code == 0
    assert app.exit_message is None


async def test_quitting_mid_turn_says_how_to_resume(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, LONG_STREAM, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: app.transcript.last_answer() is not None, what="the answer to stream")
        await pilot.press("ctrl+q")
    assert app.exit_message is not None
    assert "roder -c" in app.exit_message


# --------------------------------------------------------------------------- 4. approval dialog with a long diff


def long_write_steps() -> list[dict[str, object]]:
    content = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(60))
    return [{"text": "Writing it.", "tool_calls": [{"name": "write", "arguments": {"path": "notes.txt", "content": content}}]}]


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (50, 24), (40, 20)])
async def test_long_diff_keeps_keys_and_rule_visible(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    from textual.containers import VerticalScroll

    from roder_tui.screens.approval import ApprovalScreen

    app = make_app(workspace, long_write_steps(), monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press(*"write notes", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        screen = app.screen
        await until(
            pilot,
            lambda: bool(screen.query("#approval-keys")) and screen.query_one("#approval-keys").region.height > 0,
            what="the dialog laid out",
        )
        keys = screen.query_one("#approval-keys")
        visible = screen.region
        title = screen.query_one("#approval-title")
        assert visible.contains_region(title.region) and not title.region.overlaps(  # type: ignore[attr-defined]
            screen.query_one("#approval-reason").region
        )
        assert keys.region.height >= 5 and visible.contains_region(keys.region), (keys.region, visible)
        legend = " ".join(" ".join(strip.text.split()) for strip in keys.render_lines(keys.region.reset_offset))
        assert "notes.txt" in screen.rule
        assert f"always allow: {screen.rule}" in legend  # type: ignore[attr-defined]
        preview = screen.query_one(VerticalScroll)
        assert visible.contains_region(preview.region)
        assert preview.max_scroll_y > 0  # scrolls inside
        await pilot.press("y")
        await until(pilot, lambda: (workspace / "notes.txt").exists(), what="the write")


# --------------------------------------------------------------------------- rewind, undo, redo

TWO_TURNS = [
    {"text": "Creating it.", "tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
    {"text": "Created."},
    {
        "text": "Changing it.",
        "tool_calls": [
            {"name": "write", "arguments": {"path": "a.txt", "content": "two\n"}},
            {"name": "bash", "arguments": {"command": "echo made-by-bash > b.txt"}},
        ],
    },
    {"text": "Changed."},
]


async def _two_turns(pilot: object, app: object, workspace: Path) -> None:
    await ready(pilot)
    await ask(pilot, "make a", answers=1)
    await ask(pilot, "change a", answers=2)
    assert (workspace / "a.txt").read_text() == "two\n"
    assert (workspace / "b.txt").exists()


async def _rewind(pilot: object, app: object, how: str, *, keys: str = "escape") -> None:
    """Open the rewind list (esc esc or the palette), pick the second prompt, then ``how``."""
    if keys == "escape":
        await pilot.press("escape", "escape")  # type: ignore[attr-defined]
    else:
        await palette(pilot, "Rewind")
    await until(pilot, lambda: _is_choice(app.screen), what="the rewind list")  # type: ignore[attr-defined]
    first = app.screen  # type: ignore[attr-defined]
    await pilot.press(*"change a", "enter")  # type: ignore[attr-defined]
    await until(
        pilot,
        lambda: _is_choice(app.screen) and app.screen is not first,  # type: ignore[attr-defined]
        what="the restore choices",
    )
    assert "not restorable (shell): $ echo made-by-bash > b.txt" in app.screen.note  # type: ignore[attr-defined]
    await pilot.press(*how, "enter")  # type: ignore[attr-defined]


def _prompts(app: object) -> list[str]:
    return [e.items[0].text for e in app.transcript.model.entries if e.kind == "user"]  # type: ignore[attr-defined]


async def test_rewind_restores_code_and_conversation(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, TWO_TURNS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await _two_turns(pilot, app, workspace)
        original = app.thread_id
        await _rewind(pilot, app, "code and")
        await until(pilot, lambda: app.thread_id != original, what="the fork")
        await until(pilot, lambda: app.prompt_bar.input.text == "change a", what="the prompt back to edit")
        assert (workspace / "a.txt").read_text() == "one\n"
        assert _prompts(app) == ["make a"]
        thread = app.client.runtime.thread(app.thread_id)  # type: ignore[union-attr]
        assert thread.parent is not None
        assert thread.parent.thread_id == original
        assert (workspace / "b.txt").exists()  # bash's change: named as not restorable, left alone
        info = app.screen
        assert "not restorable" in info.query_one("Static").render().plain  # type: ignore[attr-defined]


async def test_rewind_restores_the_conversation_only(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, TWO_TURNS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await _two_turns(pilot, app, workspace)
        original = app.thread_id
        await _rewind(pilot, app, "conversation (fork", keys="palette")
        await until(pilot, lambda: app.thread_id != original, what="the fork")
        await until(pilot, lambda: app.prompt_bar.input.text == "change a", what="the prompt back to edit")
        assert _prompts(app) == ["make a"]
        assert (workspace / "a.txt").read_text() == "two\n"  # the code is untouched


async def test_rewind_restores_the_code_only(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, TWO_TURNS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await _two_turns(pilot, app, workspace)
        original = app.thread_id
        await _rewind(pilot, app, "code (revert")
        await until(pilot, lambda: (workspace / "a.txt").read_text() == "one\n", what="the code restored")
        assert app.thread_id == original
        assert _prompts(app) == ["make a", "change a"]


async def test_undo_then_redo(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, TWO_TURNS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await _two_turns(pilot, app, workspace)
        original = app.thread_id
        await pilot.press(*"/undo")
        await pilot.press("escape", "enter")
        await until(pilot, lambda: app.thread_id != original, what="the undo")
        assert (workspace / "a.txt").read_text() == "one\n"
        assert _prompts(app) == ["make a"]
        assert "echo made-by-bash" in app.screen.query_one("Static").render().plain  # type: ignore[attr-defined]
        await pilot.press("escape")  # the note naming what bash changed
        app.prompt_bar.input.text = ""
        await pilot.press(*"/redo")
        await pilot.press("escape", "enter")
        await until(pilot, lambda: app.thread_id == original, what="the redo")
        assert (workspace / "a.txt").read_text() == "two\n"
        assert _prompts(app) == ["make a", "change a"]


async def test_fork_at_a_focused_message(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, TWO_TURNS, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await _two_turns(pilot, app, workspace)
        original = app.thread_id
        first_answer = next(e for e in app.transcript.model.entries if e.kind == "assistant")
        first_answer.widget.focus()  # type: ignore[union-attr]
        await pilot.press("f")
        await until(pilot, lambda: app.thread_id != original, what="the fork")
        assert _prompts(app) == ["make a"]  # forked after the focused answer's turn


# --------------------------------------------------------------------------- 7. collapsed cards


def _card_text(entry: object) -> str:
    rendered = entry.widget._render_item()  # type: ignore[attr-defined]
    return "\n".join(r.plain for r in rendered.renderables)


async def test_collapsed_cards_show_the_change_and_the_output_tail(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    new = "".join(f"line {n}\n" if n != 7 else "line seven\n" for n in range(1, 11))
    steps = [
        {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
        {
            "text": "Editing.",
            "tool_calls": [
                {"name": "write", "arguments": {"path": "a.txt", "content": new}},
                {"name": "bash", "arguments": {"command": "seq 1 30"}},
            ],
        },
        {"text": "Done."},
    ]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "edit and count")
        _read, edit, bash = [e for e in app.transcript.model.entries if e.kind == "tool"]
        shown = _card_text(edit)
        assert "   7 - line 7" in shown
        assert "   7 + line seven" in shown
        assert "---" not in shown
        assert "+++" not in shown
        assert "@@" not in shown
        output = _card_text(bash).splitlines()
        assert output[1] == "$ seq 1 30"
        assert output[-4:] == ["27", "28", "29", "30"]
        assert "earlier lines" in output[2]


# --------------------------------------------------------------------------- 9. external editor


async def test_ctrl_g_edits_the_prompt_in_the_editor(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    editor = tmp_path / "fake-editor"
    editor.write_text('#!/bin/sh\nprintf "%s\\nsecond line from the editor\\n" "$(cat "$1")" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    app = make_app(workspace, [{"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"first line")
        await pilot.press("ctrl+g")
        await until(pilot, lambda: "second line" in app.prompt_bar.input.text, what="the edited prompt")
        assert app.prompt_bar.input.text == "first line\nsecond line from the editor"


def _fake_editor(folder: Path, name: str) -> Path:
    """An editor (shell builtins only: PATH may hold nothing else) that writes where it lives into the file."""
    folder.mkdir(parents=True, exist_ok=True)
    editor = folder / name
    editor.write_text(f'#!/bin/sh\nprintf "%s\\n" "written by {editor}" > "$1"\n')
    editor.chmod(0o755)
    return editor


def _system_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> Path:
    """A stand-in for the system's program folders holding only ``names``, so the test means the
    same on a machine with ``/usr/bin/vi`` and on one without."""
    folder = tmp_path / "system-bin"
    folder.mkdir()
    for name in names:
        _fake_editor(folder, name)
    monkeypatch.setattr(host_programs, "SYSTEM_FOLDERS", (str(folder),))
    return folder


@pytest.mark.parametrize("installed", [("editor", "vi"), ("vi",)])
async def test_ctrl_g_without_an_editor_set_falls_back_as_git_does(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, installed: tuple[str, ...]
) -> None:
    """With no $VISUAL/$EDITOR ctrl+g opens ``editor`` if installed, else ``vi``, as git does,
    and names the one it opened: the system's copy, never one a workspace folder on the PATH
    holds (it runs outside any sandbox, as Roder's git does)."""
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    system = _system_folder(tmp_path, monkeypatch, installed)
    planted = workspace / "bin"
    for name in ("editor", "vi"):
        _fake_editor(planted, name)
    app = make_app(workspace, [{"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        monkeypatch.setenv("PATH", f"{planted}:{os.environ.get('PATH', '')}")  # after the start
        await pilot.press(*"draft", "ctrl+g")
        await until(pilot, lambda: "written by" in app.prompt_bar.input.text, what="the edited prompt")
        chosen = system / installed[0]
        assert app.prompt_bar.input.text == f"written by {chosen}"
        notices = [n.message for n in app._notifications]
        assert f"opened {chosen}: $VISUAL and $EDITOR are unset (set one to choose your editor)" in notices


async def test_ctrl_g_falls_back_to_the_path_where_the_system_folders_hold_no_editor(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A system that keeps programs elsewhere (NixOS): the editor is found through the PATH."""
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    _system_folder(tmp_path, monkeypatch, ())
    elsewhere = _fake_editor(tmp_path / "profile-bin", "vi")
    app = make_app(workspace, [{"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        monkeypatch.setenv("PATH", str(elsewhere.parent))
        await pilot.press(*"draft", "ctrl+g")
        await until(pilot, lambda: "written by" in app.prompt_bar.input.text, what="the edited prompt")
        assert app.prompt_bar.input.text == f"written by {elsewhere}"


async def test_ctrl_g_with_no_editor_at_all_says_so(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    _system_folder(tmp_path, monkeypatch, ())
    app = make_app(workspace, [{"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        await pilot.press(*"keep me", "ctrl+g")
        expected = "no editor: $VISUAL and $EDITOR are unset and neither editor nor vi is installed"
        await until(pilot, lambda: any(n.message == expected for n in app._notifications), what="the notice")
        assert app.prompt_bar.input.text == "keep me"


async def test_ctrl_g_in_a_browser_says_it_needs_a_terminal(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `roder web` the editor would read the page's pipe: refused, the prompt kept."""
    monkeypatch.setenv("VISUAL", "vi")
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    app = make_app(workspace, [{"text": "ok"}], monkeypatch)  # run_test still drives it headless
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"keep me", "ctrl+g")
        await until(pilot, lambda: any("needs a terminal" in n.message for n in app._notifications), what="the refusal")
        assert app.prompt_bar.input.text == "keep me"


# --------------------------------------------------------------------------- 8. smaller defects


async def test_history_walk_keeps_the_draft(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await ask(pilot, "sent before")
        await pilot.press(*"half-typed draft", "up")
        assert app.prompt_bar.input.text == "sent before"
        await pilot.press("down")
        assert app.prompt_bar.input.text == "half-typed draft"


async def test_toasts_leave_the_prompt_and_completion_visible(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press("/")
        await until(pilot, lambda: app.prompt_bar.popup_open, what="the completion list")
        app.notify("a long notification that would cover whatever is under it", timeout=30)
        await until(
            pilot,
            lambda: bool(app.screen.query("Toast")) and app.screen.query("Toast").first().region.height > 0,
            what="the toast",
        )
        toast = app.screen.query("Toast").first().region
        assert not toast.overlaps(app.prompt_bar.input.region)
        assert not toast.overlaps(app.prompt_bar.popup.region)  # type: ignore[union-attr]


async def test_help_shows_remapped_keys(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text('[keys]\ntoggle_sidebar = "ctrl+e"\n')
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        rows = [line.text for line in app.panels[1].lines(96) if "sidebar (threads" in line.text]
        assert rows
        assert "ctrl+e" in rows[0]
        assert "ctrl+b" not in rows[0]


async def test_status_bar_keeps_the_model_during_an_approval_at_40_columns(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roder_tui.screens.approval import ApprovalScreen

    steps = [{"text": "Run.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        app.status_bar.update_state(model="claude-sonnet-4-5")  # a real model name's length
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        await until(pilot, lambda: "approve?" in str(app.status_bar.render()), what="the status")
        shown = str(app.status_bar.render())
        assert "claude-sonnet-4-5" in shown
        assert "ask" in shown


async def test_sidebar_is_proportional_and_resizable(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(200, 40)) as pilot:
        await ready(pilot)
        wide = app.sidebar.outer_size.width
        assert wide > 34
        await pilot.press("alt+left")
        await pilot.pause()
        assert app.sidebar.outer_size.width == wide - 4
        await pilot.press("alt+right", "alt+right")
        await pilot.pause()
        assert app.sidebar.outer_size.width == wide + 4


async def test_fork_is_marked_and_tree_labels_fit(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "a rather long first prompt that makes a title much wider than the sidebar is")
        original = app.thread_id
        await pilot.press(*"/fork")
        await pilot.press("escape", "enter")
        await until(pilot, lambda: app.thread_id != original, what="the fork")
        tree = app.sidebar.fork_tree
        await until(
            pilot,
            lambda: tree is not None and len(tree.root.children) == 1 and len(tree.root.children[0].children) == 1,
            what="the fork tree",
        )
        fork_node = tree.root.children[0].children[0]  # type: ignore[union-attr]
        assert "⑂" in str(fork_node.label)
        width = tree.size.width  # type: ignore[union-attr]
        assert all(len(str(n.label)) + 4 * depth <= width for depth, n in ((0, tree.root.children[0]), (1, fork_node)))
        assert not tree.show_horizontal_scrollbar  # type: ignore[union-attr]
        rows = [
            str(app.sidebar.thread_list.get_option_at_index(i).prompt)  # type: ignore[union-attr]
            for i in range(app.sidebar.thread_list.option_count)
        ]  # type: ignore[union-attr]
        assert any("⑂" in r for r in rows)


async def test_sidebar_ages_refresh(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import roder_tui.widgets.sidebar as sidebar

    monkeypatch.setattr(sidebar, "AGE_REFRESH_SECONDS", 0.05)
    app = make_app(workspace, [{"text": "one"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hello")
        await until(
            pilot, lambda: app.sidebar.thread_list is not None and app.sidebar.thread_list.option_count, what="the thread row"
        )
        later = sidebar.clock() + 7200
        monkeypatch.setattr(sidebar, "clock", lambda: later)
        await until(
            pilot,
            lambda: "2h" in str(app.sidebar.thread_list.get_option_at_index(0).prompt),  # type: ignore[union-attr]
            what="the age to be redrawn",
        )


async def test_tool_duration_leaves_out_the_approval_wait(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import roder_core.turn.runner as turn_module
    from roder_tui.screens.approval import ApprovalScreen

    offset = [0.0]
    real = turn_module.time.monotonic

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return real() + offset[0]

    monkeypatch.setattr(turn_module, "time", Clock)
    steps = [{"text": "Run.", "tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}, {"text": "ok"}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        offset[0] = 600.0  # the person took ten minutes to answer
        await pilot.press("y")
        await turn_done(pilot)
        card = next(e for e in app.transcript.model.entries if e.kind == "tool")
        assert card.find("toolResult").duration_ms < 60_000


async def test_palette_never_offers_a_blank_model(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from extensions.roder_ext_tui.palette import ModelsSource

    state = {
        "providers": [{"id": "ollama", "name": "Ollama", "default_model": "", "auth_configured": True}],
        "models": [],
        "thread_id": "thr_1",
    }
    rows = await ModelsSource().commands(state)
    assert [r.help for r in rows] == ["pick a model of ollama"]
    assert rows[0].method == "tui/model/pick"
    assert not any(r.help.rstrip().endswith("with") for r in rows)


async def test_singular_counts(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.resume import ResumePicker

    app = make_app(workspace, [{"reasoning": "Hmm.", "text": "one"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hi")
        thought = next(e for e in app.transcript.model.entries if e.kind == "reasoning")
        assert "1 word " in thought.widget._render_item().plain  # type: ignore[union-attr]
        await pilot.press("ctrl+r")
        from textual.widgets import OptionList

        await until(pilot, lambda: isinstance(app.screen, ResumePicker), what="the picker")
        await until(
            pilot,
            lambda: bool(app.screen.query(OptionList)) and app.screen.query_one(OptionList).option_count > 0,
            what="the picker's threads",
        )
        options = app.screen.query_one(OptionList)
        assert "1 turn ·" in str(options.get_option_at_index(0).prompt)


async def test_resumed_thread_shows_the_context_window(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one", "usage": {"input_tokens": 1000, "output_tokens": 10}}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hi")
    again = make_app(workspace, None, monkeypatch, continue_last=True)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert again.status_bar.state["context_tokens"] == 1010
        assert again.status_bar.state["context_window"] == 128_000
        assert "/128.0k" in str(again.status_bar.render())


async def test_a_new_thread_shows_a_hint(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        placeholder = app.prompt_bar.input.placeholder
        assert "F1" in str(placeholder)
        assert "ctrl+p" in str(placeholder)


MISPLACED_KEY = """[providers.fk]
dialect = "chat-completions"
base_url = "http://127.0.0.1:9/v1"
models = ["m1"]
theme = "roder-light"
"""


async def test_a_config_mistake_is_one_clear_line(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(MISPLACED_KEY)
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        lines = [n.message for n in app._notifications if "[providers.fk]" in n.message]
        assert len(lines) == 1
        assert "theme" in lines[0]
        assert "TOML" in lines[0]


async def test_an_unavailable_provider_exits_with_the_reason(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path
) -> None:
    (roder_home / "config.toml").write_text(MISPLACED_KEY)
    app = make_app(workspace, None, monkeypatch, provider="fk")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.return_value == 2
    message = app.exit_message or ""
    assert message.startswith("roder: unknown provider 'fk'")
    assert "[providers.fk] theme" in message
    assert "\n" not in message


PARAGRAPHS = "\n\n".join(f"Paragraph {n} says something about step {n}." for n in range(1, 13)) + "\n"


def _gaps(answer: object) -> list[int]:
    from roder_tui.widgets.markdown_stream import ProseBlock

    blocks = [c for c in answer.widget.body.children if isinstance(c, ProseBlock)]  # type: ignore[attr-defined]
    return [b.region.y - a.region.bottom for a, b in itertools.pairwise(blocks)]


async def test_paragraphs_keep_their_blank_line_across_segments(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": PARAGRAPHS, "chunk_size": 7}], monkeypatch)
    async with app.run_test(size=(100, 80)) as pilot:
        await ready(pilot)
        await ask(pilot, "explain")
        await pilot.pause(0.2)
        live = _gaps(app.transcript.last_answer())
        assert live
        assert all(gap == 1 for gap in live)  # one blank line, as inside a block
        thread_id = app.thread_id
    again = make_app(workspace, None, monkeypatch, resume=thread_id)
    async with again.run_test(size=(100, 80)) as pilot:
        await ready(pilot)
        await pilot.pause(0.2)
        assert _gaps(again.transcript.last_answer()) == live


async def test_shell_cards_survive_switching_threads(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "one"}], monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        await pilot.press(*"!echo hi-from-shell", "enter")
        await until(
            pilot,
            lambda: any(e.find("commandExecution") and e.status == "done" for e in app.transcript.model.entries),
            what="the shell card",
        )
        first = app.thread_id
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.thread_id != first, what="a new thread")
        await app.switch_thread(first)  # type: ignore[arg-type]
        await pilot.pause()
        kinds = [(e.kind, e.items[0].type) for e in app.transcript.model.entries]
        assert kinds[-1] == ("tool", "commandExecution")
        assert "hi-from-shell" in app.transcript.model.entries[-1].items[0].output
