"""Plugin monitors: background commands whose output reaches the model.

A monitor (``monitors/monitors.json``: ``{name, command, description, when}``) runs as a
background task of the thread (the ``shell`` executor: sandboxed, scrubbed, killed when the
thread closes, listed by ``tasks/list`` and the tasks view). ``when: always`` starts it at the
thread's first turn; ``on-skill-invoke:<skill>`` when the model first loads that skill. Claude
Code wakes the model for each line; Roder has no turn without a prompt, so what a monitor
printed since the last turn is given to the next turn as context (newest output kept when there
is much). Child threads (subagents, hook judges) start no monitors of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roder_core import ContextBlock, ContextQuery, HookOutcome, HookPoint
from roder_core.kernel.tasks import TaskBoard
from roder_core.kernel.tools import ToolHost
from roder_core.plugins.components import PluginMonitor

log = logging.getLogger(__name__)
#: Characters of monitor output one turn's context may carry (the newest are kept).
MAX_OUTPUT_CHARS = 6_000


@dataclass
class _Running:
    monitor: PluginMonitor
    task_id: str
    board: TaskBoard
    offset: int = 0
    ended_reported: bool = False


@dataclass
class _ThreadMonitors:
    running: dict[str, _Running] = field(default_factory=dict)


class PluginMonitors:
    """The hook that starts monitors and the context provider that hands on their output."""

    def __init__(self, monitors: list[PluginMonitor], plugin: str = "") -> None:
        self.monitors = monitors
        #: The plugin they belong to, in the service ids (each plugin's monitors are its own service).
        self.plugin = plugin
        self.host_for: Callable[[str], ToolHost | None] | None = None
        self._threads: dict[str, _ThreadMonitors] = {}

    def id(self) -> str:
        return f"plugin-monitors:{self.plugin}" if self.plugin else "plugin-monitors"

    async def aclose(self) -> None:
        """The plugin was disabled or removed (or Roder ends): its monitors stop."""
        for state in self._threads.values():
            for running in state.running.values():
                try:
                    await running.board.cancel(running.task_id)
                except (KeyError, RuntimeError) as exc:
                    log.debug("monitor %s already gone: %s", running.monitor.name, exc)
            state.running.clear()

    def points(self) -> frozenset[HookPoint]:
        points = {HookPoint.BEFORE_TURN}
        if any(m.skill for m in self.monitors):
            points.add(HookPoint.TOOL_CALL_BEFORE)
        return frozenset(points)

    def bind_hosts(self, host_for: Callable[[str], ToolHost | None]) -> None:
        self.host_for = host_for

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        thread_id = str(payload.get("thread_id") or "")
        if point == HookPoint.BEFORE_TURN:
            if payload.get("parent_thread_id") is None:
                self._threads.setdefault(thread_id, _ThreadMonitors())
                await self._start(thread_id, [m for m in self.monitors if m.skill is None])
        elif payload.get("tool") == "skill" and thread_id in self._threads:
            name = str((payload.get("arguments") or {}).get("name") or "")
            await self._start(thread_id, [m for m in self.monitors if m.skill is not None and name in (m.skill, _short(m.skill))])
        return None  # never gates anything

    async def _start(self, thread_id: str, monitors: list[PluginMonitor]) -> None:
        state = self._threads[thread_id]
        todo = [m for m in monitors if m.name not in state.running]
        host = self.host_for(thread_id) if self.host_for is not None and todo else None
        if host is None:
            return
        for monitor in todo:
            try:
                info = await host.tasks.submit("shell", {"command": monitor.command})
            except Exception as exc:  # no shell executor, a refused command: the turn goes on
                log.warning("monitor %s of plugin %s could not start: %s", monitor.name, monitor.plugin, exc)
                continue
            state.running[monitor.name] = _Running(monitor, info.id, host.tasks)

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        """What each monitor of the thread printed since the last turn (a "turn" block)."""
        state = self._threads.get(query.thread_id)
        if state is None or not query.turn_start:  # output is handed on once, with the turn
            return []
        parts = []
        for running in state.running.values():
            try:
                sliced = running.board.output(running.task_id, running.offset)
                info = running.board.get(running.task_id)
            except KeyError:
                continue
            running.offset = sliced.next
            text = sliced.text.strip()
            monitor = running.monitor
            about = f"Monitor {monitor.name}" + (f" ({monitor.description})" if monitor.description else "")
            if text:
                parts.append(f"{about} printed since the last turn:\n{text}")
            if info.status != "running" and not running.ended_reported:
                running.ended_reported = True
                parts.append(f"{about} stopped ({info.status}{': ' + info.error if info.error else ''}).")
        if not parts:
            return []
        text = "\n\n".join(parts)
        if len(text) > MAX_OUTPUT_CHARS:
            text = "[older monitor output left out]\n" + text[-MAX_OUTPUT_CHARS:]
        return [ContextBlock(source="monitors", kind="monitor-output", priority=75, placement="turn", text=text)]


def _short(skill: str) -> str:
    return skill.rpartition(":")[2]


class MonitorOutput:
    """The context-provider face of ``PluginMonitors`` (a service has one ``id``)."""

    def __init__(self, monitors: PluginMonitors) -> None:
        self.monitors = monitors

    def id(self) -> str:
        plugin = self.monitors.plugin
        return f"monitor-output:{plugin}" if plugin else "monitor-output"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        return await self.monitors.load_context(query)
