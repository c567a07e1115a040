"""What a tool call sees of its thread's team: ``ToolHost.team()`` returns a ``TeamChannel``.

The team tools (``team_message``, ``team_broadcast``, ``team_tasks``) speak for the caller: a
member by its name, or the lead. They never hold the team manager, only this channel, scoped to
one thread of one team.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from roder_core.teams.model import TeamMember, TeamTask


class TeamChannel(Protocol):
    @property
    def team_name(self) -> str: ...

    @property
    def speaker(self) -> str:
        """Who is calling: a member's name, or ``lead``."""
        ...

    def roster(self) -> list[TeamMember]: ...

    async def send(self, to: str, text: str) -> str:
        """Deliver a message to a member or the lead (``all``: everyone else); says how it went."""
        ...

    def tasks(self) -> list[TeamTask]: ...

    def add_task(self, title: str, detail: str = "") -> TeamTask: ...

    def claim_task(self, task_id: str) -> TeamTask: ...

    def complete_task(self, task_id: str, result: str = "") -> TeamTask: ...
