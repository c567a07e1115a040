"""What starts a child thread and narrows it: the part of the runtime that both a tool call's
host (subagents) and the team manager (team members) drive, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from roder_core.ir import ParentRef, Thread


class ThreadStarter(Protocol):
    """Opens threads and restricts what a child may do (``Runtime`` provides it)."""

    async def start_thread(
        self,
        cwd: Path | None = None,
        provider: str | None = None,
        model: str | None = None,
        *,
        title: str = "",
        ephemeral: bool = False,
        parent: ParentRef | None = None,
    ) -> Thread: ...

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None, agent: str | None = None
    ) -> None: ...

    def thread_mode(self, thread_id: str) -> str: ...
