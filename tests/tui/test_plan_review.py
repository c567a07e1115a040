"""The plan review in the app, keyboard only, on a narrow terminal: the plan as rendered blocks,
``c`` comments on the focused block, ``w`` sends it back for a rewrite, ``r`` rejects it with a
reason, ``a`` approves it into a chosen mode; esc leaves it waiting and ``/plan-review`` reopens it."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.policy.plan_review import PlanReviewStatus
from tests.tui.helpers import make_app, ready, shown, until

PLAN_1 = "# Plan\n\n1. add the function\n2. test it\n\n## Risks\n\nNone known."
PLAN_2 = "# Plan\n\n1. write the test first\n2. add the function"
PLAN_3 = "# Plan\n\n1. write the test\n2. add the function\n3. run the suite"


def exit_plan(plan: str) -> dict:
    return {"tool_calls": [{"name": "exit_plan", "arguments": {"plan": plan}}]}


def plan_screen(app):
    from roder_tui.screens.plan_review import PlanReviewScreen

    return shown(app, PlanReviewScreen)


async def type_and_enter(pilot, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def test_reviewing_a_plan_with_keys_on_a_narrow_screen(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roder_tui.screens.choice import ChoiceScreen
    from roder_tui.screens.text_prompt import TextPromptScreen

    steps = [exit_plan(PLAN_1), exit_plan(PLAN_2), exit_plan(PLAN_3), {"text": "implementing"}]
    app = make_app(workspace, steps, monkeypatch, mode="plan")
    async with app.run_test(size=(44, 24)) as pilot:
        await ready(pilot)
        await pilot.press(*"plan it", "enter")
        await until(pilot, lambda: plan_screen(app) is not None, what="the plan review")
        screen = plan_screen(app)
        blocks = screen.blocks()
        assert [b.block.heading for b in blocks] == ["Plan", None, None, "Risks", None]
        assert "add the function" in str(blocks[1].render().renderables[0].markup)
        assert "version 1" in str(screen.query_one("#plan-head").render())

        # Leave it waiting, then reopen it with /plan-review.
        await pilot.press("escape")
        await until(pilot, lambda: plan_screen(app) is None, what="the review to close")
        await pilot.press(*"/plan-review")
        await pilot.press("escape", "enter")  # close the completion list, then send
        await until(pilot, lambda: plan_screen(app) is not None, what="/plan-review to reopen it")
        screen = plan_screen(app)

        await pilot.press("j", "j")  # the second list item
        assert screen.focused is screen.blocks()[2]
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the comment prompt")
        await type_and_enter(pilot, "tests come first")
        await until(pilot, lambda: plan_screen(app) is not None and plan_screen(app).review.comments, what="the comment")
        screen = plan_screen(app)
        [comment] = screen.review.comments
        assert (comment.line, comment.end_line, comment.quote) == (4, 4, "2. test it")
        assert any("tests come first" in block.comments[0].text for block in screen.blocks() if block.comments)

        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the rewrite prompt")
        await pilot.press("enter")  # no instructions: the comment is enough
        await until(
            pilot, lambda: plan_screen(app) is not None and plan_screen(app).review.current.version == 2, what="version 2"
        )
        screen = plan_screen(app)
        assert screen.review.current.text == PLAN_2 and screen.review.versions[1].addresses == [comment.comment_id]

        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the reason prompt")
        await pilot.press("enter")  # a reason is required
        assert isinstance(app.screen, TextPromptScreen)
        await type_and_enter(pilot, "too vague")
        await until(
            pilot, lambda: plan_screen(app) is not None and plan_screen(app).review.current.text == PLAN_3, what="a new plan"
        )
        rejected_id = screen.review.review_id
        assert plan_screen(app).review.review_id != rejected_id

        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), what="the mode choice")
        await type_and_enter(pilot, "auto-edit")
        await until(pilot, lambda: app.status_bar.state.get("mode") == "auto-edit", what="auto-edit mode")
        await until(pilot, lambda: app.turn_id is None, what="the turn to end")
        runtime = app.client.runtime
        reviews = await runtime.plan_reviews.of_thread(app.thread_id)
        assert [r.status for r in reviews] == [PlanReviewStatus.REJECTED, PlanReviewStatus.APPROVED]
        assert reviews[0].reason == "too vague" and reviews[1].next_mode == "auto-edit"


async def test_approving_a_plan_sends_its_open_comments_with_the_approval(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comment made and then approved (not rewritten) reaches the model as an instruction for
    the implementation, and the mode choice says it will."""
    from roder_core.server.protocol import THREAD_READ, ThreadReadParams
    from roder_tui.screens.choice import ChoiceScreen
    from roder_tui.screens.text_prompt import TextPromptScreen

    app = make_app(workspace, [exit_plan(PLAN_1), {"text": "implementing"}], monkeypatch, mode="plan")
    async with app.run_test(size=(40, 20)) as pilot:
        await ready(pilot)
        await pilot.press(*"plan it", "enter")
        await until(pilot, lambda: plan_screen(app) is not None, what="the plan review")
        await pilot.press("j", "j", "c")
        await until(pilot, lambda: isinstance(app.screen, TextPromptScreen), what="the comment prompt")
        await type_and_enter(pilot, "use a dataclass")
        await until(pilot, lambda: plan_screen(app) is not None and plan_screen(app).review.comments, what="the comment")

        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), what="the mode choice")
        assert "1 open comment(s) go with the approval" in str(app.screen.query_one("#choice-note").render())
        await type_and_enter(pilot, "ask")
        await until(pilot, lambda: app.turn_id is None and plan_screen(app) is None, what="the turn to end")
        thread = (await app.client.call(THREAD_READ, ThreadReadParams(thread_id=app.thread_id, include_turns=True))).thread
        [result] = [i for t in thread.turns for i in t.items if i.type == "toolResult" and i.name == "exit_plan"]
        assert "The user approved the plan" in result.text
        assert "use a dataclass" in result.text and "> 2. test it" in result.text
