"""The vocabulary of agent teams: a team, its members, its shared task list and its messages.

A team belongs to a lead thread. Each member is a named agent (an agent definition or an ad hoc
one) running in its own child thread of the lead, under a mode never looser than the lead's.
Everything here is plain data: ``roder_core.teams.manager`` drives it, ``roder_core.teams.files``
keeps it on disk, and the ``team/*`` methods and ``team/updated`` notifications carry it as is.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field

from roder_core.errors import RoderError
from roder_core.ir import IRModel, Mode, Usage, empty_list, new_id, now

#: The lead's name in messages and task owners.
LEAD = "lead"
#: ``team_message`` to this name reaches everyone (``team_broadcast`` is the same).
EVERYONE = "all"
RESERVED_NAMES = frozenset({LEAD, EVERYONE, "user", "team"})
MEMBER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class TeamError(RoderError):
    """A team request that does not apply (unknown team or member, bad name, closed team)."""


class MemberStatus(StrEnum):
    #: A turn runs on the member's thread.
    WORKING = "working"
    WAITING_APPROVAL = "waitingApproval"
    #: Between turns: a message wakes it.
    IDLE = "idle"
    FAILED = "failed"
    #: Its turn was interrupted (by the user, or by a crash: see ``TeamManager.read``).
    INTERRUPTED = "interrupted"
    #: Removed by ``team/cleanup``: its thread is closed (and stays stored, resumable).
    STOPPED = "stopped"


class TeamStatus(StrEnum):
    ACTIVE = "active"
    CLEANED_UP = "cleanedUp"


class TeamTaskStatus(StrEnum):
    OPEN = "open"
    CLAIMED = "claimed"
    DONE = "done"


class TeamMember(IRModel):
    name: str
    thread_id: str
    #: The agent definition it runs (``agents/list``), or None for an ad hoc member.
    agent: str | None = None
    #: Its standing instructions (the agent's prompt, or the ad hoc ``instructions``).
    instructions: str = ""
    provider: str = ""
    model: str = ""
    #: Its policy mode: the stricter of the lead's (now) and ``mode_cap``.
    mode: Mode = Mode.ASK
    #: The agent's (or the member spec's) own mode, if any: the member never runs looser.
    mode_cap: Mode | None = None
    #: The tools it is offered (None: every tool a child may have).
    tools: list[str] | None = None
    status: MemberStatus = MemberStatus.IDLE
    turns: int = 0
    #: Its latest final answer (what the lead collects).
    last_result: str = ""
    error: str = ""
    usage: Usage = Field(default_factory=Usage)
    #: Messages waiting for it (it was at its turn limit); delivered when it next runs.
    inbox: list[str] = Field(default_factory=empty_list)


class MemberSpec(IRModel):
    """A member to start: an agent definition by name, or an ad hoc agent with instructions."""

    name: str
    agent: str | None = None
    instructions: str = ""
    #: Its first task; without one it waits for a message.
    prompt: str = ""
    #: ``model`` or ``provider/model`` (default: the agent's, else the lead's).
    model: str | None = None
    #: A stricter mode than the lead's (a looser one is never used).
    mode: Mode | None = None


class TeamTask(IRModel):
    task_id: str = Field(default_factory=lambda: new_id("ttask"))
    title: str
    detail: str = ""
    status: TeamTaskStatus = TeamTaskStatus.OPEN
    owner: str | None = None
    created_by: str = LEAD
    result: str = ""
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class TeamMessage(IRModel):
    message_id: str = Field(default_factory=lambda: new_id("tmsg"))
    sender: str
    #: A member's name, ``lead``, or ``all``.
    to: str
    text: str
    sent_at: float = Field(default_factory=now)
    #: How it reached each recipient: steered into a running turn, or woke it with a new turn.
    delivery: dict[str, Literal["steer", "turn", "queued"]] = Field(default_factory=dict)


class Team(IRModel):
    team_id: str = Field(default_factory=lambda: new_id("team"))
    name: str
    lead_thread_id: str
    cwd: str
    status: TeamStatus = TeamStatus.ACTIVE
    members: list[TeamMember] = Field(default_factory=empty_list)
    tasks: list[TeamTask] = Field(default_factory=empty_list)
    messages: list[TeamMessage] = Field(default_factory=empty_list)
    #: The member clients should show (``team/member/focus``); None shows the lead.
    focused: str | None = None
    #: Turns one member may be woken for by messages before further messages wait in its inbox.
    max_turns_per_member: int = 30
    #: Tokens and cost of all members together (the lead's own are on its thread).
    usage: Usage = Field(default_factory=Usage)
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)

    def member(self, name: str) -> TeamMember | None:
        return next((m for m in self.members if m.name == name), None)

    def member_of_thread(self, thread_id: str) -> TeamMember | None:
        return next((m for m in self.members if m.thread_id == thread_id), None)

    def total_usage(self) -> Usage:
        total = Usage()
        for member in self.members:
            total = total + member.usage
        return total
