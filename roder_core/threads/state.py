"""What the runtime keeps for each open thread: the thread, its running turn, steers and limits.

Apart from the runtime so that the turn runner can take the state it works on without importing
the runtime (the runner is given a ``TurnHost``, never the ``Runtime`` class).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from roder_core.errors import RoderError
from roder_core.ir import Attachment, Thread, ToolResultItem, Turn, TurnStatus, UserMessageItem
from roder_core.kernel.file_ledger import FileLedger


class RunningTurn(Protocol):
    """A turn being run for a thread (``TurnRunner``), as the thread's state sees it."""

    @property
    def turn(self) -> Turn: ...

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...


@dataclass
class OlderTurns:
    """The turns of a resumed thread that were left on disk (see ``kernel.services.RecentThread``):
    how many there are, and how to read the whole stored thread they are taken from."""

    count: int
    load_whole: Callable[[], Awaitable[Thread]]


@dataclass
class ThreadState:
    thread: Thread
    ephemeral: bool = False
    runner: RunningTurn | None = None
    task: asyncio.Task[Turn] | None = None
    steers: list[UserMessageItem] = field(default_factory=list)
    #: Subagent threads: only these tools are offered (None: every tool).
    allowed_tools: frozenset[str] | None = None
    #: Subagent threads: the policy mode of this thread (None: the runtime's mode).
    mode: str | None = None
    #: The agent running this thread when it is not the user's own (a team member's name):
    #: its approval requests carry it, so the person answering knows who asks.
    agent: str | None = None
    #: Front-end services copied into every tool call's ``ToolExecutionContext.extra`` in this
    #: thread (e.g. ``tools.CLIENT_TEXT_READER`` from ``roder acp``); see ``set_tool_extra``.
    tool_extra: dict[str, Any] = field(default_factory=dict)
    #: Asks nobody although the runtime is interactive (a one-shot run handed to a host).
    headless: bool = False
    #: Turns before ``thread.turns`` not loaded yet (a thread resumed from its recent turns).
    older: OlderTurns | None = None
    _files: FileLedger | None = field(default=None, repr=False)
    _history_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def files(self) -> FileLedger:
        """What this thread last read or wrote of each file; a resumed thread's is rebuilt from
        its loaded tool results the first time a tool asks."""
        if self._files is None:
            results = (i.data for i in self.thread.items() if isinstance(i, ToolResultItem) and i.data)
            self._files = FileLedger.from_results(results)
        return self._files

    @property
    def turn_count(self) -> int:
        """Every turn of the thread, loaded or not."""
        return len(self.thread.turns) + (self.older.count if self.older is not None else 0)

    @property
    def history_complete(self) -> bool:
        return self.older is None

    async def complete_history(self) -> Thread:
        """Put the older turns of a resumed thread in front of its recent ones (once), so
        ``thread.turns`` holds the whole history; every reader of the whole thread calls this.
        The recent turns keep their identity: a running turn is not disturbed."""
        async with self._history_lock:
            older = self.older
            if older is not None:
                whole = await older.load_whole()
                self.thread.turns[:0] = _older_part(whole, self.thread, older.count)
                self.older = None
        return self.thread

    @property
    def active_turn_id(self) -> str | None:
        return self.runner.turn.id if self.runner is not None and self.task and not self.task.done() else None

    @property
    def busy(self) -> bool:
        """A turn task is still running (it may only be finishing its saves; see ``finishing``)."""
        return self.task is not None and not self.task.done()

    @property
    def finishing(self) -> bool:
        """The running task's turn has ended (turn/completed was sent); it is only saving."""
        return self.busy and self.runner is not None and self.runner.turn.status is not TurnStatus.IN_PROGRESS

    def steer(
        self, text: str, expected_turn_id: str | None = None, *, sender: str = "", attachments: list[Attachment] | None = None
    ) -> UserMessageItem:
        """Queue a message for the running turn; it is delivered at the next model call."""
        active = self.active_turn_id
        if active is None or self.finishing:
            # A turn that already reported its end only finishes saving: a steer queued now would
            # be neither delivered nor handed back.
            raise RoderError("no turn is running on this thread; start a new turn instead")
        if expected_turn_id is not None and expected_turn_id != active:
            raise RoderError(f"turn {expected_turn_id} is not the running turn ({active})")
        item = UserMessageItem(text=text, steer=True, sender=sender, attachments=list(attachments or []))
        self.steers.append(item)
        return item

    def cancel_steer(self, item_id: str) -> UserMessageItem | None:
        """Take a queued steer message back before the model sees it (to edit or drop it);
        None when it was already delivered or never queued."""
        for index, item in enumerate(self.steers):
            if item.id == item_id:
                return self.steers.pop(index)
        return None

    async def interrupt(self, turn_id: str | None = None) -> bool:
        """Cancel the running turn (stream and tools); it ends with status ``interrupted``.
        False when no turn (or not ``turn_id``) is running."""
        task = self.task
        if task is None or task.done():
            return False
        if turn_id is not None and self.active_turn_id != turn_id:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True


def _older_part(whole: Thread, recent: Thread, count: int) -> list[Turn]:
    """The first ``count`` turns of ``whole``, checked to be the ones just before ``recent``'s."""
    older = whole.turns[:count]
    follows = whole.turns[count].id if len(whole.turns) > count else None
    first = recent.turns[0].id if recent.turns else None
    if len(older) != count or (first is not None and follows != first):
        raise RoderError(f"thread {recent.id}: its stored history no longer matches the loaded turns; close and resume it again")
    return older
