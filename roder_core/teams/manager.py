"""Runs agent teams: members in parallel child threads of a lead, their messages and shared tasks.

A member is an ordinary stored thread whose parent is the lead, restricted to the tools its agent
may use and to a mode never looser than the lead's (recomputed when the lead's mode changes). A
message reaches its recipient at its next model call, like a steer: steered into the running turn,
or, when the recipient is idle, as the prompt of a new turn (a member woken more than
``max_turns_per_member`` times keeps further messages in its inbox until someone starts it). When
a member's turn ends, the lead gets its final answer as a message: that is how the lead collects
the results. Every change is written to the team's file (``roder_core.teams.files``) and
announced as ``team/updated``; after a crash, ``read`` shows each member as it was left (a turn
that was running is interrupted) and any later change takes the team up again, resuming member
threads as they are needed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.customization.definitions import AgentDefinition, split_model
from roder_core.customization.subagents import agent_tools, child_mode, list_agents
from roder_core.errors import RoderError, ThreadNotFoundError, TurnBusyError
from roder_core.ir import AgentMessageItem, Mode, ParentRef, ThreadStatus, TurnStatus, now
from roder_core.teams.files import TeamFiles
from roder_core.teams.framing import ENVELOPE_RULE, envelope
from roder_core.teams.model import (
    EVERYONE,
    LEAD,
    MEMBER_NAME,
    RESERVED_NAMES,
    MemberSpec,
    MemberStatus,
    Team,
    TeamError,
    TeamMember,
    TeamMessage,
    TeamStatus,
    TeamTask,
    TeamTaskStatus,
)
from roder_core.threads.events import (
    EventBus,
    ModeChanged,
    RuntimeEvent,
    TeamUpdated,
    ThreadStatusChanged,
    TokenUsageUpdated,
    TurnCompleted,
)
from roder_core.threads.starter import ThreadStarter

if TYPE_CHECKING:
    from roder_core.ir import Thread, Turn, UserMessageItem
    from roder_core.runtime.options import RuntimeOptions

log = logging.getLogger(__name__)

#: Tools only threads in a team are offered (they speak through ``ToolHost.team()``).
TEAM_TOOLS = ("team_message", "team_broadcast", "team_tasks")
#: Longest message a member may send (a runaway paste must not flood every context).
MAX_MESSAGE_CHARS = 20_000
#: Messages kept in a team's file (the oldest are dropped; every one is also in its threads).
MAX_KEPT_MESSAGES = 500


class TeamRuntime(ThreadStarter, Protocol):
    """The runtime as the team manager drives it (``Runtime`` provides it)."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def bus(self) -> EventBus: ...

    def thread(self, thread_id: str) -> Thread: ...

    async def resume_thread(self, thread_id: str) -> Thread: ...

    def tool_names(self) -> list[str]: ...

    async def start_turn(self, thread_id: str, text: str, *, sender: str = "") -> Turn: ...

    def steer(self, thread_id: str, text: str, expected_turn_id: str | None = None, *, sender: str = "") -> UserMessageItem: ...

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool: ...

    async def close_thread(self, thread_id: str) -> None: ...

    def active_turn_id(self, thread_id: str) -> str | None: ...

    def publish_live(self, event: RuntimeEvent) -> None: ...


def sender(team: Team) -> str:
    """How what a team delivers is labelled in its threads (``UserMessageItem.sender``)."""
    return f'team "{team.name}"'


class TeamManager:
    def __init__(self, runtime: TeamRuntime, files: TeamFiles) -> None:
        self._rt = runtime
        self.files = files
        #: Teams taken up by this process, by id.
        self._teams: dict[str, Team] = {}
        #: Thread id -> (team id, member name or ``lead``), for the live teams.
        self._seats: dict[str, tuple[str, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Messages steered into a lead's running turn, by item id: a turn that ends before its
        #: next model call hands them back, and they are delivered again.
        self._lead_steers: dict[str, str] = {}
        runtime.bus.add_listener(self._on_event)

    # ------------------------------------------------------------------ what tools see

    def channel(self, thread_id: str) -> SeatChannel | None:
        seat = self._seats.get(thread_id)
        if seat is None:
            return None
        team = self._teams.get(seat[0])
        if team is None or team.status is not TeamStatus.ACTIVE:
            return None
        return SeatChannel(self, team, seat[1])

    # ------------------------------------------------------------------ methods

    async def start(
        self, lead_thread_id: str, members: list[MemberSpec], *, name: str = "", tasks: list[str] | None = None
    ) -> Team:
        lead = await self._rt.resume_thread(lead_thread_id)
        seat = self._seats.get(lead.id)
        if seat is not None:
            role = "leads" if seat[1] == LEAD else f"is member {seat[1]!r} of"
            raise TeamError(f"thread {lead.id} already {role} team {seat[0]}; clean that team up first")
        self._check_specs(members, [])
        team = Team(name=name.strip()[:60] or "team", lead_thread_id=lead.id, cwd=lead.cwd)
        for title in tasks or []:
            if title.strip():
                team.tasks.append(TeamTask(title=title.strip()))
        self._teams[team.team_id] = team
        self._seats[lead.id] = (team.team_id, LEAD)
        self._save(team, "started")
        spawned = [(await self._spawn(team, spec), spec) for spec in members]
        # The lead learns of its team at its next model call (and its thread is saved from now
        # on, so the team can be taken up again after a crash).
        await self._deliver(team, LEAD, self._lead_briefing(team))
        for member, spec in spawned:  # once all exist, so each briefing names every teammate
            if spec.prompt.strip():
                await self._wake(team, member, spec.prompt.strip())
        return team

    async def add_member(self, team_id: str, spec: MemberSpec) -> TeamMember:
        team = await self._active(team_id)
        self._check_specs([spec], [m.name for m in team.members])
        member = await self._spawn(team, spec)
        if spec.prompt.strip():
            await self._wake(team, member, spec.prompt.strip())
        return member

    async def message(self, team_id: str, name: str, text: str, *, sender: str = "user") -> TeamMessage:
        """A message to one member (``team/member/message``): steered in, or it starts a turn."""
        team = await self._active(team_id)
        self._member(team, name)
        return await self.send(team, sender, name, text)

    async def interrupt(self, team_id: str, name: str) -> bool:
        team = await self._active(team_id)
        member = self._member(team, name)
        if self._rt.active_turn_id(member.thread_id) is None:
            return False
        return await self._rt.interrupt(member.thread_id)

    async def focus(self, team_id: str, name: str | None) -> Team:
        team = await self._active(team_id)
        if name in (None, "", LEAD):
            team.focused = None
        else:
            team.focused = self._member(team, name).name
        self._save(team, "focused", team.focused)
        return team

    def read(self, team_id: str) -> Team:
        """The team as it is now; a team no process runs (after a crash or a restart) as it was
        left, with a member whose turn was running shown as interrupted."""
        live = self._teams.get(team_id)
        if live is not None:
            return live.model_copy(deep=True)
        return _settled(self.files.load(team_id))

    def list_teams(self, lead_thread_id: str | None = None, limit: int | None = None) -> list[Team]:
        stored = {t.team_id: t for t in self.files.load_all()}
        stored.update({t.team_id: t for t in self._teams.values()})
        rows = [
            t if t.team_id in self._teams else _settled(t)
            for t in sorted(stored.values(), key=lambda t: t.created_at, reverse=True)
            if lead_thread_id is None or t.lead_thread_id == lead_thread_id
        ]
        return [t.model_copy(deep=True) for t in (rows[:limit] if limit else rows)]

    async def cleanup(self, team_id: str) -> Team:
        """Stop every member (a running turn is interrupted) and close its thread; the threads
        stay stored and resumable. The team is kept, marked cleaned up."""
        team = self._teams.get(team_id) or self.files.load(team_id)
        if team.status is TeamStatus.CLEANED_UP:
            return team
        team.status = TeamStatus.CLEANED_UP
        for member in team.members:
            try:
                await self._rt.close_thread(member.thread_id)
            except RoderError as exc:
                log.warning("team %s: closing %s: %s", team.team_id, member.name, exc)
            member.status = MemberStatus.STOPPED
            self._seats.pop(member.thread_id, None)
        if self._seats.get(team.lead_thread_id, ("", ""))[0] == team.team_id:
            self._seats.pop(team.lead_thread_id, None)
        self._teams.pop(team.team_id, None)
        self._save(team, "cleanedUp")
        return team

    # ------------------------------------------------------------------ messages and tasks

    async def send(self, team: Team, sender: str, to: str, text: str) -> TeamMessage:
        text = text.strip()
        if not text:
            raise TeamError("a message needs text")
        if len(text) > MAX_MESSAGE_CHARS:
            raise TeamError(f"a message is at most {MAX_MESSAGE_CHARS} characters ({len(text)} given); send a summary")
        names = [m.name for m in team.members if m.status is not MemberStatus.STOPPED]
        if to == EVERYONE:
            recipients = [n for n in [LEAD, *names] if n != sender]
        elif to == LEAD or to in names:
            if to == sender:
                raise TeamError("a message to yourself goes nowhere")
            recipients = [to]
        else:
            raise TeamError(f"no member {to!r} in team {team.name}; members: {', '.join([LEAD, *names])} (or {EVERYONE})")
        message = TeamMessage(sender=sender, to=to, text=text)
        for recipient in recipients:
            # each recipient's copy in an envelope of its own: the text cannot pass for the user
            framed = envelope(sender, recipient, text, broadcast=to == EVERYONE)
            message.delivery[recipient] = await self._deliver(team, recipient, framed, from_user=sender == "user")
        team.messages = [*team.messages, message][-MAX_KEPT_MESSAGES:]
        self._save(team, "message", sender if sender in names else None)
        return message

    def add_task(self, team: Team, by: str, title: str, detail: str = "") -> TeamTask:
        if not title.strip():
            raise TeamError("a task needs a title")
        task = TeamTask(title=title.strip(), detail=detail.strip(), created_by=by)
        team.tasks.append(task)
        self._save(team, "task", by if by != LEAD else None)
        return task

    def claim_task(self, team: Team, by: str, task_id: str) -> TeamTask:
        task = _task(team, task_id)
        if task.status is TeamTaskStatus.DONE:
            raise TeamError(f"task {task_id} is already done ({task.owner}: {task.result or 'no result'})")
        if task.owner not in (None, by):
            raise TeamError(f"task {task_id} is claimed by {task.owner}; pick another or message {task.owner}")
        task.status, task.owner, task.updated_at = TeamTaskStatus.CLAIMED, by, now()
        self._save(team, "task", by if by != LEAD else None)
        return task

    def complete_task(self, team: Team, by: str, task_id: str, result: str) -> TeamTask:
        task = _task(team, task_id)
        if task.owner not in (None, by) and by != LEAD:
            raise TeamError(f"task {task_id} is claimed by {task.owner}; only they (or the lead) complete it")
        task.status, task.owner, task.result, task.updated_at = TeamTaskStatus.DONE, task.owner or by, result.strip(), now()
        self._save(team, "task", by if by != LEAD else None)
        return task

    # ------------------------------------------------------------------ internals

    def _check_specs(self, specs: list[MemberSpec], taken: list[str]) -> None:
        seen = set(taken)
        if not specs and not taken:
            raise TeamError("a team needs at least one member")
        for spec in specs:
            if not MEMBER_NAME.match(spec.name) or spec.name in RESERVED_NAMES:
                raise TeamError(
                    f"invalid member name {spec.name!r}: use 1-32 lowercase letters, digits, - or _, "
                    f"starting with a letter, and none of {', '.join(sorted(RESERVED_NAMES))}"
                )
            if spec.name in seen:
                raise TeamError(f"member name {spec.name!r} is used twice")
            seen.add(spec.name)
            if spec.agent is not None:
                self._agent(spec.agent)

    def _agent(self, name: str) -> AgentDefinition:
        options = self._rt.options
        agents = {a.name: a for a in list_agents(options.cwd, options.paths, options.trusted, options.config)}
        if name not in agents:
            raise TeamError(f"unknown agent {name!r}; agents: {', '.join(sorted(agents))}")
        return agents[name]

    async def _spawn(self, team: Team, spec: MemberSpec) -> TeamMember:
        agent = self._agent(spec.agent) if spec.agent else None
        provider, model = split_model(spec.model or (agent.model if agent else None), self._rt.provider)
        if model is None and provider == self._rt.provider:
            model = self._rt.model
        caps = [m for m in (agent.mode if agent else None, spec.mode) if m is not None]
        cap = Mode(min(caps, key=lambda m: list(Mode).index(Mode(m)))) if caps else None
        tools = sorted(agent_tools(self._rt.tool_names(), agent) | set(TEAM_TOOLS) & set(self._rt.tool_names()))
        thread = await self._rt.start_thread(
            Path(team.cwd), provider, model, title=f"{team.name} · {spec.name}", parent=ParentRef(thread_id=team.lead_thread_id)
        )
        member = TeamMember(
            name=spec.name,
            thread_id=thread.id,
            agent=agent.name if agent else None,
            instructions=(agent.prompt if agent else spec.instructions).strip(),
            provider=thread.provider,
            model=thread.model,
            mode_cap=cap,
            tools=tools,
        )
        self._restrict(team, member)
        team.members.append(member)
        self._seats[thread.id] = (team.team_id, member.name)
        self._save(team, "member/started", member.name)
        return member

    def _restrict(self, team: Team, member: TeamMember) -> None:
        """The member's tools and mode: never looser than the lead's mode right now."""
        member.mode = Mode(child_mode(self._rt.thread_mode(team.lead_thread_id), member.mode_cap))
        tools = frozenset(member.tools) if member.tools is not None else None
        self._rt.restrict_thread(member.thread_id, tools=tools, mode=member.mode, agent=member.name)

    def _briefing(self, team: Team, member: TeamMember) -> str:
        others = [f"{m.name}" + (f" ({m.agent})" if m.agent else "") for m in team.members if m.name != member.name]
        lines = [
            f'You are "{member.name}", a member of the agent team "{team.name}". The lead ("{LEAD}") coordinates'
            + (f"; your teammates: {', '.join(others)}." if others else "."),
            "Talk to them with team_message {to, text} (to a member's name or lead) and team_broadcast {text}; "
            "their messages reach you in user messages. The shared task list is team_tasks: claim an item "
            "before you work on it and complete it with a short result.",
            ENVELOPE_RULE,
            "When your work is done, end with a concise report: the lead receives your final answer.",
        ]
        if member.instructions:
            lines.append(member.instructions)
        return "\n".join(lines)

    def _lead_briefing(self, team: Team) -> str:
        roster = ", ".join(m.name + (f" ({m.agent})" if m.agent else "") for m in team.members)
        return (
            f'[Team {team.name} started] You lead the agent team "{team.name}": {roster}. Each works in its own '
            "thread, in parallel, and reports its final answer to you as a message. Talk to them with "
            "team_message {to, text} or team_broadcast {text}; the shared task list is team_tasks. " + ENVELOPE_RULE
        )

    async def _deliver(self, team: Team, recipient: str, text: str, *, from_user: bool = False) -> Any:
        """Steer into the recipient's running turn, else start its next turn (a member at its
        turn limit keeps the message in its inbox, unless the user sent it)."""
        if recipient == LEAD:
            thread_id = team.lead_thread_id
            await self._rt.resume_thread(thread_id)
            for _attempt in range(3):  # a turn may end, or start, between the check and the call
                if self._rt.active_turn_id(thread_id) is not None:
                    try:
                        self._lead_steers[self._rt.steer(thread_id, text, sender=sender(team)).id] = team.team_id
                        return "steer"
                    except RoderError:
                        pass  # it ended just now: a new turn
                try:
                    await self._rt.start_turn(thread_id, text, sender=sender(team))
                    return "turn"
                except TurnBusyError:
                    continue  # another message started one first: steer into it
            raise TeamError(f"could not deliver to the lead of team {team.name}: its thread stays busy")
        member = self._member(team, recipient)
        await self._open(team, member)
        if self._rt.active_turn_id(member.thread_id) is not None:
            try:
                self._rt.steer(member.thread_id, text, sender=sender(team))
                return "steer"
            except RoderError:
                pass
        if member.turns >= team.max_turns_per_member and not from_user:
            member.inbox.append(text)
            return "queued"
        await self._wake(team, member, text)
        return "turn"

    async def _wake(self, team: Team, member: TeamMember, text: str) -> None:
        await self._open(team, member)
        if member.inbox:  # messages that waited (turn limit, or an interrupt) come first
            text, member.inbox = "\n\n".join([*member.inbox, text]), []
        if member.turns == 0:
            text = f"{self._briefing(team, member)}\n\nYour task:\n{text}"
        member.turns += 1
        member.status, member.error = MemberStatus.WORKING, ""
        self._save(team, "member/working", member.name)
        for _attempt in range(3):  # a turn may start, or end, between the two calls
            try:
                await self._rt.start_turn(member.thread_id, text, sender=sender(team))
                return
            except TurnBusyError:
                try:
                    self._rt.steer(member.thread_id, text, sender=sender(team))  # handed back if that turn ends first
                    return
                except RoderError:
                    continue
        raise TeamError(f"could not deliver to {member.name}: its thread stays busy")

    async def _open(self, team: Team, member: TeamMember) -> None:
        """A member thread closed by a restart is resumed (this process becomes its writer)."""
        if not self._is_open(member.thread_id):
            try:
                await self._rt.resume_thread(member.thread_id)
            except ThreadNotFoundError:
                if member.turns:
                    raise
                # Never ran, so never saved (a thread is written from its first turn): a new one.
                self._seats.pop(member.thread_id, None)
                thread = await self._rt.start_thread(
                    Path(team.cwd),
                    member.provider,
                    member.model,
                    title=f"{team.name} · {member.name}",
                    parent=ParentRef(thread_id=team.lead_thread_id),
                )
                member.thread_id = thread.id
                self._seats[thread.id] = (team.team_id, member.name)
        self._restrict(team, member)  # also when a client resumed it: its tools and mode are the team's

    async def _active(self, team_id: str) -> Team:
        """A live team, taking up one that no process runs (after a restart) on first use."""
        team = self._teams.get(team_id)
        if team is not None:
            return team
        team = _settled(self.files.load(team_id))
        if team.status is not TeamStatus.ACTIVE:
            raise TeamError(f"team {team_id} was cleaned up; start a new team")
        if team.lead_thread_id in self._seats:
            raise TeamError(f"thread {team.lead_thread_id} is in another team now")
        await self._rt.resume_thread(team.lead_thread_id)
        self._teams[team.team_id] = team
        self._seats[team.lead_thread_id] = (team.team_id, LEAD)
        for member in team.members:
            if member.status is not MemberStatus.STOPPED:
                self._seats[member.thread_id] = (team.team_id, member.name)
        self._save(team, "resumed")
        return team

    def _member(self, team: Team, name: str) -> TeamMember:
        member = team.member(name)
        if member is None:
            raise TeamError(f"no member {name!r} in team {team.name}; members: {', '.join(m.name for m in team.members)}")
        if member.status is MemberStatus.STOPPED:
            raise TeamError(f"member {name!r} was stopped")
        return member

    def _save(self, team: Team, change: str, member: str | None = None) -> None:
        team.updated_at = now()
        team.usage = team.total_usage()
        try:
            self.files.save(team)
        except OSError as exc:  # a full disk must not stop the team; say so loudly
            log.error("could not save team %s: %s", team.team_id, exc)
        self._rt.publish_live(
            TeamUpdated(thread_id=team.lead_thread_id, change=change, member=member, team=team.model_copy(deep=True))
        )

    # ------------------------------------------------------------------ runtime events

    def _on_event(self, event: RuntimeEvent) -> None:
        seat = self._seats.get(event.thread_id)
        if seat is None:
            return
        team = self._teams.get(seat[0])
        if team is None or team.status is not TeamStatus.ACTIVE:
            return
        if seat[1] == LEAD:
            if isinstance(event, TurnCompleted):
                again = [m.text for m in event.unsent_steers if self._lead_steers.pop(m.id, None)]
                if again:
                    self._spawn_task(self._deliver_again(team, "\n\n".join(again)))
            elif isinstance(event, ModeChanged):
                for each in team.members:
                    if each.status is not MemberStatus.STOPPED and self._is_open(each.thread_id):
                        self._restrict(team, each)
                self._save(team, "mode")
            return
        member = team.member(seat[1])
        if member is None:
            return
        if isinstance(event, ThreadStatusChanged):
            if event.status is ThreadStatus.WAITING_APPROVAL:
                member.status = MemberStatus.WAITING_APPROVAL
            elif event.status is ThreadStatus.ACTIVE:
                member.status = MemberStatus.WORKING
            else:
                return
            self._save(team, "member/status", member.name)
        elif isinstance(event, TokenUsageUpdated):
            member.usage = event.total
            self._save(team, "usage", member.name)
        elif isinstance(event, TurnCompleted):
            self._turn_ended(team, member, event)

    def _turn_ended(self, team: Team, member: TeamMember, event: TurnCompleted) -> None:
        status = event.turn.status
        try:
            thread = self._rt.thread(member.thread_id)
        except ThreadNotFoundError:  # closed meanwhile (team/cleanup): nothing more to read
            return
        turn = next((t for t in reversed(thread.turns) if t.id == event.turn.id), None)
        answers = [i.text for i in (turn.items if turn else []) if isinstance(i, AgentMessageItem) and i.text.strip()]
        if answers:
            member.last_result = answers[-1].strip()
        member.usage = thread.usage
        member.error = event.turn.error.message if event.turn.error else ""
        member.status = {
            TurnStatus.COMPLETED: MemberStatus.IDLE,
            TurnStatus.FAILED: MemberStatus.FAILED,
        }.get(status, MemberStatus.INTERRUPTED)
        pending = [s.text for s in event.unsent_steers]
        if status is TurnStatus.INTERRUPTED:
            # Stopped on purpose: what came too late waits in its inbox for its next turn.
            member.inbox += pending
            pending = []
        self._save(team, "member/finished", member.name)
        self._spawn_task(self._after_turn(team, member, status, pending))

    async def _after_turn(self, team: Team, member: TeamMember, status: TurnStatus, pending: list[str]) -> None:
        """Messages that arrived too late for the turn start the next one; otherwise the lead
        gets the member's result (not after an interrupt: the user stopped it on purpose)."""
        if team.status is not TeamStatus.ACTIVE:
            return
        try:
            if pending:
                await self._wake(team, member, "\n\n".join(pending))
            elif status is not TurnStatus.INTERRUPTED:
                what = member.last_result if status is TurnStatus.COMPLETED else f"it failed: {member.error}"
                await self.send(team, member.name, LEAD, f"{member.name} finished ({status}).\n\n{what}".strip())
        except RoderError as exc:
            log.warning("team %s: after %s's turn: %s", team.team_id, member.name, exc)

    async def _deliver_again(self, team: Team, text: str) -> None:
        try:
            await self._deliver(team, LEAD, text)
        except RoderError as exc:
            log.warning("team %s: a message to the lead was not delivered: %s", team.team_id, exc)

    def _spawn_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _is_open(self, thread_id: str) -> bool:
        try:
            self._rt.thread(thread_id)
        except ThreadNotFoundError:
            return False
        return True


class SeatChannel:
    """``kernel.teams.TeamChannel`` for one seat (a member, or the lead) of a live team."""

    def __init__(self, manager: TeamManager, team: Team, speaker: str) -> None:
        self._manager = manager
        self._team = team
        self._speaker = speaker

    @property
    def team_name(self) -> str:
        return self._team.name

    @property
    def speaker(self) -> str:
        return self._speaker

    def roster(self) -> list[TeamMember]:
        return [m.model_copy() for m in self._team.members]

    async def send(self, to: str, text: str) -> str:
        message = await self._manager.send(self._team, self._speaker, to, text)
        how = {"steer": "delivered into its running turn", "turn": "started its next turn", "queued": "queued in its inbox"}
        return "; ".join(f"{name}: {how[kind]}" for name, kind in message.delivery.items())

    def tasks(self) -> list[TeamTask]:
        return [t.model_copy() for t in self._team.tasks]

    def add_task(self, title: str, detail: str = "") -> TeamTask:
        return self._manager.add_task(self._team, self._speaker, title, detail)

    def claim_task(self, task_id: str) -> TeamTask:
        return self._manager.claim_task(self._team, self._speaker, task_id)

    def complete_task(self, task_id: str, result: str = "") -> TeamTask:
        return self._manager.complete_task(self._team, self._speaker, task_id, result)


def _task(team: Team, task_id: str) -> TeamTask:
    """A task by its id, or by its exact title (what a model remembers)."""
    wanted = task_id.strip()
    task = next((t for t in team.tasks if t.task_id == wanted), None) or next(
        (t for t in team.tasks if t.title.lower() == wanted.lower()), None
    )
    if task is None:
        known = ", ".join(f"{t.task_id} ({t.title})" for t in team.tasks) or "none yet"
        raise TeamError(f"no task {task_id!r}; tasks: {known}")
    return task


def _settled(team: Team) -> Team:
    """A team read from its file with no process running it: work in flight was cut off."""
    for member in team.members:
        if member.status in (MemberStatus.WORKING, MemberStatus.WAITING_APPROVAL):
            member.status = MemberStatus.INTERRUPTED
    return team
