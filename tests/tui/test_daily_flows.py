"""Pilot tests of a working day's flows as a daily user meets them: the first open of a folder
that brings its own items, approvals that save several rules, the model picker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tui.helpers import make_app, ready, shown, until


def _project_with_a_command(workspace: Path) -> None:
    (workspace / ".roder" / "commands").mkdir(parents=True)
    (workspace / ".roder" / "commands" / "greet.md").write_text("Say hello to the team.\n")


def _decisions(roder_home: Path) -> dict[str, bool]:
    file = roder_home / "data" / "trusted-folders.json"
    return json.loads(file.read_text()) if file.exists() else {}


async def test_first_open_of_a_folder_with_its_own_items_asks_for_trust(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README promises folders with their own config, commands or MCP servers ask once: the
    app asks before the runtime starts, so "y" loads the folder's command in this session, and
    the answer is remembered (the next open does not ask)."""
    from roder_tui.screens.trust_prompt import TrustPromptScreen

    _project_with_a_command(workspace)
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await until(pilot, lambda: shown(app, TrustPromptScreen), what="the trust prompt")
        screen = shown(app, TrustPromptScreen)
        legend = screen.query_one("#trust-keys").region
        assert legend.bottom <= 20  # the keys are on screen at 40x20
        assert ".roder/commands" in str(screen.query_one("VerticalScroll Static").render())
        await pilot.press("y")
        await ready(pilot)
        assert "greet" in [c.name for c in app.slash_commands]
    assert _decisions(roder_home) == {str(workspace.resolve()): True}
    again = make_app(workspace, None, monkeypatch)
    async with again.run_test(size=(80, 24)) as pilot:
        await ready(pilot)  # no prompt: it was answered
        assert "greet" in [c.name for c in again.slash_commands]


async def test_not_trusting_a_folder_loads_nothing_of_it_and_is_remembered(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roder_tui.screens.trust_prompt import TrustPromptScreen

    _project_with_a_command(workspace)
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: shown(app, TrustPromptScreen), what="the trust prompt")
        await pilot.press("n")
        await ready(pilot)
        assert "greet" not in [c.name for c in app.slash_commands]
    assert _decisions(roder_home) == {str(workspace.resolve()): False}
    quitting = make_app(workspace / ".roder", None, monkeypatch)  # a subfolder: covered by the decision
    async with quitting.run_test(size=(80, 24)) as pilot:
        await ready(pilot)


async def test_quitting_at_the_trust_prompt_decides_nothing(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roder_tui.screens.trust_prompt import TrustPromptScreen

    _project_with_a_command(workspace)
    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: shown(app, TrustPromptScreen), what="the trust prompt")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert app.client is None  # the runtime never started
    assert _decisions(roder_home) == {}


async def test_the_rules_of_a_compound_command_line_up_in_the_legend(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ls -la && echo hi`` saves two rules; the second was drawn at the dialog's edge under the
    key column, reading as a key row of its own."""
    from tests.tui.test_approval_dialog import call, open_approval

    app = make_app(workspace, [call("bash", command="ls -la && echo hi"), {"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot)
        lines = legend_lines(screen)
        first = next(i for i, line in enumerate(lines) if "always allow: bash(ls -la)" in line)
        assert lines[first + 1] == " " * lines[first].index("bash(ls -la)") + "bash(echo hi)"
        assert lines[first + 2].split() == ["n", "deny"]
        await pilot.press("a")
        await until(pilot, lambda: app.turn_id is None, what="the turn's end")
    saved = (app.config_dir / "config.toml").read_text()
    assert "bash(ls -la)" in saved and "bash(echo hi)" in saved


def legend_lines(screen: Any) -> list[str]:
    """The approval dialog's key legend as drawn, one string a row."""
    keys = screen.query_one("#approval-keys")
    return [strip.text.rstrip() for strip in keys.render_lines(keys.region.reset_offset)]


async def test_a_rule_that_wraps_at_40_columns_stays_in_its_column(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 40 columns ``always allow: edit(src/new_module.py)`` wraps; the rule went on at the
    dialog's edge, under the keys, where it read as a row of its own."""
    from tests.tui.test_approval_dialog import call, open_approval

    app = make_app(workspace, [call("write", path="src/new_module.py", content="x = 1\n"), {"text": "ok"}], monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot)
        lines = legend_lines(screen)
        label_column = lines[0].index("allow once")
        at = next(i for i, line in enumerate(lines) if "always allow:" in line)
        assert lines[at].index("always allow:") == label_column
        assert lines[at + 1].strip() == "edit(src/new_module.py)"
        assert lines[at + 1].index("edit(") == label_column
        assert [line.split()[0] for line in lines if line[:label_column].strip()] == ["y", "s", "a", "n", "esc"]


async def test_the_model_picker_marks_the_model_in_use(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/model`` opens on the model in use and marks it, as the palette's *Model:* rows do."""
    from textual.widgets import OptionList

    from roder_tui.screens.choice import ChoiceScreen

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"/model", "enter")
        await until(pilot, lambda: shown(app, ChoiceScreen), what="the model picker")
        options = app.screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert "mock/mock ✓" in labels
        assert [label for label in labels if label.endswith("✓")] == ["mock/mock ✓"]
        assert options.highlighted == labels.index("mock/mock ✓")


async def test_a_plan_comment_leaves_the_plan_shown_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comment's answer and the review's change notification both redraw the plan; drawn at
    once, each emptied the list and then added the blocks, so the whole plan showed twice."""
    from roder_tui.screens.plan_review import PlanBlock, PlanReviewScreen, plan_blocks
    from roder_tui.screens.text_prompt import TextPromptScreen
    from tests.tui.test_plan_review import PLAN_1, exit_plan

    app = make_app(workspace, [exit_plan(PLAN_1), {"text": "implementing"}], monkeypatch, mode="plan")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"plan it", "enter")
        await until(pilot, lambda: shown(app, PlanReviewScreen), what="the plan review")
        expected = len(plan_blocks(PLAN_1))
        for number, comment in enumerate(("tests come first", "and the docs"), start=1):
            await pilot.press("j", "c")
            await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the comment prompt")
            await pilot.press(*comment, "enter")
            await until(
                pilot,
                lambda n=number: shown(app, PlanReviewScreen) and len(app.screen.review.comments) == n,  # type: ignore[misc]
                what="the comment",
            )
            screen = app.screen
            head = f"{number} open comment"
            await until(
                pilot,
                lambda s=screen, h=head: h in str(s.query_one("#plan-head").render()) and not s.drawing.locked(),  # type: ignore[misc]
                what="the plan drawn with the comment",
            )
            assert len(list(screen.query(PlanBlock))) == expected


async def test_a_tool_card_reads_its_arguments_as_text(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call with no command or path (the plan of ``exit_plan``, the ids of ``task_output``) is
    summed up as ``name: value``; it was the arguments' JSON, a plan one string of literal
    ``\\n`` escapes."""
    from roder_tui.screens.choice import ChoiceScreen
    from roder_tui.screens.plan_review import PlanReviewScreen
    from tests.tui.helpers import entries_of, turn_done
    from tests.tui.test_app import _plain
    from tests.tui.test_plan_review import exit_plan

    plan = "# Plan\n\n## Step one\nRead the code."
    steps = [exit_plan(plan), {"tool_calls": [{"name": "task_output", "arguments": {"since": 3}}]}, {"text": "done"}]
    app = make_app(workspace, steps, monkeypatch, mode="plan")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"plan it", "enter")
        await until(pilot, lambda: shown(app, PlanReviewScreen), what="the plan review")
        await pilot.press("a")
        await until(pilot, lambda: shown(app, ChoiceScreen), what="the mode choice")
        await pilot.press("enter")
        await turn_done(pilot)
        headers = [_plain(card.widget).splitlines()[0] for card in entries_of(app, "tool")]
    assert "exit_plan  plan: # Plan ## Step one Read the code." in headers[0]
    assert "task_output  since: 3" in headers[1]
    assert not any("\\n" in header or "{" in header for header in headers)


async def test_a_member_pane_shows_the_task_of_its_briefing(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member's briefing ends with its task; the pane kept the briefing's first six lines and
    hid the task behind "… 1 more lines". It keeps the first and last lines now, and a tool call
    reads as on the transcript's cards."""
    from textual.app import App, ComposeResult

    from roder_core.ir import ToolCallItem, UserMessageItem
    from roder_core.teams.model import TeamMember
    from roder_tui.widgets.member_pane import MemberPane

    briefing = "\n".join(f"rule {n}" for n in range(1, 9)) + "\n\nYour task:\nReview the loader."

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield MemberPane(TeamMember(name="alice", thread_id="thr_1"))

    app = Host()
    async with app.run_test(size=(40, 20)) as pilot:
        pane = app.query_one(MemberPane)
        pane.add_item(UserMessageItem(text=briefing, sender='team "t"'))
        pane.add_item(ToolCallItem(call_id="c1", name="team_message", arguments={"to": "bob", "text": "two\nlines"}))
        await pilot.pause()
        brief, call = pane.entries
        assert brief.splitlines() == [
            '◆ from team "t"',
            "rule 1",
            "rule 2",
            "… 5 more lines",
            "rule 8",
            "",
            "Your task:",
            "Review the loader.",
        ]
        assert call == "→ team_message to: bob · text: two lines"


@pytest.mark.parametrize("size", [(120, 40), (40, 20)])
async def test_the_plugin_screen_shows_all_its_keys(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The /plugin keys were in the border title, cut at every width: ``ctrl+o`` (add a
    marketplace) never showed. They wrap in a legend of their own now, whole at 40 columns."""
    from roder_tui.screens.plugins import PLUGIN_KEYS, PluginScreen

    app = make_app(workspace, None, monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press(*"/plugin", "enter")
        await until(pilot, lambda: shown(app, PluginScreen), what="/plugin")
        screen = app.screen
        keys = screen.query_one("#plugin-keys")
        await until(pilot, lambda: keys.region.height > 0, what="the legend laid out")
        drawn = [strip.text for strip in keys.render_lines(keys.region.reset_offset)]
        assert " ".join(" ".join(drawn).split()) == PLUGIN_KEYS
        assert screen.region.contains_region(keys.region)
        assert not keys.region.overlaps(screen.query_one("#plugin-filter").region)
        assert "ctrl+o" not in str(screen.query_one("Vertical").border_title)


async def test_a_question_reads_whole_at_40_columns(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 40x20 the options' descriptions were cut (``one file, no serve…``) and the key legend
    lost its end below the dialog; the options wrap and the keys stay on screen now."""
    from textual.widgets import RadioButton

    from roder_tui.screens.ask_user import AskUserScreen

    question = {
        "header": "Database",
        "question": "Which database should the service use for its storage layer in production?",
        "options": [
            {"label": "SQLite", "description": "one file, no server, nothing to run"},
            {"label": "Postgres", "description": "a server, concurrent writers"},
        ],
    }
    steps = [{"tool_calls": [{"name": "ask_user", "arguments": {"questions": [question]}}]}, {"text": "ok"}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press(*"set it up", "enter")
        await until(pilot, lambda: shown(app, AskUserScreen), what="the question dialog")
        screen = app.screen
        keys = screen.query_one("#ask-keys")
        await until(pilot, lambda: keys.region.height > 0, what="the dialog laid out")
        drawn = " ".join(strip.text for strip in keys.render_lines(keys.region.reset_offset))
        assert " ".join(drawn.split()) == "tab: next · space/enter: choose · ctrl+s: send · esc: decline"
        dialog = screen.query_one("AskUserScreen > Vertical")
        for part in (keys, screen.query_one("#ask-send"), screen.query_one("#ask-decline")):
            assert dialog.content_region.contains_region(part.region), (part, part.region, dialog.content_region)
        assert not screen.query_one("#ask-buttons").region.overlaps(keys.region)
        for button, option in zip(screen.query(RadioButton), question["options"], strict=True):
            text = " ".join(" ".join(s.text for s in button.render_lines(button.region.reset_offset)).split())
            assert option["description"] in text, text
        await pilot.press("down", "enter", "ctrl+s")
        await until(pilot, lambda: app.turn_id is None, what="the turn's end")


async def test_export_into_a_new_folder(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/export json out/thread.json`` failed with "No such file or directory" when ``out/`` did
    not exist; the folder is made, as the write tool makes missing parents."""
    from tests.tui.helpers import turn_done

    app = make_app(workspace, [{"text": "EXPORTED-ANSWER"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"hello", "enter")
        await turn_done(pilot)
        await app.send("/export json out/thread.json")
        target = workspace / "out" / "thread.json"
        await until(pilot, target.exists, what="the export")
    assert "EXPORTED-ANSWER" in json.loads(target.read_text())["turns"][0]["items"][-1]["text"]


async def test_a_turn_ended_with_the_approval_open_is_not_a_denial(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quitting (or interrupting) with the approval dialog open left the call "denied by the
    user", on the card and in what the model reads on ``roder -c``; nobody had denied it."""
    from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams
    from roder_tui.screens.approval import ApprovalScreen
    from tests.tui.helpers import entries_of
    from tests.tui.test_approval_dialog import call

    app = make_app(workspace, [call("write", path="a.txt", content="x\n"), {"text": "ok"}], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"write it", "enter")
        await until(pilot, lambda: shown(app, ApprovalScreen), what="the approval dialog")
        assert app.client is not None and app.thread_id is not None
        await app.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=app.thread_id))
        await until(pilot, lambda: app.turn_id is None and not shown(app, ApprovalScreen), what="the turn's end")
        [card] = entries_of(app, "tool")
        await until(pilot, lambda: card.find("toolResult") is not None, what="the call's result")
        result = card.find("toolResult")
        assert result.text == "not run: the turn ended before the user answered its approval"
        assert card.status == "interrupted"
        from tests.tui.test_app import _plain

        header = _plain(card.widget).splitlines()[0]
        assert "[interrupted]" in header and "deny" not in header
    assert not (workspace / "a.txt").exists()


async def test_switching_the_model_shows_its_window_at_once(
    workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``/model`` the status bar's ``used/window`` lost its window until the next turn; it
    shows the new model's window at once now, the one the config sets where it sets one."""
    from tests.tui.helpers import ask

    (roder_home / "config.toml").write_text('[models."mock/mock-large"]\ncontext_window = 400000\n')
    app = make_app(workspace, [{"text": "one"}], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await ask(pilot, "first")
        assert app.status_bar.state["context_window"] == 128_000
        await app.send("/model mock/mock-large")
        await until(pilot, lambda: app.status_bar.state["context_window"] != 128_000, what="the switch's event")
        assert app.status_bar.state["model"] == "mock-large"
        assert app.status_bar.state["context_window"] == 400_000
        assert "/400.0k" in str(app.status_bar.render())
