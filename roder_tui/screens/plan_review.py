"""The plan review: the plan ``exit_plan`` proposed, as rendered markdown with the user's comments.

The plan is split into its markdown blocks (headings, paragraphs, list items, code); one block has
the focus (j/k or up/down). ``c`` comments on the focused block (a heading: on its whole section),
``w`` sends the plan back for a rewrite with the comments, ``a`` approves it into a mode chosen from
a list (open comments go with the approval, as instructions for the implementation), ``r``
rejects it with a reason, esc leaves it waiting (``/plan-review`` opens it again). Every action is
a ``plan/review/*`` method; the screen only shows the review and calls them. It fits a 40-column
terminal: blocks wrap, and the key legend stays docked at the bottom.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from roder_core.policy.plan_review import PlanComment, PlanReview
from roder_core.server.protocol import MethodSpec, ProtocolModel
from roder_core.server.protocol_plan_review import (
    PLAN_REVIEW_APPROVE,
    PLAN_REVIEW_COMMENT,
    PLAN_REVIEW_REJECT,
    PLAN_REVIEW_REWRITE,
    PlanReviewApproveParams,
    PlanReviewCommentParams,
    PlanReviewRejectParams,
    PlanReviewRewriteParams,
)

if TYPE_CHECKING:
    from roder_core.server.app_client import AppClient

#: What the screen ended with: "approved", "rejected", "rewrite", or None (left waiting).
Outcome = str | None

MODES = (
    ("ask", "ask: approve, then ask before each edit or command"),
    ("auto-edit", "auto-edit: approve and accept workspace edits (commands still ask)"),
    ("bypass", "bypass: approve and run everything without asking"),
)


@dataclass(frozen=True)
class Block:
    """One markdown block of the plan: its 1-based lines, and its heading if it is one."""

    line: int
    end_line: int
    text: str
    heading: str | None = None


def plan_blocks(text: str) -> list[Block]:
    """The plan's top-level blocks, list items one by one (what a comment can point at)."""
    from markdown_it import MarkdownIt

    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[Block] = []
    for index, token in enumerate(tokens):
        if token.map is None or token.nesting == -1:
            continue
        in_list = token.level == 1 and token.type == "list_item_open"
        top = token.level == 0 and token.type not in ("bullet_list_open", "ordered_list_open")
        if not (in_list or top):
            continue
        start, end = token.map
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        heading = tokens[index + 1].content.strip() if token.type == "heading_open" else None
        blocks.append(Block(start + 1, end, "\n".join(lines[start:end]), heading))
    return blocks or [Block(1, max(len(lines), 1), text)]


class PlanBlock(Static, can_focus=True):
    DEFAULT_CSS = """
    PlanBlock { padding: 0 1; height: auto; }
    PlanBlock:focus { background: $boost; border-left: thick $accent; }
    """

    def __init__(self, block: Block, comments: list[PlanComment]) -> None:
        super().__init__()
        self.block = block
        self.comments = comments

    def render(self) -> Any:
        from rich.console import Group

        parts: list[Any] = [Markdown(self.block.text)]
        for comment in self.comments:
            where = f"§ {comment.section}" if comment.section else f"L{comment.line}-{comment.end_line}"
            note = Text(f"  💬 {where}: ", style="bold yellow")
            note.append(comment.text, style="yellow")
            parts.append(note)
        return Group(*parts)


class PlanReviewScreen(ModalScreen[Outcome]):
    BINDINGS = [
        Binding("j,down", "move(1)", "Next block", show=False),
        Binding("k,up", "move(-1)", "Previous block", show=False),
        Binding("c", "comment", "Comment"),
        Binding("w", "rewrite", "Rewrite"),
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("escape", "later", "Later"),
    ]
    DEFAULT_CSS = """
    PlanReviewScreen { align: center middle; }
    PlanReviewScreen > Vertical {
        width: 100%; max-width: 120; height: 100%;
        background: $surface; border: round $accent; padding: 0 1;
    }
    PlanReviewScreen #plan-head { dock: top; height: auto; color: $accent; text-style: bold; }
    PlanReviewScreen #plan-blocks { height: 1fr; }
    PlanReviewScreen #plan-keys { dock: bottom; height: auto; }
    """

    def __init__(self, review: PlanReview, client: AppClient, *, agent: str | None = None) -> None:
        super().__init__()
        self.review = review
        self.client = client
        self.agent = agent
        #: One drawing at a time: a comment's answer and the review's change notification both
        #: redraw, and two at once each emptied the list and then added every block (twice over).
        self.drawing = asyncio.Lock()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._head(), id="plan-head", markup=False)
            yield VerticalScroll(id="plan-blocks")
            yield Static(self._keys(), id="plan-keys")

    async def on_mount(self) -> None:
        await self._fill()

    # ------------------------------------------------------------------ showing

    def _head(self) -> str:
        review = self.review
        who = f"{self.agent}'s plan" if self.agent else "Plan"
        versions = f"version {review.current.version}" + (f" of {len(review.versions)}" if len(review.versions) > 1 else "")
        open_comments = len(review.unaddressed())
        notes = f" · {open_comments} open comment{'s' if open_comments != 1 else ''}" if open_comments else ""
        return f"{who} · {versions} · {review.status}{notes}"

    def _keys(self) -> Text:
        text = Text()
        for key, label in (("c", "comment"), ("w", "rewrite"), ("a", "approve"), ("r", "reject"), ("esc", "later")):
            text.append(f" {key} ", style="bold reverse")
            text.append(f" {label} ")
        return text

    def blocks(self) -> list[PlanBlock]:
        return list(self.query(PlanBlock))

    async def _fill(self, focus_line: int | None = None) -> None:
        async with self.drawing:
            await self._draw(focus_line)

    async def _draw(self, focus_line: int | None) -> None:
        container = self.query_one("#plan-blocks", VerticalScroll)
        await container.remove_children()
        version = self.review.current.version
        shown = [c for c in self.review.comments if c.version == version]
        widgets = []
        for block in plan_blocks(self.review.current.text):
            mine = [c for c in shown if block.line <= c.line <= block.end_line]
            widgets.append(PlanBlock(block, mine))
        await container.mount_all(widgets)
        self.query_one("#plan-head", Static).update(self._head())
        target = next((w for w in widgets if focus_line is not None and w.block.line == focus_line), widgets[0])
        target.focus()

    async def show(self, review: PlanReview) -> None:
        """Another client (or this one) changed the review: show it as it is now."""
        focused = self.focused
        line = focused.block.line if isinstance(focused, PlanBlock) else None
        self.review = review
        await self._fill(line)

    # ------------------------------------------------------------------ actions

    def action_move(self, step: int) -> None:
        blocks = self.blocks()
        if not blocks:
            return
        current = blocks.index(self.focused) if self.focused in blocks else 0
        target = blocks[max(0, min(len(blocks) - 1, current + step))]
        target.focus()
        target.scroll_visible()

    def _focused_block(self) -> Block:
        focused = self.focused
        return focused.block if isinstance(focused, PlanBlock) else self.blocks()[0].block

    async def _ask(self, title: str, *, note: str = "", required: bool = True) -> str | None:
        from roder_tui.screens.text_prompt import TextPromptScreen

        return await self.app.push_screen_wait(TextPromptScreen(title, note=note, required=required))

    async def _call(self, spec: MethodSpec[Any, Any], params: ProtocolModel) -> Any:
        """One ``plan/review/*`` call; an error is shown, and None returned."""
        from roder_core.server.errors import RpcError

        try:
            return await self.client.call(spec, params)
        except RpcError as exc:
            self.app.notify(exc.message, title=spec.name, severity="error", timeout=10)
            return None

    def action_comment(self) -> None:
        self.run_worker(self._comment(), group="plan-review", exclusive=True)

    async def _comment(self) -> None:
        block = self._focused_block()
        where = (
            f"section {block.heading!r}"
            if block.heading
            else f"line {block.line}" + (f"-{block.end_line}" if block.end_line != block.line else "")
        )
        text = await self._ask(f"Comment on {where}", note=block.text[:400])
        if not text:
            return
        rid = self.review.review_id
        if block.heading:
            params = PlanReviewCommentParams(review_id=rid, text=text, section=block.heading)
        else:
            params = PlanReviewCommentParams(review_id=rid, text=text, line=block.line, end_line=block.end_line)
        result = await self._call(PLAN_REVIEW_COMMENT, params)
        if result is not None:
            await self.show(result.review)

    def action_rewrite(self) -> None:
        self.run_worker(self._rewrite(), group="plan-review", exclusive=True)

    async def _rewrite(self) -> None:
        count = len(self.review.unaddressed())
        note = f"The model revises the plan with your {count} open comment(s)." if count else "Say what to change."
        instructions = await self._ask("Rewrite the plan: instructions (optional)", note=note, required=not count)
        if instructions is None:
            return
        params = PlanReviewRewriteParams(review_id=self.review.review_id, instructions=instructions)
        if await self._call(PLAN_REVIEW_REWRITE, params) is not None:
            self.dismiss("rewrite")

    def action_approve(self) -> None:
        self.run_worker(self._approve(), group="plan-review", exclusive=True)

    async def _approve(self) -> None:
        from roder_tui.screens.choice import ChoiceScreen

        count = len(self.review.unaddressed())
        # Open comments go with the approval (the model follows them while implementing): say so.
        note = f"Your {count} open comment(s) go with the approval, as instructions for the implementation." if count else ""
        mode = await self.app.push_screen_wait(ChoiceScreen("Approve the plan into which mode?", list(MODES), note=note))
        if not mode:
            return
        # the choice is a plain string: the params model checks it is one of the approvable modes
        params = PlanReviewApproveParams.model_validate({"reviewId": self.review.review_id, "mode": mode})
        if await self._call(PLAN_REVIEW_APPROVE, params) is not None:
            self.dismiss("approved")

    def action_reject(self) -> None:
        self.run_worker(self._reject(), group="plan-review", exclusive=True)

    async def _reject(self) -> None:
        reason = await self._ask("Reject the plan: why?", note="The model is told, and stays in plan mode.")
        if reason and await self._call(
            PLAN_REVIEW_REJECT, PlanReviewRejectParams(review_id=self.review.review_id, reason=reason)
        ):
            self.dismiss("rejected")

    def action_later(self) -> None:
        self.dismiss(None)
