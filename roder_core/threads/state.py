"""What the runtime keeps for each open thread: the thread, its running turn, steers and limits.

Apart from the runtime so that the turn runner can take the state it works on without importing
the runtime (the runner is given a ``TurnHost``, never the ``Runtime`` class).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from roder_core.ir import Thread, Turn, UserMessageItem


class RunningTurn(Protocol):
    """A turn being run for a thread (``TurnRunner``), as the thread's state sees it."""

    @property
    def turn(self) -> Turn: ...


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

    @property
    def active_turn_id(self) -> str | None:
        return self.runner.turn.id if self.runner is not None and self.task and not self.task.done() else None
