"""``/compact [instructions]``: compaction on demand, run as a turn of its own.

Apart from ``compaction`` (which knows nothing of the turn loop) because it *is* a turn: it
reuses the runner's lifecycle (events, status, persistence) and replaces only the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roder_core.ir import UserMessageItem
from roder_core.turn.compaction import Compactor, manual_keep_tokens
from roder_core.turn.runner import TurnFailed, TurnRunner

if TYPE_CHECKING:
    from roder_core.threads.state import ThreadState
    from roder_core.turn.host import TurnHost


class CompactionRunner(TurnRunner):
    """``/compact [instructions]``: a turn of its own that only records a compaction item."""

    def __init__(self, runtime: TurnHost, state: ThreadState, instructions: str | None) -> None:
        super().__init__(runtime, state, UserMessageItem(text=f"/compact {instructions or ''}".strip()))
        self.instructions = instructions

    async def _accept_user_message(self) -> None:
        """The command is not a message to the model; nothing is recorded for it."""

    async def _loop(self) -> None:
        settings = self.runtime.options.config.context
        await self.complete_history()
        keep = manual_keep_tokens(self.thread.items(), settings.keep_recent_tokens)
        item = await Compactor(self, self).compact(keep_tokens=keep, instructions=self.instructions)
        if item is None:
            raise TurnFailed("there is nothing to compact yet", "nothing_to_compact")
        self.turn.stop_reason = "compaction"
