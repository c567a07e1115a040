"""The app's key actions (bound in ``keymap.py``): quit, copy, mode, sidebar, help, focus, editor."""

from __future__ import annotations

import time

from textual import on

from roder_core.modes import Mode
from roder_tui.app_state import CTRL_C_WINDOW, MODES, SIDEBAR_MIN_CELLS, SIDEBAR_MIN_WIDTH, SIDEBAR_STEP, AppState
from roder_tui.widgets.prompt import PromptInput


class AppKeys(AppState):
    """Key actions that need nothing but the state: quit, copy, mode, sidebar, help, focus."""

    async def action_ctrl_c(self) -> None:
        """Copy a selection (in the prompt, or text dragged over with the mouse anywhere, as in
        any Textual app); else interrupt the running turn; else clear the prompt; on an idle,
        empty prompt, a second press within two seconds quits."""
        from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams

        focused = self.focused
        if isinstance(focused, PromptInput) and focused.selected_text:
            self.action_copy_text(focused.selected_text)
            return
        if selected := self.screen.get_selected_text():
            self.action_copy_text(selected)
            self.screen.clear_selection()
            return
        if self.client is not None and self.thread_id and self.turn_id:
            self._ctrl_c_at = 0.0
            await self.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=self.thread_id, turn_id=self.turn_id))
            return
        if self._shell_run is not None:
            self._shell_run.cancel()
            return
        prompt = self.prompt_bar.input
        if prompt.text:
            prompt.clear()
            return
        now = time.monotonic()
        if now - self._ctrl_c_at <= CTRL_C_WINDOW:
            await self.action_quit()
            return
        self._ctrl_c_at = now
        self.notify("press ctrl+c again to quit (or ctrl+q)", timeout=CTRL_C_WINDOW)

    async def action_quit(self) -> None:
        self.leave(0)

    def leave(self, code: int) -> None:
        """Quit with exit status ``code`` (ctrl+q, or SIGTERM: ``RoderApp.on_mount``); a turn cut
        off by quitting is interrupted and saved, the terminal is given back as it was, and the
        shell says how to continue it."""
        if self.turn_id is not None and self.thread_id is not None and self.client is not None and self.client.shared:
            self.exit_message = "roder: detached; the turn goes on in the host (`roder attach` returns to it)"
        elif self.turn_id is not None and self.thread_id is not None:
            self.exit_message = (
                f"roder: the running turn was interrupted; continue this thread with `roder -c` (or `roder -r {self.thread_id}`)"
            )
        self.exit(code)

    def action_copy_text(self, text: str) -> None:
        from roder_tui.clipboard import copy_text

        if not text:
            self.notify("nothing to copy")
            return
        where = copy_text(self, text)
        self.notify(f"copied {len(text)} characters to the {where}")

    def action_copy_focused(self) -> None:
        entry = self.transcript.focused_entry() or self.transcript.last_answer()
        self.action_copy_text(entry.copy_text() if entry else "")

    async def action_cycle_mode(self) -> None:
        from roder_core.server.protocol import SESSION_SET_MODE, SessionSetModeParams

        if self.client is None:
            return
        current = self.status_bar.state.get("mode") or Mode.ASK
        mode = MODES[(MODES.index(current) + 1) % len(MODES)] if current in MODES else Mode.ASK
        result = await self.client.call(SESSION_SET_MODE, SessionSetModeParams(mode=Mode(mode), reason="shift+tab"))
        self.status_bar.update_state(mode=result.mode)

    def action_toggle_sidebar(self) -> None:
        if self.size.width < SIDEBAR_MIN_WIDTH and not self.sidebar.display:
            self.sidebar_wanted = True
            self.sidebar.display = True  # an explicit request wins over the narrow default
            return
        self.sidebar_wanted = not self.sidebar.display
        self.sidebar.display = self.sidebar_wanted

    def action_sidebar_wider(self) -> None:
        self._resize_sidebar(+SIDEBAR_STEP)

    def action_sidebar_narrower(self) -> None:
        self._resize_sidebar(-SIDEBAR_STEP)

    def _resize_sidebar(self, step: int) -> None:
        """The sidebar starts at a share of the width; these keys set its width in cells."""
        if not self.sidebar.display:
            return
        width = self.sidebar.outer_size.width + step
        self.sidebar.styles.width = max(SIDEBAR_MIN_CELLS, min(width, self.size.width // 2))

    async def action_tasks(self) -> None:
        await self.tasks_view.open()

    async def action_workflows(self) -> None:
        await self.workflows_view.open()

    def action_focus_transcript(self) -> None:
        widgets = self.transcript._entry_widgets()
        (widgets[-1] if widgets else self.transcript).focus()

    @on(PromptInput.PageTranscript)
    def _page_transcript(self, event: PromptInput.PageTranscript) -> None:
        """``pageup``/``pagedown`` in the prompt scroll the transcript; the focus stays."""
        if event.step < 0:
            self.transcript.scroll_page_up(animate=False)
        else:
            self.transcript.scroll_page_down(animate=False)

    def action_focus_prompt(self) -> None:
        self.prompt_bar.input.focus()

    def action_external_editor(self) -> None:
        from roder_tui.external_editor import EditorError, edit_text

        prompt = self.prompt_bar.input
        try:
            prompt.text, notice = edit_text(self, prompt.expanded())  # folded pastes in full
        except EditorError as exc:
            self.notify(str(exc), title="editor", severity="error", timeout=8)
            return
        if notice:
            self.notify(notice, title="editor", timeout=8)
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
