"""Protocol models of agent teams (seed 004 ``team/*``): a lead thread's members, each a named
agent in its own child thread, with a shared task list and messages. ``team/updated``
notifications follow every change. ``team/pane/focus`` and ``team/pane/cleanup`` are a client
concern: the server answers them with an error saying so, the TUI implements them."""

from __future__ import annotations

from pydantic import Field

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, ProtocolModel, register
from roder_core.teams.model import MemberSpec, Team, TeamMember, TeamMessage

GROUP = "teams"
#: Methods a client implements (panes are drawn by the client); the server refuses them.
CLIENT_METHODS = ("team/pane/focus", "team/pane/cleanup")


class TeamStartParams(ProtocolModel):
    lead_thread_id: str
    members: list[MemberSpec] = Field(min_length=1)
    name: str = ""
    #: Items for the shared task list.
    tasks: list[str] = Field(default_factory=empty_list)


class TeamResult(ProtocolModel):
    team: Team


class TeamIdParams(ProtocolModel):
    """Names a team; the base of every params model about one team (or one of its members)."""

    team_id: str


class TeamListParams(ProtocolModel):
    lead_thread_id: str | None = None
    limit: int | None = Field(default=None, ge=1)


class TeamListResult(ProtocolModel):
    teams: list[Team]


class TeamMemberStartParams(TeamIdParams):
    member: MemberSpec


class TeamMemberResult(ProtocolModel):
    team: Team
    member: TeamMember


class TeamMessageResult(ProtocolModel):
    team_id: str
    message: TeamMessage


class TeamMemberParams(TeamIdParams):
    name: str


class TeamMemberMessageParams(TeamMemberParams):
    text: str = Field(min_length=1)


class TeamInterruptResult(ProtocolModel):
    #: False when the member had no turn running.
    interrupted: bool


class TeamFocusParams(TeamIdParams):
    #: A member's name; omitted or ``lead`` focuses the lead.
    name: str | None = None


TEAM_START = register(
    MethodSpec(
        "team/start",
        GROUP,
        TeamStartParams,
        TeamResult,
        "Start a team for a lead thread: each member (an agent definition or ad hoc) runs in its own child thread.",
    )
)

TEAM_LIST = register(
    MethodSpec("team/list", GROUP, TeamListParams, TeamListResult, "Teams, newest first (optionally of one lead thread).")
)

TEAM_READ = register(
    MethodSpec(
        "team/read",
        GROUP,
        TeamIdParams,
        TeamResult,
        "A team: members with status, last result and usage, the task list and recent messages.",
    )
)

TEAM_MEMBER_START = register(
    MethodSpec("team/member/start", GROUP, TeamMemberStartParams, TeamMemberResult, "Add a member to a team.")
)

TEAM_MEMBER_MESSAGE = register(
    MethodSpec(
        "team/member/message",
        GROUP,
        TeamMemberMessageParams,
        TeamMessageResult,
        "Send a member a message: steered into its running turn, or the prompt of its next turn.",
    )
)

TEAM_MEMBER_INTERRUPT = register(
    MethodSpec("team/member/interrupt", GROUP, TeamMemberParams, TeamInterruptResult, "Interrupt a member's running turn.")
)

TEAM_MEMBER_FOCUS = register(
    MethodSpec(
        "team/member/focus", GROUP, TeamFocusParams, TeamResult, "Say which member clients should show (team/updated tells them)."
    )
)

TEAM_CLEANUP = register(
    MethodSpec(
        "team/cleanup",
        GROUP,
        TeamIdParams,
        TeamResult,
        "Stop every member and close its thread (the threads stay stored and resumable).",
    )
)

TEAM_PANE_FOCUS = register(
    MethodSpec(
        "team/pane/focus",
        GROUP,
        TeamFocusParams,
        TeamResult,
        "Client concern: show a member's pane (the TUI implements it; the server answers -32601).",
    )
)

TEAM_PANE_CLEANUP = register(
    MethodSpec(
        "team/pane/cleanup",
        GROUP,
        TeamIdParams,
        TeamResult,
        "Client concern: close a team's panes (the TUI implements it; the server answers -32601).",
    )
)
