"""The threads open in this runtime, and this process's claim on their stored files.

A thread is open once it is started, resumed or forked here, until it is closed. While a turn
runs on a stored thread this process is the file's only writer: the table claims the thread
from the store before the turn and releases it when the thread closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roder_core.errors import RoderError, ThreadNotFoundError
from roder_core.ir import Thread, ThreadSummary
from roder_core.threads.state import OlderTurns, ThreadState

if TYPE_CHECKING:
    from roder_core.kernel.services import ThreadStore


class ThreadTable:
    """Open threads by id; ``store`` (None: nothing is saved) holds the stored ones."""

    def __init__(self, store: ThreadStore | None) -> None:
        self.store = store
        self._open: dict[str, ThreadState] = {}

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._open

    def __bool__(self) -> bool:
        return bool(self._open)

    def ids(self) -> list[str]:
        return list(self._open)

    def states(self) -> list[ThreadState]:
        return list(self._open.values())

    def find(self, thread_id: str) -> ThreadState | None:
        return self._open.get(thread_id)

    def get(self, thread_id: str) -> ThreadState:
        state = self._open.get(thread_id)
        if state is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} is open (resume it first)")
        return state

    def open(self, thread: Thread, *, ephemeral: bool = False, older: OlderTurns | None = None) -> ThreadState:
        """``older``: the turns of a thread resumed from its recent ones that stayed on disk."""
        state = ThreadState(thread=thread, ephemeral=ephemeral, older=older)
        self._open[thread.id] = state
        return state

    async def load_stored(self, thread_id: str) -> tuple[Thread, OlderTurns | None]:
        """A stored thread to open: only its recent turns when the store can load them alone
        (the others are read on demand, ``ThreadState.complete_history``), else all of it."""
        from roder_core.kernel.services import RecentThreadLoader

        store = self.store
        if store is None:
            raise ThreadNotFoundError(f"no thread store is installed; cannot resume {thread_id!r}")
        if not isinstance(store, RecentThreadLoader):
            return await store.load(thread_id), None
        recent = await store.load_recent(thread_id)
        if not recent.older_turns:
            return recent.thread, None
        loaded_id = recent.thread.id

        async def load_whole() -> Thread:
            return await store.load(loaded_id)

        return recent.thread, OlderTurns(recent.older_turns, load_whole)

    def persistent(self, state: ThreadState) -> bool:
        """Whether this thread's events are saved (a store is installed, the thread is not ephemeral)."""
        return self.store is not None and not state.ephemeral

    async def claim(self, state: ThreadState) -> None:
        """Become the only writer of a stored thread (the store refuses when another process is)."""
        if self.store is not None and self.persistent(state):
            await self.store.claim(state.thread.id)

    async def release(self, thread_id: str) -> ThreadState | None:
        """Close a thread here, giving up the claim on its file; the state it had, if open."""
        state = self._open.pop(thread_id, None)
        if state is not None and self.store is not None and self.persistent(state):
            await self.store.release(thread_id)
        return state

    async def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of an open or stored thread given its id or an unambiguous prefix."""
        from roder_core.threads.sessions import resolve_thread_id

        known = set(self._open)
        if id_or_prefix not in known and self.store is not None:
            known.update(row.id for row in await self.store.list_threads())
        return resolve_thread_id(id_or_prefix, known)

    async def summaries(self, cwd: str | None = None, limit: int | None = None) -> list[ThreadSummary]:
        """Stored threads and open ones not saved yet, most recently updated first."""
        stored = await self.store.list_threads(cwd, limit) if self.store is not None else []
        known = {s.id for s in stored}
        live = [
            _summary(s.thread)
            for s in self._open.values()
            if s.thread.id not in known and s.thread.turns and (cwd is None or s.thread.cwd == cwd)
        ]
        rows = sorted([*stored, *live], key=lambda s: s.updated_at, reverse=True)
        return rows[:limit] if limit else rows

    def transcript_path(self, thread_id: str) -> str | None:
        """The thread's file when the store keeps one (the JSONL store does); None for ephemeral threads."""
        state = self._open.get(thread_id)
        locate = getattr(self.store, "path", None)
        if state is None or state.ephemeral or not callable(locate):
            return None
        try:
            return str(locate(thread_id))
        except RoderError:
            return None


def _summary(thread: Thread) -> ThreadSummary:
    return ThreadSummary(
        id=thread.id,
        cwd=thread.cwd,
        title=thread.title,
        created_at=thread.created_at,
        updated_at=thread.updated_at,
        provider=thread.provider,
        model=thread.model,
        parent=thread.parent,
        turn_count=len(thread.turns),  # never stored, so never loaded partly
        status=thread.status,
    )
