"""Team methods: the runtime's team manager, driven over the control plane. The pane methods are
a client concern (the TUI implements them) and are refused here with a message saying so."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import METHOD_NOT_FOUND, InvalidParams, RpcError
from roder_core.server.protocol_teams import (
    TEAM_CLEANUP,
    TEAM_LIST,
    TEAM_MEMBER_FOCUS,
    TEAM_MEMBER_INTERRUPT,
    TEAM_MEMBER_MESSAGE,
    TEAM_MEMBER_START,
    TEAM_PANE_CLEANUP,
    TEAM_PANE_FOCUS,
    TEAM_READ,
    TEAM_START,
    TeamFocusParams,
    TeamIdParams,
    TeamInterruptResult,
    TeamListParams,
    TeamListResult,
    TeamMemberMessageParams,
    TeamMemberParams,
    TeamMemberResult,
    TeamMemberStartParams,
    TeamMessageResult,
    TeamResult,
    TeamStartParams,
)
from roder_core.teams.model import TeamError

T = TypeVar("T")


async def _checked(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except TeamError as exc:
        raise InvalidParams(str(exc)) from None


@handles(TEAM_START)
async def team_start(app: Dispatcher, params: TeamStartParams, ctx: CallContext) -> TeamResult:
    teams = app.runtime.teams
    team = await _checked(lambda: teams.start(params.lead_thread_id, params.members, name=params.name, tasks=params.tasks))
    return TeamResult(team=teams.read(team.team_id))


@handles(TEAM_LIST)
async def team_list(app: Dispatcher, params: TeamListParams, ctx: CallContext) -> TeamListResult:
    return TeamListResult(teams=app.runtime.teams.list_teams(params.lead_thread_id, params.limit))


@handles(TEAM_READ)
async def team_read(app: Dispatcher, params: TeamIdParams, ctx: CallContext) -> TeamResult:
    async def read() -> TeamResult:
        return TeamResult(team=app.runtime.teams.read(params.team_id))

    return await _checked(read)


@handles(TEAM_MEMBER_START)
async def member_start(app: Dispatcher, params: TeamMemberStartParams, ctx: CallContext) -> TeamMemberResult:
    teams = app.runtime.teams
    member = await _checked(lambda: teams.add_member(params.team_id, params.member))
    return TeamMemberResult(team=teams.read(params.team_id), member=member)


@handles(TEAM_MEMBER_MESSAGE)
async def member_message(app: Dispatcher, params: TeamMemberMessageParams, ctx: CallContext) -> TeamMessageResult:
    message = await _checked(lambda: app.runtime.teams.message(params.team_id, params.name, params.text))
    return TeamMessageResult(team_id=params.team_id, message=message)


@handles(TEAM_MEMBER_INTERRUPT)
async def member_interrupt(app: Dispatcher, params: TeamMemberParams, ctx: CallContext) -> TeamInterruptResult:
    return TeamInterruptResult(interrupted=await _checked(lambda: app.runtime.teams.interrupt(params.team_id, params.name)))


@handles(TEAM_MEMBER_FOCUS)
async def member_focus(app: Dispatcher, params: TeamFocusParams, ctx: CallContext) -> TeamResult:
    team = await _checked(lambda: app.runtime.teams.focus(params.team_id, params.name))
    return TeamResult(team=team.model_copy(deep=True))


@handles(TEAM_CLEANUP)
async def team_cleanup(app: Dispatcher, params: TeamIdParams, ctx: CallContext) -> TeamResult:
    team = await _checked(lambda: app.runtime.teams.cleanup(params.team_id))
    return TeamResult(team=team.model_copy(deep=True))


def _client_concern(method: str) -> RpcError:
    return RpcError(
        METHOD_NOT_FOUND,
        f"{method}: panes are drawn by the client, so the client implements this method (the Roder TUI does); "
        "use team/member/focus to tell every client which member to show",
        {"group": "teams", "clientConcern": True},
    )


@handles(TEAM_PANE_FOCUS)
async def pane_focus(app: Dispatcher, params: TeamFocusParams, ctx: CallContext) -> TeamResult:
    raise _client_concern("team/pane/focus")


@handles(TEAM_PANE_CLEANUP)
async def pane_cleanup(app: Dispatcher, params: TeamIdParams, ctx: CallContext) -> TeamResult:
    raise _client_concern("team/pane/cleanup")
