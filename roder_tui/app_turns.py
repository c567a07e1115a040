"""The app's turns: the prompt's submissions (prompts, ``!`` shell lines, slash commands, queued
steers) and the runtime's events that stream a turn into the transcript."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from textual import on

from roder_tui.app_commands import AppCommands
from roder_tui.home_config import git_branch
from roder_tui.widgets.prompt import PromptInput, attachments_in

if TYPE_CHECKING:
    from roder_core.server.protocol import InputItem


class AppTurns(AppCommands):
    """The prompt's submissions and the runtime's events that stream a turn into the transcript."""

    async def _on_event(self, event: Any) -> None:
        from roder_core.threads import events as ev

        method = getattr(event, "method", "")
        if method == "thread/live":
            if event.thread_id == self.thread_id:
                await self._catch_up(event)
            return
        if method == "turn/steer/queued":
            if event.thread_id == self.thread_id:
                self.queued.add(event.item.id, event.item.text)
            return
        if method == "turn/steer/cancelled":
            self.queued.discard(event.item_id)
            return
        if method == "auth/login/completed":
            from roder_tui.sign_in_view import completion_message

            text, severity = completion_message(event)
            self.notify(text, title="/login", severity=severity, timeout=12)  # type: ignore[arg-type]
            return
        thread_id = getattr(event, "thread_id", None)
        if isinstance(event, ev.AgentMessageDelta):
            if thread_id == self.thread_id:
                self.coalescer.push(event.item_id, event.delta)
            return
        if isinstance(event, ev.ToolOutputDelta):
            if thread_id == self.thread_id:
                self.coalescer.push(f"call:{event.call_id}", event.delta)
            return
        if (
            isinstance(event, ev.ThreadStarted)
            and event.thread.parent is not None
            and event.thread.parent.thread_id in self._family
        ):
            self._family.add(event.thread.id)
        if isinstance(event, ev.ApprovalRequested | ev.ApprovalResolved) and thread_id in self._family:
            await self.coalescer.drain()
            self._on_approval_event(event)
            return
        if isinstance(event, ev.UserInputRequested) and thread_id in self._family:
            self.questions.add(event)
            return
        if isinstance(event, ev.TurnCompleted):
            self.questions.turn_ended(event.turn.id)
        if method == "tasks/updated":
            self.tasks_view.task_updated(event.task)
            return
        if method == "workflows/updated":
            self.workflows_view.updated(event)
            return
        if method == "plugins/changed":  # the server reloaded its plugins: their commands join `/` now
            self.run_worker(self._load_mcp_completions(), group="mcp-completions", exit_on_error=False)
            await self._load_commands()
            if event.elsewhere:  # made by another process (`roder plugin` elsewhere): say what applied
                from roder_tui.screens.plugins import live_note

                note = live_note(event, "change")
                self.notify(
                    f"plugins changed outside this session ({', '.join(event.plugins) or 'settings'}): {note}", title="/plugin"
                )
            return
        if isinstance(event, ev.PlanReviewUpdated):
            await self._on_plan_review(event)
            return
        if isinstance(event, ev.TeamUpdated):
            if thread_id == self.thread_id:
                await self.teams.on_updated(event.team)
            return
        if isinstance(event, ev.ItemCompleted) and self.team_panes.member_of_thread(thread_id or ""):
            self.team_panes.add_item(thread_id or "", event.item)
            return
        if thread_id not in (self.thread_id, "", None):
            if isinstance(event, ev.TurnCompleted) and thread_id in self._left_running:
                self._left_running.discard(thread_id)
                await self._release_thread(thread_id)
            if method in ("thread/status/changed", "thread/title/changed", "thread/started"):
                self.refresh_sidebar()
            return
        await self.coalescer.drain()
        if isinstance(event, ev.ItemStarted):
            if event.item.type == "userMessage":
                self.queued.discard(event.item.id)  # a steer reached the model
            await self.transcript.add_item(event.item, live=True)
        elif isinstance(event, ev.ItemCompleted):
            await self.transcript.add_item(event.item, live=False)
        elif isinstance(event, ev.TurnStarted):
            self.turn_id, self.turn_started = event.turn_id, time.monotonic()
            self._set_activity("working")
        elif isinstance(event, ev.TurnCompleted):
            self.turn_id = None
            status = event.turn.status
            self.transcript.settle()
            mine = {q.item_id for q in self.queued.queued}  # a team's messages are the team's to deliver again
            self._return_unsent([m.text for m in event.unsent_steers if m.id in mine])
            if status == "interrupted":  # a marker the runtime stored arrived already: this one replaces it
                from roder_core.ir import interrupted_item

                await self.transcript.add_item(interrupted_item(event.turn.id))
            if status == "failed" and event.turn.error is not None:
                self.notify(event.turn.error.message, title="turn failed", severity="error", timeout=10)
            self._set_activity("idle")
            self.status_bar.update_state(git_branch=git_branch(self.cwd))
            self.refresh_sidebar()
        elif isinstance(event, ev.TokenUsageUpdated):
            from roder_ext_tui.segments import cache_state

            self.status_bar.update_state(
                context_tokens=event.context_tokens,
                context_window=event.context_window,
                cost_usd=event.total.cost_usd,
                **cache_state(event.usage, event.total),
            )
        elif isinstance(event, ev.ModelRetrying):
            self.notify(event.notice(), title="retrying", severity="warning", timeout=max(event.wait, 5.0))
        elif isinstance(event, ev.ModeChanged):
            self.status_bar.update_state(mode=event.mode)
        elif isinstance(event, ev.ThreadModelChanged):
            self.status_bar.update_state(provider=event.provider, model=event.model, context_window=event.context_window)
        elif isinstance(event, ev.ThreadTitleChanged | ev.ThreadStatusChanged):
            self.refresh_sidebar()
        elif isinstance(event, ev.ErrorEvent):
            self.notify(event.message, title=event.kind, severity="error", timeout=10)

    @on(PromptInput.Submitted)
    def _submitted(self, event: PromptInput.Submitted) -> None:
        # A worker, so a long ``!cmd`` or a slow call never blocks keys (esc must still work).
        self.run_worker(self.send(event.text), group="send", exit_on_error=False)

    async def send(self, text: str) -> None:
        """Send what the user typed: ``!cmd``, ``/command``, a steer during a turn, or a prompt."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import TURN_START, TURN_STEER, TurnStartParams, TurnSteerParams

        self.input_pause.needed()  # an answer may follow: its renderers are imported now
        if not self.ready.is_set():
            await self.ready.wait()
        stripped = text.strip()
        try:
            if stripped.startswith("!") and len(stripped) > 1:
                await self.run_shell(stripped[1:].strip())
            elif stripped.startswith("/") and len(stripped) > 1 and not stripped.startswith("//"):
                await self.run_slash(stripped)
            elif self.team_panes.focused is not None and self.team_panes.team is not None:
                await self.teams.message_focused(text)
            elif self.turn_id is not None:
                inputs = await self._prompt_inputs(text)
                steer = TurnSteerParams(thread_id=self.open_thread(), expected_turn_id=self.turn_id, prompt=text, input=inputs)
                steered = await self._client().call(TURN_STEER, steer)
                self.queued.add(steered.item_id, text)
            else:
                inputs = await self._prompt_inputs(text)
                await self.transcript.jump_end()  # a new prompt: follow the new turn
                self._redo.clear()
                params = TurnStartParams(thread_id=self.open_thread(), prompt=text, input=inputs)
                await self._client().call(TURN_START, params)
                self.pending_media.show_items([])  # the turn took them
        except RpcError as exc:
            # Refused (an image for a model that cannot see, a bad command...): nothing typed is lost.
            self._give_back([text])
            self.notify(exc.message, severity="error", timeout=10)

    async def _prompt_inputs(self, text: str) -> list[InputItem]:
        """The pictures and ``@files`` a prompt or a queued message names, attached when it is sent."""
        from roder_core.server.protocol import InputItem
        from roder_tui.media_input import image_inputs, prompt_images

        images = prompt_images(text, self.cwd)
        known = set(await self.prompt_bar.known_files()) if self.files_remote and "@" in text else None
        files = [InputItem(type="file", path=str(p)) for p in attachments_in(text, self.cwd, known) if p not in images]
        return [*image_inputs(text, self.cwd), *files]

    def _give_back(self, texts: list[str]) -> None:
        """Put text that was not sent back into the prompt, before anything typed since."""
        prompt = self.prompt_bar.input
        prompt.text = "\n\n".join([*texts, prompt.text] if prompt.text.strip() else texts)
        prompt.move_cursor(prompt.document.end)

    def _return_unsent(self, texts: list[str]) -> None:
        """Steer messages the turn never delivered go back into the prompt (before any draft),
        never into the next turn."""
        self.queued.take_all()
        if not texts:
            return
        self._give_back(texts)
        self.notify("queued messages were not sent; they are back in the prompt", title="steer")

    @on(PromptInput.RecallQueued)
    async def _recall_queued(self) -> None:
        from roder_core.server.protocol import TURN_STEER_CANCEL, TurnSteerCancelParams

        if not self.queued.queued or self.thread_id is None:
            return
        newest = self.queued.queued[-1]
        taken = await self._client().call(
            TURN_STEER_CANCEL, TurnSteerCancelParams(thread_id=self.thread_id, item_id=newest.item_id)
        )
        self.queued.discard(newest.item_id)
        if taken.cancelled and taken.text is not None:
            prompt = self.prompt_bar.input
            prompt.text = taken.text
            prompt.move_cursor(prompt.document.end)
        else:
            self.notify("the model already received it", title="steer")

    async def run_shell(self, command: str) -> None:
        """``!cmd``: the control plane's command/exec runs it after policy evaluation. Its card
        shows at once, running, and esc or ctrl+c stops it (in this process: a host's command
        runs to its end, as command/exec has no way to stop it); a refusal ends the card failed."""
        from roder_core.ir import CommandExecutionItem, ItemStatus
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_host import COMMAND_EXEC, CommandExecParams

        last = self.transcript.model.entries[-1].items[-1].id if len(self.transcript.model) else None
        thread_id = self.thread_id  # the thread it was typed in, even if the user switches meanwhile
        card = CommandExecutionItem(
            command=command, cwd=str(self.cwd), call_id=f"shell-{time.monotonic_ns()}", status=ItemStatus.IN_PROGRESS
        )
        shown = await self.transcript.add_item(card)
        if not self._client().shared:  # in this process, cancelling the call stops the command
            self._shell_run = asyncio.current_task()
        try:
            params = CommandExecParams(command=["bash", "-lc", command], cwd=str(self.cwd))
            result = await self._client().call(COMMAND_EXEC, params)
            card = card.model_copy(
                update={
                    "exit_code": result.exit_code,
                    "output": result.stdout + result.stderr,
                    "duration_ms": result.duration_ms,
                    "timed_out": result.timed_out,
                    "status": ItemStatus.COMPLETED if result.exit_code == 0 else ItemStatus.FAILED,
                }
            )
        except RpcError as exc:
            card = card.model_copy(update={"output": exc.message, "status": ItemStatus.DECLINED})
            raise
        except asyncio.CancelledError:  # esc or ctrl+c (or the app closing)
            card = card.model_copy(update={"output": "stopped", "status": ItemStatus.FAILED})
            raise
        finally:
            self._shell_run = None
            # Not part of the thread (the model never saw it): kept here so it survives switching away.
            owner = thread_id or self.thread_id
            if owner is not None:
                self._shell_cards.setdefault(owner, []).append((last, card))
            if shown is not None and shown in self.transcript.model.entries:  # not switched away meanwhile
                await self.transcript.add_item(card)
