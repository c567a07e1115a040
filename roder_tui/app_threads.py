"""The app's threads: opening, switching, forking and leaving one, the sidebar that lists them,
and a team's panes (``team_control.py``)."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual import on, work

from roder_tui.app_keys import AppKeys
from roder_tui.app_state import RECENT_TURNS
from roder_tui.widgets.sidebar import Sidebar

if TYPE_CHECKING:
    from roder_core.ir import Thread


class AppThreads(AppKeys):
    """Opening, switching, forking and leaving threads; the sidebar; a team's panes."""

    async def action_team_next_pane(self) -> None:
        await self.teams.next_pane()

    async def new_thread(self) -> None:
        from roder_core.server.protocol import THREAD_START, ThreadStartParams

        result = await self._client().call(THREAD_START, ThreadStartParams(cwd=str(self.cwd)))
        await self._show_thread(result.thread)

    async def switch_thread(self, thread_id: str) -> bool:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_RESUME, ThreadResumeParams

        try:
            params = ThreadResumeParams(thread_id=thread_id, last_turns=RECENT_TURNS)
            result = await self._client().call(THREAD_RESUME, params)
        except RpcError as exc:
            self.notify(exc.message, title="cannot open thread", severity="error", timeout=10)
            return False
        older = None
        if result.older_turns:
            first = result.thread.turns[0].id

            async def older() -> list[Any]:
                return await self._items_before(thread_id, first)

        await self._show_thread(result.thread, older)
        return True

    async def _items_before(self, thread_id: str, turn_id: str) -> list[Any]:
        """The shown items of a thread's turns before ``turn_id`` (scrolled back to)."""
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams
        from roder_tui.widgets.messages import shown_items

        thread = (await self._client().call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
        cut = next((i for i, turn in enumerate(thread.turns) if turn.id == turn_id), 0)
        return shown_items(thread.model_copy(update={"turns": thread.turns[:cut]}))

    async def _show_thread(self, thread: Thread, older: Callable[[], Awaitable[list[Any]]] | None = None) -> None:
        await self.coalescer.drain()
        previous, self.thread_id = self.thread_id, thread.id
        self._family.add(thread.id)
        self._left_running.discard(thread.id)
        self.queued.take_all()
        if previous is not None and previous != thread.id:
            await self._leave_thread(previous)
        from roder_tui.widgets.messages import shown_items

        running = thread.turns[-1] if thread.turns and thread.turns[-1].status == "inProgress" else None
        self.turn_id = None
        live_calls = frozenset(f"call:{i.call_id}" for i in running.items if i.type == "toolCall") if running else frozenset()
        await self.transcript.load(self._with_shell_cards(thread.id, shown_items(thread)), live_calls, older)
        await self.teams.show_team_of(thread.id)
        await self._load_pending_media(thread.id)
        # The live state comes back as a thread/live notification too, in order with the deltas.
        from roder_core.server.protocol_attach import THREAD_LIVE, ThreadLiveParams

        live = await self._client().call(THREAD_LIVE, ThreadLiveParams(thread_id=thread.id))
        last = next((t for t in reversed(thread.turns) if t.usage.total_tokens), None)
        from roder_ext_tui.segments import cache_state

        self.status_bar.update_state(
            provider=thread.provider or self.status_bar.state.get("provider"),
            model=thread.model or self.status_bar.state.get("model"),
            context_tokens=last.usage.input_tokens + last.usage.output_tokens if last else 0,
            context_window=live.context_window,
            cost_usd=thread.usage.cost_usd,
            **cache_state(last.usage if last else None, thread.usage),
        )
        self.refresh_sidebar()

    async def _load_pending_media(self, thread_id: str) -> None:
        from roder_core.server.protocol_media import MEDIA_LIST, MediaListParams

        listed = (await self._client().call(MEDIA_LIST, MediaListParams(thread_id=thread_id))).media
        self.pending_media.show_items([m for m in listed if m.pending])

    async def action_paste_image(self) -> None:
        """alt+v, /paste-image: the clipboard's image is attached to the next prompt."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_media import MEDIA_ATTACH_TO_TURN, MediaAttachParams
        from roder_tui.clipboard_image import ClipboardError, read_clipboard_image

        try:
            data = await asyncio.to_thread(read_clipboard_image, dict(os.environ))
        except ClipboardError as exc:
            self.notify(str(exc), title="paste image", severity="warning", timeout=10)
            return
        params = MediaAttachParams(
            thread_id=self.open_thread(),
            data_base64=base64.b64encode(data).decode("ascii"),
            name=f"clipboard-{len(self.pending_media.items) + 1}.png",
            source="clipboard",
        )
        try:
            result = await self._client().call(MEDIA_ATTACH_TO_TURN, params)
        except RpcError as exc:
            self.notify(exc.message, title="paste image", severity="error", timeout=10)
            return
        self.pending_media.add(result.media)
        for warning in result.warnings:
            self.notify(warning, title="paste image", severity="warning", timeout=10)

    async def _leave_thread(self, thread_id: str) -> None:
        """Give up writing a thread we switched away from, so ``roder -c``/``-r`` in another
        terminal can continue it; a thread still running is released when its turn ends. On a
        shared host other clients may have it open, so it stays open there."""
        from roder_core.server.protocol import SESSION_GET, SessionGetParams

        if self._client().shared:
            self._family.discard(thread_id)
            return
        if thread_id in (await self._client().call(SESSION_GET, SessionGetParams())).active_turns:
            self._left_running.add(thread_id)
        else:
            await self._release_thread(thread_id)

    async def _release_thread(self, thread_id: str) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_CLOSE, ThreadCloseParams

        self._family.discard(thread_id)
        try:
            await self._client().call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread_id))
        except RpcError as exc:  # still locked here is an inconvenience, not a failure to show
            self.notify(exc.message, title="thread close", severity="warning")

    @work(exclusive=True, group="sidebar", exit_on_error=False)
    async def refresh_sidebar(self) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_LIST, ThreadListParams

        if self.client is None:
            return
        try:
            threads = (await self.client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd), limit=200))).threads
        except RpcError as exc:  # the list is a convenience: say why it is stale, keep working
            self.notify(exc.message, title="thread list", severity="warning")
            return
        self.sidebar.show(threads, self.thread_id)
        listed = (self.thread_id, [(t.id, t.title, t.parent.thread_id if t.parent else None) for t in threads])
        if listed != self._threads_listed:  # the palette lists the threads (and the open one)
            self._threads_listed = listed
            self.palette_inputs_changed()

    @on(Sidebar.Selected)
    async def _sidebar_selected(self, event: Sidebar.Selected) -> None:
        if event.thread_id != self.thread_id:
            await self.switch_thread(event.thread_id)
        self.prompt_bar.input.focus()

    async def fork_thread(
        self, *, turn_id: str | None = None, before_item: str | None = None, quiet: bool = False, title: str | None = None
    ) -> None:
        from roder_core.server.protocol import THREAD_FORK, ThreadForkParams

        params = ThreadForkParams(thread_id=self.open_thread(), turn_id=turn_id, before_item_id=before_item, title=title)
        thread = (await self._client().call(THREAD_FORK, params)).thread
        if not quiet:
            self.notify(f"forked into {thread.id}", title="fork")
        await self.switch_thread(thread.id)

    async def action_new_thread(self) -> None:
        if self.client is not None:
            await self.new_thread()
            self.prompt_bar.input.focus()

    @work(group="picker")
    async def action_resume_picker(self) -> None:
        from roder_core.server.protocol import THREAD_LIST, ThreadListParams
        from roder_tui.screens.resume import ResumePicker

        if self.client is None:
            return
        threads = (await self.client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd)))).threads
        chosen = await self.push_screen_wait(ResumePicker(threads))
        if chosen:
            await self.switch_thread(chosen)

    async def _resume(self, thread_id: str) -> None:
        if thread_id:
            await self.switch_thread(thread_id)
        else:
            self.action_resume_picker()
