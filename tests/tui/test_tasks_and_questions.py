"""The question dialog (``ask_user``) and the tasks panel, driven by keys through the real app,
runtime and control plane (mock engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Log, OptionList

from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams
from roder_tui.screens.ask_user import AskUserScreen
from roder_tui.screens.tasks import TaskOutputScreen, TasksScreen
from tests.brokers.helpers import assert_gone, marker, running
from tests.tui.helpers import entries_of, make_app, palette, ready, turn_done, until

QUESTIONS = [
    {
        "question": "Which database should the service use?",
        "header": "Database",
        "options": [
            {"label": "SQLite", "description": "one file, no server"},
            {"label": "Postgres", "description": "a server, concurrent writers"},
        ],
    },
    {
        "question": "Which extras do you want?",
        "header": "Extras",
        "options": [{"label": "Metrics"}, {"label": "Tracing"}, {"label": "Admin UI"}],
        "multi_select": True,
        "allow_free_text": False,
    },
]
ASK_STEPS: list[dict[str, Any]] = [
    {"text": "I need two decisions.", "tool_calls": [{"name": "ask_user", "arguments": {"questions": QUESTIONS}}]},
    {"text": "Thanks, going ahead."},
]


def tool_result(app: Any) -> Any:
    return entries_of(app, "tool")[0].find("toolResult")


@pytest.mark.parametrize("size", [(120, 40), (40, 20)], ids=["wide", "narrow"])
async def test_questions_are_answered_with_the_keyboard(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    app = make_app(workspace, ASK_STEPS, monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press(*"set it up", "enter")
        await until(pilot, lambda: isinstance(app.screen, AskUserScreen), what="the question dialog")
        # question 1: the radio list has focus; move to Postgres and pick it
        await pilot.press("down", "enter")
        # its free-text line: type a remark
        await pilot.press("tab", *"with pgvector")
        # question 2: check Metrics and Admin UI
        await pilot.press("tab", "space", "down", "down", "space")
        await pilot.press("ctrl+s")
        await turn_done(pilot)
        result = tool_result(app)
        assert result is not None and not result.is_error
        assert '"Which database should the service use?" → Postgres, (their own words) with pgvector' in result.text
        assert '"Which extras do you want?" → Metrics, Admin UI' in result.text
        assert result.data["answers"] == {"q1": ["Postgres", "with pgvector"], "q2": ["Metrics", "Admin UI"]}


async def test_escape_declines_and_the_model_is_told(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, ASK_STEPS, monkeypatch)
    async with app.run_test(size=(80, 30)) as pilot:
        await ready(pilot)
        await pilot.press(*"set it up", "enter")
        await until(pilot, lambda: isinstance(app.screen, AskUserScreen), what="the question dialog")
        await pilot.press("escape")
        await turn_done(pilot)
        result = tool_result(app)
        assert result.data == {"declined": True, "answers": {}}
        assert "declined to answer" in result.text


async def test_interrupting_the_turn_closes_the_dialog(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(workspace, ASK_STEPS, monkeypatch)
    async with app.run_test(size=(80, 30)) as pilot:
        await ready(pilot)
        await pilot.press(*"set it up", "enter")
        await until(pilot, lambda: isinstance(app.screen, AskUserScreen), what="the question dialog")
        assert app.client is not None and app.thread_id is not None
        await app.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=app.thread_id))
        await until(pilot, lambda: not isinstance(app.screen, AskUserScreen), what="the dialog to close")
        assert app.client.runtime.pending_user_inputs() == []


async def test_tasks_panel_lists_opens_and_kills_a_background_task(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = marker()
    command = f'python3 -u -c \'import time; print("warming up"); print("ready on 5173"); time.sleep(600)\' {mark}'
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": command, "run_in_background": True}}]},
        {"text": "The dev server runs in the background."},
    ]
    app = make_app(workspace, steps, monkeypatch, mode="bypass")
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press(*"start the dev server", "enter")
        await turn_done(pilot)
        started = tool_result(app)
        assert started is not None and not started.is_error, started.text
        task_id = started.data["task_id"]

        await palette(pilot, "Background tasks")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the tasks panel")
        panel = app.screen
        listing = panel.query_one(OptionList)
        # the row shows the task's last output line, updated live
        await until(pilot, lambda: "ready on 5173" in str(listing.get_option_at_index(0).prompt), what="the last line")
        assert task_id in str(listing.get_option_at_index(0).prompt)

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskOutputScreen), what="the output view")
        log = app.screen.query_one(Log)
        await until(pilot, lambda: "warming up" in "\n".join(log.lines), what="the output")
        assert "ready on 5173" in "\n".join(log.lines)

        assert running(mark)
        await pilot.press("k")
        await until(pilot, lambda: app.tasks_view.tasks[task_id].status == "cancelled", what="the kill")
        assert_gone(mark)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="back to the panel")
        await until(pilot, lambda: "cancelled" in str(listing.get_option_at_index(0).prompt), what="the row to update")
        await pilot.press("escape")
        # f2 opens the panel too
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, TasksScreen), what="the panel from f2")
