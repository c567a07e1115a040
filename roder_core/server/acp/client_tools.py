"""Brokers that use the ACP client's own capabilities (``fs/*``, ``terminal/*``) when offered.

* Files: every read and write still goes through Roder's workspace fs broker (scoping, protected
  paths, policy); when the client offers ``fs.writeTextFile`` each text write is also handed to
  the editor with ``fs/write_text_file``, so its open buffer shows the new content at once. When
  it offers ``fs.readTextFile``, the ``read`` tool takes a file's text from ``fs/read_text_file``
  (unsaved buffers included) after the broker resolved and opened the path, and reads the disk
  if the editor fails to answer.
* Commands: when the client offers ``terminal`` and Roder's own process sandbox is off (or the
  user asked for it with ``--client-terminal always``), commands run in the editor's terminal
  (``terminal/create`` ... ``terminal/release``) and the terminal is embedded in the tool call.
  A sandboxed process broker is never silently replaced by the editor's unsandboxed terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from acp import tool_terminal_ref, update_tool_call
from acp.schema import EnvVariable

from roder_core.brokers import ProcessResult

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.runtime.options import BrokerFactory, BrokerScope

log = logging.getLogger(__name__)

ClientTerminalMode = Literal["auto", "always", "never"]
OUTPUT_LIMIT = 1_000_000
POLL_SECONDS = 0.2
READ_TIMEOUT = 10.0


@dataclasses.dataclass
class ClientBridge:
    """What the brokers need from the ACP side: the connection, capabilities, live sessions."""

    conn: Any = None
    can_write: bool = False
    can_read: bool = False
    terminal: bool = False
    terminal_mode: ClientTerminalMode = "auto"
    #: workspace -> ACP session id of the session that prompted most recently there.
    sessions_by_cwd: dict[str, str] = dataclasses.field(default_factory=dict)
    #: session id -> execute tool calls waiting for their command (to embed the terminal).
    pending_exec: dict[str, deque[str]] = dataclasses.field(default_factory=dict)
    _tasks: set[asyncio.Task[Any]] = dataclasses.field(default_factory=set)

    def session_for(self, workspace: Path) -> str | None:
        return self.sessions_by_cwd.get(str(workspace))

    async def read_text(self, session_id: str, path: Path) -> str | None:
        """The editor's text of ``path`` (``fs/read_text_file``), or None if it cannot give it."""
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                response = await self.conn.read_text_file(session_id=session_id, path=str(path))
        except Exception as exc:  # any client failure: the read tool falls back to the disk
            log.warning("the editor could not read %s (reading the disk instead): %s", path, exc)
            return None
        content: str = response.content
        return content

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class EditorMirroredFiles:
    """The workspace fs broker, with text writes also sent to the editor (fs/write_text_file)."""

    def __init__(self, inner: Any, bridge: ClientBridge) -> None:
        self._inner = inner
        self._bridge = bridge

    def write_bytes(self, path: str, data: bytes) -> Path:
        written: Path = self._inner.write_bytes(path, data)
        session = self._bridge.session_for(self._inner.workspace)
        if session is not None and self._bridge.conn is not None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return written
            self._bridge.spawn(self._mirror(session, str(written), text))
        return written

    async def _mirror(self, session: str, path: str, text: str) -> None:
        try:
            await self._bridge.conn.write_text_file(session_id=session, path=path, content=text)
        except Exception as exc:  # the file is on disk already; the editor just did not hear of it
            log.warning("could not hand %s to the editor: %s", path, exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class EditorTerminalProcesses:
    """Runs commands in the ACP client's terminal; same contract as the process broker."""

    sandbox_level = "off"

    def __init__(self, inner: Any, bridge: ClientBridge, workspace: Path) -> None:
        self._inner = inner
        self._bridge = bridge
        self._workspace = workspace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def for_thread(self, thread_id: str, network: Any) -> EditorTerminalProcesses:
        """Bound to a thread: what the editor does not run still shares the thread's network
        and sees that thread's files alone."""
        bind = getattr(self._inner, "for_thread", None)
        inner = bind(thread_id, network) if bind is not None else self._inner
        return EditorTerminalProcesses(inner, self._bridge, self._workspace)

    async def run(
        self,
        command: str | list[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        on_output: Any = None,
        **kwargs: Any,
    ) -> ProcessResult:
        session = self._bridge.session_for(self._workspace)
        if session is None:
            result: ProcessResult = await self._inner.run(
                command, cwd=cwd, timeout=timeout, env=env, on_output=on_output, **kwargs
            )
            return result
        conn = self._bridge.conn
        program, args = ("/bin/sh", ["-c", command]) if isinstance(command, str) else (command[0], list(command[1:]))
        started = time.monotonic()
        created = await conn.create_terminal(
            session_id=session,
            command=program,
            args=args,
            cwd=str(cwd or self._workspace),
            env=[EnvVariable(name=k, value=v) for k, v in (env or {}).items()],
            output_byte_limit=OUTPUT_LIMIT,
        )
        terminal_id = created.terminal_id
        pending = self._bridge.pending_exec.get(session)
        if pending:
            call_id = pending.popleft()
            with contextlib.suppress(Exception):
                await conn.session_update(
                    session_id=session,
                    update=update_tool_call(call_id, status="in_progress", content=[tool_terminal_ref(terminal_id)]),
                )
        timed_out = interrupted = False
        seen = 0
        waiter = asyncio.ensure_future(conn.wait_for_terminal_exit(session_id=session, terminal_id=terminal_id))
        try:
            deadline = None if timeout is None else started + timeout
            while not waiter.done():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    timed_out = True
                    await conn.kill_terminal(session_id=session, terminal_id=terminal_id)
                    break
                await asyncio.wait({waiter}, timeout=min(POLL_SECONDS, remaining) if remaining else POLL_SECONDS)
                if on_output is not None:
                    seen = await self._forward(session, terminal_id, seen, on_output)
        except asyncio.CancelledError:
            interrupted = True
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.kill_terminal(session_id=session, terminal_id=terminal_id))
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if interrupted:
                with contextlib.suppress(Exception):
                    await asyncio.shield(conn.release_terminal(session_id=session, terminal_id=terminal_id))
        output = await conn.terminal_output(session_id=session, terminal_id=terminal_id)
        if on_output is not None and len(output.output) > seen:
            on_output(output.output[seen:])
        status = output.exit_status
        with contextlib.suppress(Exception):
            await conn.release_terminal(session_id=session, terminal_id=terminal_id)
        return ProcessResult(
            exit_code=None if timed_out or status is None else status.exit_code,
            output=output.output,
            duration_ms=int((time.monotonic() - started) * 1000),
            timed_out=timed_out,
            truncated=bool(output.truncated),
            sandbox="client-terminal",
        )

    async def _forward(self, session: str, terminal_id: str, seen: int, on_output: Any) -> int:
        try:
            current = await self._bridge.conn.terminal_output(session_id=session, terminal_id=terminal_id)
        except Exception:
            return seen
        if len(current.output) > seen:
            on_output(current.output[seen:])
            return len(current.output)
        return seen


def client_broker_factory(base: BrokerFactory | None, bridge: ClientBridge) -> BrokerFactory:
    """Wrap the runtime's broker factory so tools use the editor where it offers to help."""

    def factory(scope: BrokerScope) -> Brokers:
        make = base
        if make is None:
            from roder_core.brokers.host import default_broker_factory

            make = default_broker_factory
        brokers = make(scope)
        changes: dict[str, Any] = {}
        if bridge.can_write:
            changes["fs"] = EditorMirroredFiles(brokers.fs, bridge)
        sandboxed = getattr(brokers.process, "sandbox_level", "off") != "off"
        if bridge.terminal and bridge.terminal_mode != "never" and (bridge.terminal_mode == "always" or not sandboxed):
            changes["process"] = EditorTerminalProcesses(brokers.process, bridge, scope.workspace)
        return dataclasses.replace(brokers, **changes) if changes else brokers

    return factory
