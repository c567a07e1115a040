"""Subagents: agent definitions and the traces of child threads, for every client.

The ``task`` tool (roder_ext_subagents) runs a child thread with its own context, tool set and
policy mode. While it runs, its trace is live in the runtime; when it ends, the trace (the
child's items) is stored in the parent's ``task`` tool result, so ``turn/subagentTraces/list``
and ``turn/subagentTrace/read`` work for resumed threads too. ``agents/list`` lists the built-in
agents plus ``.roder/agents/*.md`` (trusted folders) and the user config dir's ``agents/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.customization.definitions import AgentDefinition, DefinitionRoots
from roder_core.errors import RoderError
from roder_core.ir import Mode, ToolResultItem
from roder_core.plugins.components import discover_with_plugins

if TYPE_CHECKING:
    from pathlib import Path

    from roder_core.ir import Thread
    from roder_core.settings.config import RoderConfig
    from roder_core.settings.paths import RoderPaths

#: Tools a child never gets: no recursion, no leaving plan mode on the parent's behalf.
CHILD_EXCLUDED_TOOLS = frozenset({"task", "exit_plan"})

BUILTIN_AGENTS: tuple[AgentDefinition, ...] = (
    AgentDefinition(
        name="general",
        description="General-purpose agent for multi-step tasks: research, then change code if asked.",
        prompt=(
            "You are a subagent working on one task for another agent. Do the task completely, then "
            "answer with a concise report of what you found or changed; that report is all the other "
            "agent sees."
        ),
        scope="builtin",
    ),
    AgentDefinition(
        name="explore",
        description="Read-only explorer: finds files, reads code and answers questions about the codebase.",
        prompt=(
            "You are a read-only exploration subagent. Search and read to answer the question; never try "
            "to change anything. Answer with the facts found, citing file paths and line numbers."
        ),
        scope="builtin",
        mode="plan",
    ),
)

#: Strictest first, as ``Mode`` lists them.
_MODE_RANK: dict[str, int] = {mode: rank for rank, mode in enumerate(Mode)}


def child_mode(parent_mode: str, agent_mode: str | None) -> str:
    """A child never runs with more freedom than its parent: the stricter of the two modes."""
    if agent_mode is None or agent_mode not in _MODE_RANK:
        return parent_mode
    return min(parent_mode, agent_mode, key=lambda m: _MODE_RANK.get(m, 1))


def agent_tools(available: list[str], agent: AgentDefinition | None) -> frozenset[str]:
    """The tools a child runs with: the agent's list (Claude Code names like ``Read`` match
    ``read``; ``mcp__server__`` matches that server's tools), never task or exit_plan."""
    names = [n for n in available if n not in CHILD_EXCLUDED_TOOLS]
    if agent is None or agent.tools is None:
        return frozenset(names)
    wanted = {t.split("(")[0].strip().lower() for t in agent.tools}
    return frozenset(n for n in names if n.lower() in wanted or any(n.lower().startswith(w) for w in wanted if w.endswith("__")))


def list_agents(cwd: Path, paths: RoderPaths, trusted: bool, config: RoderConfig | None = None) -> list[AgentDefinition]:
    """Built-in agents, overridden by user and (trusted) project definitions of the same name,
    plus enabled plugins' agents (``plugin:agent``). ``config``'s read rules and ``deny_read``
    apply to the definition files as to every other read of Roder's."""
    agents = {a.name: a for a in BUILTIN_AGENTS}
    agents.update(discover_with_plugins(DefinitionRoots(cwd, paths, trusted, config)).agents)
    return sorted(agents.values(), key=lambda a: (a.scope != "builtin", a.name))


def agent_json(agent: AgentDefinition) -> dict[str, Any]:
    return {
        "name": agent.name,
        "description": agent.description,
        "scope": agent.scope,
        "tools": agent.tools,
        "model": agent.model,
        "mode": agent.mode,
        "path": str(agent.path) if agent.path else None,
    }


@dataclass
class TraceRecord:
    """One subagent run, as listed by ``turn/subagentTraces/list``."""

    trace_id: str
    agent: str
    description: str
    parent_thread_id: str
    parent_turn_id: str
    call_id: str
    child_thread_id: str
    status: str = "running"  # running | completed | failed | interrupted
    started_at: float = field(default_factory=time.time)
    completed_at: float | None = None
    result: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id,
            "agent": self.agent,
            "description": self.description,
            "threadId": self.parent_thread_id,
            "turnId": self.parent_turn_id,
            "callId": self.call_id,
            "childThreadId": self.child_thread_id,
            "status": self.status,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "result": self.result,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceRecord:
        return cls(
            trace_id=data["traceId"],
            agent=data.get("agent", ""),
            description=data.get("description", ""),
            parent_thread_id=data.get("threadId", ""),
            parent_turn_id=data.get("turnId", ""),
            call_id=data.get("callId", ""),
            child_thread_id=data.get("childThreadId", ""),
            status=data.get("status", "completed"),
            started_at=data.get("startedAt", 0.0),
            completed_at=data.get("completedAt"),
            result=data.get("result", ""),
        )


def _stored(thread: Thread, turn_id: str | None) -> list[tuple[TraceRecord, list[dict[str, Any]]]]:
    found = []
    for turn in thread.turns:
        if turn_id is not None and turn.id != turn_id:
            continue
        for item in turn.items:
            if isinstance(item, ToolResultItem) and isinstance(item.data, dict) and "subagent" in item.data:
                data = item.data["subagent"]
                found.append((TraceRecord.from_json(data), list(data.get("items", []))))
    return found


class TraceSource(Protocol):
    """Where traces are found (``Runtime`` provides it): threads, and the subagents running now."""

    @property
    def subagent_traces(self) -> dict[str, TraceRecord]: ...

    def thread(self, thread_id: str) -> Thread: ...

    async def resume_thread(self, thread_id: str) -> Thread: ...

    async def full_thread(self, thread_id: str) -> Thread: ...


async def _thread(runtime: TraceSource, thread_id: str) -> Thread:
    """The whole thread (every turn may hold a trace), open or resumed."""
    try:
        runtime.thread(thread_id)
    except RoderError:
        thread_id = (await runtime.resume_thread(thread_id)).id
    return await runtime.full_thread(thread_id)


async def list_traces(runtime: TraceSource, thread_id: str, turn_id: str | None = None) -> list[dict[str, Any]]:
    """Subagent runs of a thread (optionally one turn): finished ones from the thread, running
    ones from the runtime."""
    thread = await _thread(runtime, thread_id)
    rows = {record.trace_id: record for record, _ in _stored(thread, turn_id)}
    for record in runtime.subagent_traces.values():
        if record.parent_thread_id == thread_id and (turn_id is None or record.parent_turn_id == turn_id):
            rows.setdefault(record.trace_id, record)
    return [r.to_json() for r in sorted(rows.values(), key=lambda r: r.started_at)]


async def read_trace(runtime: TraceSource, thread_id: str, trace_id: str) -> dict[str, Any]:
    """One trace with the child's items (live while it runs, stored once it ended)."""
    thread = await _thread(runtime, thread_id)
    for record, stored_items in _stored(thread, None):
        if record.trace_id == trace_id:
            return {**record.to_json(), "items": stored_items}
    live = runtime.subagent_traces.get(trace_id)
    if live is None or live.parent_thread_id != thread_id:
        raise RoderError(f"no subagent trace {trace_id!r} in thread {thread_id}")
    try:
        child_items = [i.wire() for i in runtime.thread(live.child_thread_id).items()]
    except RoderError:
        child_items = []
    return {**live.to_json(), "items": child_items}
