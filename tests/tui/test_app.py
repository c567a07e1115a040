"""Pilot tests of the app: every interaction drives the real runtime through the in-process client."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from roder_core.ir import UserMessageItem
from roder_core.server.protocol import SESSION_GET, THREAD_READ, SessionGetParams, ThreadReadParams
from roder_tui.screens.approval import ApprovalScreen
from roder_tui.screens.first_run import FirstRunScreen
from roder_tui.screens.resume import ResumePicker
from roder_tui.widgets.markdown_stream import CodeView, ProseBlock
from roder_tui.widgets.messages import ReasoningView, ToolCardView
from tests.tui.helpers import ask, entries_of, help_shown, make_app, palette, palette_searched, ready, shown, turn_done, until

BASH_STEPS = [
    {"text": "Let me check.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi-from-bash"}}]},
    {"text": "The command printed hi-from-bash."},
]


async def test_prompt_streams_an_answer(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "Hello **there**.\n\n```python\nprint(1)\n```\n\nBye.", "chunk_size": 5}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "hi")
        user = entries_of(app, "user")
        assert [e.items[0].text for e in user] == ["hi"]
        answer = app.transcript.last_answer()
        assert answer is not None
        assert answer.items[0].text.startswith("Hello **there**.")
        body = answer.widget.body  # type: ignore[union-attr]
        await until(
            pilot,
            lambda: any(isinstance(c, CodeView) and c.styled is not None for c in body.children),
            what="the closed fence to be highlighted",
        )
        kinds = [type(c).__name__ for c in body.children]
        assert kinds == ["ProseBlock", "CodeView", "ProseBlock"]  # one final render, no live widget left
        code = next(c for c in body.children if isinstance(c, CodeView))
        assert code.code.strip() == "print(1)"
        assert app.status_bar.state["activity"] == "idle"


async def test_approval_modal_allow_once_runs_the_command(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, BASH_STEPS, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"run it", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        screen = app.screen
        assert isinstance(screen, ApprovalScreen)
        assert screen.request.tool == "bash"
        assert screen.request.command == "echo hi-from-bash"
        assert "bash(echo hi-from-bash)" in screen.rule  # the exact rule 'a' would save is shown
        await pilot.press("y")
        await turn_done(pilot)
        card = entries_of(app, "tool")[0]
        result = card.find("toolResult")
        assert result is not None
        assert not result.is_error
        assert "hi-from-bash" in result.text
        assert card.status == "done"


@pytest.mark.parametrize(("key", "decision"), [("n", "deny"), ("s", "allow_session"), ("a", "allow_always")])
async def test_approval_keys(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path, key: str, decision: str) -> None:
    app = make_app(workspace, BASH_STEPS, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        await pilot.press(key)
        await turn_done(pilot)
        card = entries_of(app, "tool")[0]
        approval = card.find("approval")
        assert approval is not None
        assert approval.decision is not None
        assert approval.decision.decision == decision
        result = card.find("toolResult")
        assert result is not None
        assert result.is_error is (decision == "deny")
    if decision == "allow_always":
        config = tomllib.loads((roder_home / "config.toml").read_text())
        assert "bash(echo hi-from-bash)" in config["policy"]["allow"]


async def test_escape_in_approval_denies_and_interrupts(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, BASH_STEPS, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        await pilot.press("escape")
        await until(pilot, lambda: app.turn_id is None and app.status_bar.state.get("activity") == "idle", what="the turn to end")
        thread = (await app._client().call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id, include_turns=True))).thread  # type: ignore[arg-type]
        assert thread.turns[-1].status == "interrupted"


async def test_escape_interrupts_a_running_turn(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stream that takes minutes: however slowly the machine answers the key, the turn is
    # still running when escape arrives, so it can only end by the interrupt.
    answer_text = "word " * 10_000
    app = make_app(workspace, [{"text": answer_text, "chunk_size": 5, "delay_ms": 20}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"long", "enter")
        # Escape once the answer is on screen: a loaded machine may start the turn long before
        # the first delta arrives, and the test is about cutting a stream that is showing.
        await until(pilot, lambda: app.transcript.last_answer() is not None, what="the answer to start streaming")
        await pilot.press("escape")
        await until(pilot, lambda: app.turn_id is None, what="the turn to stop")
        thread = (await app._client().call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id, include_turns=True))).thread  # type: ignore[arg-type]
        assert thread.turns[-1].status == "interrupted"
        answer = app.transcript.last_answer()
        assert answer is not None
        assert not answer.live
        assert len(answer.items[0].text) < len(answer_text)


async def test_enter_during_a_turn_queues_a_steer(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [
        {
            "text": "Working on it.",
            "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}],
            "delay_ms": 150,
            "chunk_size": 2,
        },
        {"text": "Done, and I saw your note."},
    ]
    (workspace / "notes.txt").write_text("some notes\n")
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"start", "enter")
        await until(pilot, lambda: app.turn_id is not None, what="the turn to start")
        app.prompt_bar.input.text = "also check tests"
        await pilot.press("enter")
        await turn_done(pilot, 2)
        users = [e.items[0] for e in entries_of(app, "user")]
        assert [u.text for u in users] == ["start", "also check tests"]
        assert isinstance(users[1], UserMessageItem)
        assert users[1].steer


async def test_shift_tab_cycles_modes(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.status_bar.state["mode"] == "ask"
        seen = []
        for _ in range(4):
            await pilot.press("shift+tab")
            await pilot.pause()
            seen.append(app.status_bar.state["mode"])
        assert seen == ["auto-edit", "bypass", "plan", "ask"]
        session = await app._client().call(SESSION_GET, SessionGetParams())
        assert session.mode == "ask"


async def test_sidebar_toggle_and_narrow_layout(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.sidebar.display
        await pilot.press("ctrl+b")
        assert not app.sidebar.display
        await pilot.press("ctrl+b")
        assert app.sidebar.display
        await pilot.resize_terminal(50, 20)
        await pilot.pause()
        assert not app.sidebar.display  # hidden automatically below 80 columns
        assert len(app.status_bar.render().plain) <= 50
        await pilot.press("ctrl+b")  # still reachable on a phone
        assert app.sidebar.display


async def test_help_screen_lists_every_key(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.keymap import KEYS

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await until(pilot, lambda: help_shown(app), what="the help panel")
        text = " ".join(_help_text().split())  # a long description wraps within its column
        for key in KEYS:
            assert " ".join(key.description.split()) in text, key.description
        await pilot.press("escape")
        assert not help_shown(app)
        await pilot.press("ctrl+t", "question_mark")  # ? works outside the prompt
        await until(pilot, lambda: help_shown(app), what="the help panel")


def _help_text() -> str:
    import io

    from rich.console import Console

    from roder_tui.widgets.help_panel import help_table

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(help_table())
    return console.export_text()


async def test_palette_switches_mode_and_theme(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await palette(pilot, "Mode: plan")
        await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode")
        await palette(pilot, "Theme: roder-light")
        await until(pilot, lambda: app.theme == "roder-light", what="the light theme")
    assert tomllib.loads((roder_home / "config.toml").read_text())["theme"] == "roder-light"


async def test_new_thread_and_resume_picker(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first thread")
        first = app.thread_id
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.thread_id != first, what="a new thread")
        assert not app.transcript.model.entries
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, ResumePicker), what="the picker")
        await pilot.press(*"first")
        await pilot.press("enter")
        await until(pilot, lambda: app.thread_id == first, what="the first thread")
        assert entries_of(app, "user")[0].items[0].text == "first thread"


async def test_resume_flag_without_id_opens_the_picker(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = make_app(workspace, None, monkeypatch)
    async with seed.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await ask(pilot, "remember me")
        earlier = seed.thread_id
    app = make_app(workspace, None, monkeypatch, resume="")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ResumePicker), what="the resume picker")
        await pilot.press("enter")
        await ready(pilot)
        assert app.thread_id == earlier
        assert entries_of(app, "user")[0].items[0].text == "remember me"
    cont = make_app(workspace, None, monkeypatch, continue_last=True)
    async with cont.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert cont.thread_id == earlier


async def test_first_run_offers_the_mock_provider(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch, provider=None)
    async with app.run_test(size=(60, 24)) as pilot:
        await until(pilot, lambda: shown(app, FirstRunScreen), what="the first-run screen")
        await pilot.press("enter")
        await ready(pilot)
        assert app.status_bar.state["provider"] == "mock"
    quitting = make_app(workspace, None, monkeypatch, provider=None)
    async with quitting.run_test(size=(60, 24)) as pilot:
        await until(pilot, lambda: isinstance(quitting.screen, FirstRunScreen), what="the first-run screen")
        await pilot.press("q")
        await pilot.pause()
    assert quitting.return_code == 0


async def test_copy_focused_message(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "copy me please"}], monkeypatch)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "q")
        await pilot.press("ctrl+t")  # focus the last message
        await pilot.press("y")
        assert copied[-1] == "copy me please"
        await pilot.press("k", "y")  # previous message: the prompt
        assert copied[-1] == "q"


async def test_reasoning_is_folded_and_tool_cards_expand(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = "\n".join(f"line {i}" for i in range(30))
    steps = [
        {
            "reasoning": "I should list things first.",
            "text": "Listing.",
            "tool_calls": [{"name": "bash", "arguments": {"command": f"printf '{lines}'"}}],
        },
        {"text": "Listed."},
    ]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "go", 2)
        reasoning = entries_of(app, "reasoning")[0]
        view = reasoning.widget
        assert isinstance(view, ReasoningView)
        assert not reasoning.expanded
        assert "I should list" not in _plain(view)
        view.focus()
        await pilot.press("enter")
        assert "I should list things first." in _plain(view)
        card = entries_of(app, "tool")[0]
        assert isinstance(card.widget, ToolCardView)
        collapsed = _plain(card.widget).count("\n")
        card.widget.focus()
        await pilot.press("enter")
        expanded = _plain(card.widget)
        assert expanded.count("\n") > collapsed
        assert "line 29" in expanded
        assert "line 0" in expanded


def _plain(widget: object) -> str:
    import io

    from rich.console import Console

    console = Console(width=100, record=True, file=io.StringIO())
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()


async def test_history_and_slash_completion(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "one")
        await ask(pilot, "two", 2)
        prompt = app.prompt_bar.input
        await pilot.press("up")
        assert prompt.text == "two"
        await pilot.press("up")
        assert prompt.text == "one"
        await pilot.press("down")
        assert prompt.text == "two"
        prompt.clear()
        await pilot.press("/", "e", "x")
        popup = app.prompt_bar.popup
        assert popup.display
        assert any(c.value == "/export " for c in popup.items)
        await pilot.press("tab")
        assert prompt.text == "/export "
        assert not popup.display


async def test_at_file_completion_attaches_the_file(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "widget.py").write_text("WIDGET = 42\n")
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"look at @wid")
        popup = app.prompt_bar.popup
        await until(pilot, lambda: popup.display and popup.items, what="file suggestions")
        assert popup.items[0].value == "@src/widget.py "
        await pilot.press("enter")  # accept the completion
        assert app.prompt_bar.input.text == "look at @src/widget.py "
        await pilot.press("enter")  # send
        await turn_done(pilot)
        user = entries_of(app, "user")[0].items[0]
        assert [a.name for a in user.attachments] == ["widget.py"]
        assert user.attachments[0].text == "WIDGET = 42\n"


async def test_bang_runs_a_shell_command(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"!echo bang-ok", "enter")
        await until(pilot, lambda: entries_of(app, "tool") and entries_of(app, "tool")[0].status == "done", what="the shell card")
        command = entries_of(app, "tool")[0].find("commandExecution")
        assert command is not None
        assert command.command == "echo bang-ok"
        assert "bang-ok" in command.output
        assert command.exit_code == 0


async def test_fork_and_export_from_the_palette(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, [{"text": "first answer"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "original")
        parent = app.thread_id
        await palette(pilot, "Fork thread")
        await until(pilot, lambda: app.thread_id != parent, what="the fork")
        thread = (await app._client().call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id, include_turns=True))).thread  # type: ignore[arg-type]
        assert thread.parent is not None
        assert thread.parent.thread_id == parent
        assert entries_of(app, "user")[0].items[0].text == "original"
        await palette(pilot, "Export as Markdown")
        exported = workspace / f"roder-{app.thread_id}.md"
        await until(pilot, exported.exists, what="the export")
        assert "original" in exported.read_text()
        assert "first answer" in exported.read_text()


async def test_ctrl_c_twice_quits(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


async def test_prose_blocks_are_bounded_while_streaming(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "\n\n".join(f"Paragraph {i} with some words in it." for i in range(60))
    app = make_app(workspace, [{"text": text, "chunk_size": 40}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "go")
        body = app.transcript.last_answer().widget.body  # type: ignore[union-attr]
        blocks = [c for c in body.children if isinstance(c, ProseBlock)]
        assert len(blocks) > 3  # sealed in segments, never one ever-growing live widget
        assert "".join(b.source for b in blocks).split() == text.split()


async def test_keys_can_be_remapped_in_config(workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text('[keys]\ntoggle_sidebar = "f2"\ncommand_palette = "f3"\n')
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f2")
        assert not app.sidebar.display
        await pilot.press("ctrl+b")  # the old key no longer toggles it
        assert not app.sidebar.display
        await pilot.press("f3")
        await until(pilot, lambda: palette_searched(app), what="the command palette")  # opened by the remapped key


async def test_slash_commands_show_tools_help_and_trust(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, roder_home: Path
) -> None:
    from roder_tui.screens.info import InfoScreen

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        app.prompt_bar.input.text = "/tools"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, InfoScreen), what="the tools list")
        assert "bash" in app.screen.text
        assert "read-only" in app.screen.text  # type: ignore[attr-defined]
        await pilot.press("escape")
        app.prompt_bar.input.text = "/help"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, InfoScreen), what="the command list")
        assert "/compact" in app.screen.text  # type: ignore[attr-defined]
        await pilot.press("escape")
        app.prompt_bar.input.text = "/trust"
        await pilot.press("enter")
        await until(pilot, lambda: (roder_home / "data" / "trusted-folders.json").exists(), what="the trust file")
        assert str(workspace.resolve()) in (roder_home / "data" / "trusted-folders.json").read_text()


async def test_resume_of_an_unknown_thread_says_so_and_starts_fresh(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, None, monkeypatch, resume="thr_does_not_exist")
    notes: list[str] = []
    original = app.notify
    monkeypatch.setattr(app, "notify", lambda message, **kw: (notes.append(str(message)), original(message, **kw)))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert app.thread_id is not None
        assert app.thread_id != "thr_does_not_exist"
        assert any("thr_does_not_exist" in note for note in notes)
        await ask(pilot, "still works")
