"""The app's way back (``rewind.py``): interrupt, rewind to an earlier prompt, undo, redo, fork here."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual import work

from roder_tui.app_approvals import AppApprovals
from roder_tui.app_state import ESC_ESC_WINDOW

if TYPE_CHECKING:
    from roder_core.ir import UserMessageItem
    from roder_tui import rewind as rewind_mod


class AppRewind(AppApprovals):
    """Interrupt, rewind, undo, redo and fork-here: the ways back to an earlier point."""

    async def action_interrupt(self) -> None:
        """esc: close the completion list, else interrupt the running turn, else (twice on an
        empty prompt) open the rewind list."""
        from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams

        if self.prompt_bar.popup_open:
            self.prompt_bar.close_popup()
            return
        if self.client is not None and self.thread_id and self.turn_id:
            await self.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=self.thread_id, turn_id=self.turn_id))
            return
        if self._shell_run is not None:
            self._shell_run.cancel()
            return
        if self.prompt_bar.input.text or self.thread_id is None:
            return
        now = time.monotonic()
        if now - self._esc_at <= ESC_ESC_WINDOW:
            self._esc_at = 0.0
            self.action_rewind()
        else:
            self._esc_at = now

    @work(group="rewind", exclusive=True, exit_on_error=False)
    async def action_rewind(self) -> None:
        """Choose an earlier prompt, then what to restore: the conversation, the code, or both."""
        from roder_tui import rewind
        from roder_tui.screens.choice import ChoiceScreen

        client, thread_id = self._client(), self.open_thread()
        labelled = await rewind.rewind_rows(client, thread_id)
        points = [point for point, _label in labelled]
        rows = [(point.id, text) for point, text in labelled]
        chosen = await self.push_screen_wait(
            ChoiceScreen("Rewind to before a prompt", rows, highlight="@last", empty="no prompts in this thread yet")
        )
        point = next((p for p in points if p.id == chosen), None)
        if point is None:
            return
        changes = await rewind.changes_since(client, thread_id, point.id)
        how = await self.push_screen_wait(
            ChoiceScreen(
                "Restore",
                [
                    (rewind.BOTH, "Restore the code and the conversation"),
                    (rewind.CONVERSATION, "Restore the conversation (fork before this prompt)"),
                    (rewind.CODE, "Restore the code (revert Roder's file changes since this prompt)"),
                ],
                note=rewind.describe(changes),
            )
        )
        if how:
            await self.rewind_to(point, how)

    async def rewind_to(self, point: UserMessageItem, how: str) -> rewind_mod.CodeRestore | None:
        from roder_tui import rewind

        client, thread_id = self._client(), self.open_thread()
        restored = None
        if how in (rewind.BOTH, rewind.CODE):
            restored = await rewind.restore_code(client, thread_id, point.id)
            self._show_restore(restored)
        if how in (rewind.BOTH, rewind.CONVERSATION):
            title = await rewind.fork_title(client, thread_id, point.id)
            await self.fork_thread(before_item=point.id, quiet=True, title=title)
            self.prompt_bar.input.text = point.text
            self.prompt_bar.input.move_cursor(self.prompt_bar.input.document.end)
            self.prompt_bar.input.focus()
        return restored

    def _show_restore(self, restored: rewind_mod.CodeRestore) -> None:
        if restored.failed or restored.unrestorable:
            self.show_info("rewind: code", restored.summary())
        else:
            self.notify(restored.summary(), title="rewind")

    async def undo(self) -> None:
        """``/undo``: revert the last prompt's file changes and its messages (redo with /redo)."""
        from roder_tui import rewind

        client, thread_id = self._client(), self.open_thread()
        points = await rewind.rewind_points(client, thread_id)
        if not points:
            self.notify("nothing to undo in this thread", title="/undo")
            return
        restored = await self.rewind_to(points[-1], rewind.BOTH)
        assert restored is not None
        self._redo.append(rewind.Undone(thread_id, restored.hunk_ids, points[-1].text))

    async def redo(self) -> None:
        """``/redo``: re-apply what the last /undo reverted and return to the thread that holds it."""
        from roder_tui import rewind

        if not self._redo:
            self.notify("nothing to redo", title="/redo")
            return
        undone = self._redo.pop()
        problems = await rewind.reapply(self._client(), undone)
        if await self.switch_thread(undone.thread_id) and self.prompt_bar.input.text == undone.text:
            self.prompt_bar.input.clear()
        if problems:
            self.show_info("redo", "\n".join(problems))
        else:
            self.notify(f"re-applied {len(undone.hunk_ids)} change(s)", title="/redo")

    async def action_fork_here(self) -> None:
        """On a focused message: fork there (before a prompt, which returns to the prompt to edit;
        after the turn of any other message)."""
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams

        entry = self.transcript.focused_entry()
        if entry is None or self.thread_id is None:
            return
        item = entry.items[0]
        if item.type == "userMessage" and not item.steer:
            await self.rewind_to(item, "conversation")
            return
        thread = (await self._client().call(THREAD_READ, ThreadReadParams(thread_id=self.thread_id, include_turns=True))).thread
        turn = next((t for t in thread.turns if any(i.id == item.id for i in t.items)), None)
        if turn is not None:
            await self.fork_thread(turn_id=turn.id)
