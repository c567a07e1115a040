"""The app's side of agent teams: ``/team`` commands, ``team/updated`` events, and the two
methods the app implements itself (``team/pane/focus``, ``team/pane/cleanup``: only a client
draws panes). Every team action is a typed ``team/*`` call through the in-process client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.server.errors import InvalidParams, RpcError
from roder_core.server.protocol import THREAD_READ, ThreadReadParams
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
    TeamListParams,
    TeamMemberMessageParams,
    TeamMemberParams,
    TeamMemberStartParams,
    TeamResult,
    TeamStartParams,
)
from roder_core.teams.model import MemberSpec, Team, TeamStatus
from roder_tui.widgets.team_status import usage_text

if TYPE_CHECKING:
    from roder_core.server.app_client import AppClient
    from roder_tui.widgets.team_panes import TeamPanes


class TeamHost(Protocol):
    """What team control asks of the app (``RoderApp`` is it): named here so this module never
    imports the app or reaches into its private state."""

    def open_thread(self) -> str:
        """The open thread, which a new team is led from (an error when none is open)."""
        ...

    def arrange_team(self) -> None:
        """Lay the panes and the team bar out again after a team change."""
        ...

    def show_info(self, title: str, text: str) -> None: ...

    def notify(self, message: str, *, title: str = ...) -> None: ...


USAGE = (
    "/team start NAME[=AGENT],NAME... TASK | add NAME[=AGENT] TASK | msg NAME TEXT | stop NAME | focus NAME"
    " | list | cleanup | hide"
)


def member_spec(text: str, task: str) -> MemberSpec:
    """``name`` or ``name=agent`` (from /team start and /team add), with its first task."""
    name, _, agent = text.strip().partition("=")
    return MemberSpec(name=name.strip(), agent=agent.strip() or None, prompt=task)


class TeamControl:
    def __init__(self, host: TeamHost, panes: TeamPanes, client: Callable[[], AppClient], family: set[str]) -> None:
        self.host = host
        self.panes = panes
        self._client = client
        #: The app's threads whose approvals it answers: each member's thread joins them.
        self._family = family

    def team_id(self) -> str:
        team = self.panes.team
        if team is None:
            raise InvalidParams("no team here: start one with /team start NAME,NAME TASK")
        return str(team.team_id)

    # ------------------------------------------------------------------ showing

    async def show_team_of(self, thread_id: str) -> None:
        """The active team the shown thread leads (if any), with its members' work so far."""
        try:
            teams = (await self._client().call(TEAM_LIST, TeamListParams(lead_thread_id=thread_id))).teams
        except RpcError:
            teams = []
        await self.load(next((t for t in teams if t.status is TeamStatus.ACTIVE), None))

    async def load(self, team: Team | None) -> None:
        self.panes.hidden = None
        history: dict[str, list[Any]] = {}
        for member in team.members if team is not None else []:
            self._family.add(member.thread_id)  # its approvals are answered here
            try:
                params = ThreadReadParams(thread_id=member.thread_id, include_turns=True)
                history[member.name] = list((await self._client().call(THREAD_READ, params)).thread.items())
            except RpcError:
                history[member.name] = []
        await self.panes.show_team(team, history)
        self.host.arrange_team()

    async def on_updated(self, team: Team) -> None:
        """A ``team/updated`` for the shown lead: new panes, new states, the team bar."""
        current = self.panes.team
        if current is None or current.team_id != team.team_id:
            if team.status is not TeamStatus.ACTIVE or self.panes.hidden == team.team_id:
                return
            await self.load(team)
        else:
            await self.panes.update_team(team)
        for member in team.members:
            self._family.add(member.thread_id)
        self.host.arrange_team()

    # ------------------------------------------------------------------ the app's own methods

    async def pane_focus(self, params: TeamFocusParams) -> TeamResult:
        """``team/pane/focus``: show a member's pane (or the lead's transcript), and tell other
        clients through ``team/member/focus``."""
        team = self.panes.team
        if team is None or team.team_id != params.team_id:
            raise InvalidParams(f"team {params.team_id} has no panes here")
        name = None if params.name in (None, "", "lead") else params.name
        try:
            self.panes.focus_member(name)
        except ValueError as exc:
            raise InvalidParams(str(exc)) from None
        result = await self._client().call(TEAM_MEMBER_FOCUS, TeamFocusParams(team_id=team.team_id, name=name))
        self.host.arrange_team()
        return result

    async def pane_cleanup(self, params: TeamIdParams) -> TeamResult:
        """``team/pane/cleanup``: close a team's panes (the team keeps running)."""
        team = self.panes.team
        if team is None or team.team_id != params.team_id:
            raise InvalidParams(f"team {params.team_id} has no panes here")
        await self.panes.show_team(None)
        self.panes.hidden = team.team_id  # its updates no longer reopen the panes
        self.host.arrange_team()
        return TeamResult(team=team)

    async def next_pane(self) -> None:
        team = self.panes.team
        if team is None:
            self.host.notify("no team here: /team start NAME,NAME TASK", title="panes")
            return
        name = self.panes.cycle()
        await self._client().call(TEAM_PANE_FOCUS, TeamFocusParams(team_id=team.team_id, name=name))

    async def message_focused(self, text: str) -> None:
        """What is typed while a member's pane has the focus goes to that member."""
        member = self.panes.focused
        if member is None:
            raise RuntimeError("no member's pane has the focus (the lead's prompt sends turns)")
        params = TeamMemberMessageParams(team_id=self.team_id(), name=member, text=text)
        await self._client().call(TEAM_MEMBER_MESSAGE, params)

    # ------------------------------------------------------------------ /team

    async def command(self, arguments: str) -> None:
        """``/team [start|add|msg|stop|focus|list|cleanup|hide] ...``; without arguments, the team."""
        client = self._client()
        verb, _, rest = arguments.strip().partition(" ")
        rest = rest.strip()
        if verb in ("", "read", "show"):
            await self.show_info()
        elif verb == "start":
            names, _, task = rest.partition(" ")
            members = [member_spec(part, task.strip()) for part in names.split(",") if part.strip()]
            if not members:
                raise InvalidParams(USAGE)
            params = TeamStartParams(lead_thread_id=self.host.open_thread(), members=members)
            await self.load((await client.call(TEAM_START, params)).team)
        elif verb == "add":
            spec, _, task = rest.partition(" ")
            params_add = TeamMemberStartParams(team_id=self.team_id(), member=member_spec(spec, task.strip()))
            await client.call(TEAM_MEMBER_START, params_add)
        elif verb == "msg":
            name, _, text = rest.partition(" ")
            await client.call(TEAM_MEMBER_MESSAGE, TeamMemberMessageParams(team_id=self.team_id(), name=name, text=text))
        elif verb == "stop":
            stopped = await client.call(TEAM_MEMBER_INTERRUPT, TeamMemberParams(team_id=self.team_id(), name=rest))
            if not stopped.interrupted:
                self.host.notify(f"{rest} had no turn running", title="/team stop")
        elif verb == "focus":
            await client.call(TEAM_PANE_FOCUS, TeamFocusParams(team_id=self.team_id(), name=rest or None))
        elif verb == "list":
            teams = (await client.call(TEAM_LIST, TeamListParams())).teams
            lines = [f"{t.team_id}  {t.name}  ({t.status}, {len(t.members)} members)" for t in teams]
            self.host.show_info("/team list", "\n".join(lines) or "no teams yet")
        elif verb == "cleanup":
            team_id = self.team_id()
            await client.call(TEAM_CLEANUP, TeamIdParams(team_id=team_id))
            await client.call(TEAM_PANE_CLEANUP, TeamIdParams(team_id=team_id))
        elif verb == "hide":
            await client.call(TEAM_PANE_CLEANUP, TeamIdParams(team_id=self.team_id()))
        else:
            raise InvalidParams(f"unknown /team command {verb!r}; {USAGE}")

    async def show_info(self) -> None:
        team = (await self._client().call(TEAM_READ, TeamIdParams(team_id=self.team_id()))).team
        lines = [f"team {team.name} ({team.status}) · {usage_text(team.usage)}", ""]
        for m in team.members:
            agent = f" ({m.agent})" if m.agent else ""
            lines.append(f"{m.name}{agent}: {m.status}, {m.mode} mode, {m.turns} turns, {usage_text(m.usage)}")
            if m.last_result:
                lines.append(f"  last result: {m.last_result[:300]}")
        if team.tasks:
            lines += ["", "tasks:"]
            lines += [f"  {t.status} {t.title}" + (f" [{t.owner}]" if t.owner else "") for t in team.tasks]
        self.host.show_info("/team", "\n".join(lines))
