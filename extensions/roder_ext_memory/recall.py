"""Memory recall: the few saved notes most relevant to the prompt, as a droppable turn block
(recorded with the turn's message, so the system prompt stays the same from turn to turn)."""

from __future__ import annotations

import logging

from roder_core.kernel.services import ContextBlock, ContextQuery

from .store import SqliteMemoryStore

log = logging.getLogger(__name__)

RECALL_LIMIT = 5
#: Recalled notes are hints: each is cut to this many characters in the prompt.
RECALL_CHARS = 600


class MemoryContextProvider:
    def __init__(self, store: SqliteMemoryStore, limit: int = RECALL_LIMIT) -> None:
        self.store = store
        self.limit = limit

    def id(self) -> str:
        return "memory-context"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        found = await self.store.search(query.prompt, self.limit, project=str(query.cwd))
        if not found:
            return []
        lines = [f"- ({m.scope}) {m.text[:RECALL_CHARS]}" for m in found]
        text = (
            "# Memories\nNotes saved in earlier sessions that may be relevant (use memory_search for more; "
            "they may be out of date):\n" + "\n".join(lines)
        )
        return [ContextBlock(source="memory", kind="memory", text=text, priority=80, droppable=True, placement="turn")]
