"""Connections to MCP servers, each held open by its own background task.

A connection task enters the ``mcp`` client (which spawns the stdio process or opens the HTTP
session), lists the tools, then waits until it is told to stop; the MCP SDK requires a client
to be entered and left in the same task. Tool calls from turn tasks go through the connected
client. Nothing here blocks startup: ``start()`` only creates tasks. A server that dies is
marked ``exited`` with the tail of its stderr, and is restarted the next time one of its tools
is called (or on ``restart``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from roder_core import __version__
from roder_ext_mcp.config import ServerConfig
from roder_ext_mcp.stdio import stdio_streams

log = logging.getLogger(__name__)

_STDERR_TAIL_LINES = 8


def _mcp_http_client(url: str, headers: dict[str, str] | None, timeout: Any = None, auth: Any = None) -> Any:
    """The MCP client library's HTTP client, connecting through Roder's outbound rule: the
    configured server's own host is named (a local server works); a redirect or any other
    connection to a non-public address is refused."""
    import httpx2

    from roder_core.brokers.outbound import OutboundRule, async_transport, normal_host

    rule = OutboundRule(frozenset({normal_host(urlsplit(url).hostname or "")}), "the MCP server's url")
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        transport=async_transport(rule, flavor="httpx2"),
    )


class ServerUnavailable(Exception):
    """The server is not connected (failed, exited, disabled); the message says why."""


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_error(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, TimeoutError):
        return "timed out"
    text = str(leaf) or type(leaf).__name__
    return text if type(leaf).__name__ in text else f"{type(leaf).__name__}: {text}"


class ServerConnection:
    def __init__(self, config: ServerConfig, log_dir: Path) -> None:
        self.config = config
        self.name = config.name
        self.tools: list[Any] = []
        #: The server's prompts and resources (empty when it offers none).
        self.prompts: list[Any] = []
        self.resources: list[Any] = []
        self.server_version = ""
        self.connected_at: float | None = None
        self.starts = 0
        #: The stdio server's process id (its process group), once spawned.
        self.pid: int | None = None
        #: Lines of stdout that were not JSON-RPC, and the first of them.
        self.noise_lines = 0
        self.noise = ""
        self._log_path = log_dir / f"{config.name}.log"
        self._log_offset = 0
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._stop = asyncio.Event()
        if not config.enabled:
            self.status, self.error = "disabled", None
        elif config.error:
            self.status, self.error = "failed", config.error
        else:
            self.status, self.error = "pending", None

    # ------------------------------------------------------------------ lifecycle

    @property
    def startable(self) -> bool:
        return self.config.enabled and self.config.error is None

    def start(self) -> None:
        """Begin connecting in the background (no-op if running, disabled or misconfigured)."""
        if not self.startable or (self._task is not None and not self._task.done()):
            return
        self._settled = asyncio.Event()
        self._stop = asyncio.Event()
        self.status, self.error = "connecting", None
        self.starts += 1
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp server {self.name}")

    async def wait_settled(self, timeout: float) -> None:
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._settled.wait()

    async def stop(self) -> None:
        task = self._task
        if task is None:
            return
        self._stop.set()
        try:
            if self.status == "connecting":  # a handshake is never waited for: the server is stopped now
                raise TimeoutError
            async with asyncio.timeout(10):
                await asyncio.shield(task)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            self._task = None
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # stop() itself was cancelled: pass it on
                raise
        self._task = None

    async def restart(self, timeout: float | None = None) -> None:
        await self.stop()
        self.start()
        await self.wait_settled(timeout if timeout is not None else self.config.startup_timeout)

    async def ensure_connected(self) -> None:
        """Restart on demand: a failed or exited server is started again, once, for this call."""
        if self.status == "connected" and self._client is not None:
            return
        if not self.startable:
            raise ServerUnavailable(self.unavailable_reason())
        if self.status != "connecting":
            await self.stop()  # an exited server's task may still be reaping its process
        if self._task is None or self._task.done():
            self.start()
        await self.wait_settled(self.config.startup_timeout)
        if self.status != "connected":
            raise ServerUnavailable(self.unavailable_reason())

    def unavailable_reason(self) -> str:
        detail = f": {self.error}" if self.error else ""
        return f"MCP server {self.name!r} is {self.status}{detail}"

    # ------------------------------------------------------------------ the connection task

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        cfg = self.config
        if cfg.transport == "stdio":
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self._log_path, "a", encoding="utf-8") as errlog:
                self._log_offset = errlog.tell()
                async with stdio_streams(
                    cfg, errlog, handshake_done=lambda: self.status == "connected", on_noise=self._noise, on_spawn=self._spawned
                ) as streams:
                    yield streams
        elif cfg.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            async with (
                _mcp_http_client(cfg.url, dict(cfg.headers) or None) as http,
                streamable_http_client(cfg.url, http_client=http) as streams,
            ):
                yield streams
        else:
            from mcp.client.sse import sse_client

            def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
                return _mcp_http_client(cfg.url, headers, timeout, auth)

            async with sse_client(cfg.url, headers=dict(cfg.headers) or None, httpx_client_factory=factory) as streams:
                yield streams

    def _spawned(self, pid: int) -> None:
        self.pid = pid

    def _noise(self, line: str) -> None:
        """A stdout line that is not JSON-RPC: skipped; the first one is reported in one line."""
        self.noise_lines += 1
        if self.noise_lines == 1:
            self.noise = line.strip()[:120]
            log.warning(
                "MCP server %r wrote a line to stdout that is not JSON-RPC (ignored; servers must log to stderr): %s",
                self.name,
                self.noise,
            )

    async def _run(self) -> None:
        from mcp import Client, Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    self._transport(),
                    client_info=Implementation(name="roder", version=__version__),
                    read_timeout_seconds=self.config.tool_timeout,
                )
                async with asyncio.timeout(self.config.startup_timeout):
                    await stack.enter_async_context(client)
                    self.tools = await self._list_tools(client)
                    self.prompts = await _list_optional(client.list_prompts, "prompts")
                    self.resources = await _list_optional(client.list_resources, "resources")
                info = client.server_info
                self.server_version = f"{info.name} {info.version}".strip() if info is not None else ""
                self._client = client
                self.status, self.error = "connected", None
                self.connected_at = time.time()
                self._settled.set()
                await self._stop.wait()
                if self.status == "connected":
                    self.status = "stopped"
        except asyncio.CancelledError:
            if self.status != "exited":
                self.status = "stopped"
            raise
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            if not isinstance(exc, Exception | BaseExceptionGroup):
                raise
            if self.status != "exited":
                self.status = "failed"
                noise = f" (its stdout had {self.noise_lines} non-JSON line(s), first: {self.noise})" if self.noise_lines else ""
                self.error = self._with_stderr(f"could not connect: {describe_error(exc)}{noise}")
            log.debug("MCP server %s: %s", self.name, self.error)
        finally:
            self._client = None
            self._settled.set()

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        await self.ensure_connected()
        return await self._client.get_prompt(name, arguments)

    async def read_resource(self, uri: str) -> Any:
        await self.ensure_connected()
        return await self._client.read_resource(uri)

    @staticmethod
    async def _list_tools(client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # a server whose pagination never ends cannot hang startup
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _stderr_tail(self) -> str:
        if self.config.transport != "stdio":
            return ""
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._log_offset)
                lines = [line.rstrip() for line in f.read().splitlines() if line.strip()]
        except OSError:
            return ""
        return "\n".join(lines[-_STDERR_TAIL_LINES:])

    def _with_stderr(self, message: str) -> str:
        tail = self._stderr_tail()
        return f"{message}\nserver stderr:\n{tail}" if tail else message

    # ------------------------------------------------------------------ calls

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one tool; a closed connection marks the server ``exited`` and raises."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        await self.ensure_connected()
        client = self._client
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=self.config.tool_timeout)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            self._mark_exited()
            raise ServerUnavailable(
                f"{self.unavailable_reason()}\nIt will be restarted the next time one of its tools is called."
            ) from exc

    def _mark_exited(self) -> None:
        self.status = "exited"
        self.error = self._with_stderr("the server closed the connection (it exited or crashed)")
        self._client = None
        self._stop.set()  # let the connection task unwind and reap the process

    async def probe(self, timeout: float = 5.0) -> None:
        """Check a connected server is still there (re-lists its tools); marks it exited if not."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if self.status != "connected" or client is None:
            return
        try:
            async with asyncio.timeout(timeout):
                page = await client.list_tools(cache_mode="refresh")
            if not page.next_cursor:
                self.tools = list(page.tools)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._mark_exited()
        except TimeoutError:
            self.error = f"did not answer within {timeout:g}s"


async def _list_optional(fetch: Any, attribute: str) -> list[Any]:
    """Every page of an optional listing (prompts, resources); a server without it gives []."""
    from mcp import MCPError

    rows: list[Any] = []
    cursor: str | None = None
    try:
        for _ in range(100):  # a server whose pagination never ends cannot hang startup
            page = await fetch(cursor=cursor)
            rows.extend(getattr(page, attribute))
            cursor = page.next_cursor
            if not cursor:
                break
    except MCPError as exc:  # method not found: the server has no such capability
        log.debug("listing %s: %s", attribute, exc)
    return rows


class McpManager:
    """All configured servers of one runtime."""

    def __init__(self, servers: dict[str, ServerConfig], log_dir: Path, startup_wait: float = 5.0) -> None:
        self.connections = {name: ServerConnection(cfg, log_dir) for name, cfg in servers.items()}
        self.startup_wait = startup_wait
        self._log_dir = log_dir
        self._retired: set[asyncio.Task[None]] = set()
        self._started = False

    def start(self) -> bool:
        """Start every server in the background; needs a running loop (False without one)."""
        if self._started:
            return True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._started = True
        for connection in self.connections.values():
            connection.start()
        return True

    def add(self, config: ServerConfig) -> ServerConnection:
        """Add (or replace) a server while running and start it: servers an editor passes for a
        session. The same definition again keeps the running connection."""
        existing = self.connections.get(config.name)
        if existing is not None and existing.config == config:
            existing.start()
            return existing
        if existing is not None:  # a new definition under the same name replaces the old server
            retired = asyncio.get_running_loop().create_task(existing.stop(), name=f"mcp stop {config.name}")
            self._retired.add(retired)
            retired.add_done_callback(self._retired.discard)
        connection = ServerConnection(config, self._log_dir)
        self.connections[config.name] = connection
        connection.start()
        return connection

    async def wait_ready(self, timeout: float) -> None:
        self.start()
        deadline = time.monotonic() + timeout
        for connection in self.connections.values():
            await connection.wait_settled(max(deadline - time.monotonic(), 0))

    def connecting(self) -> bool:
        return any(c.status == "connecting" for c in self.connections.values())

    async def restart(self, name: str) -> ServerConnection:
        connection = self.connections.get(name)
        if connection is None:
            raise KeyError(f"no MCP server named {name!r}")
        await connection.restart()
        return connection

    async def aclose(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()), *self._retired, return_exceptions=True)
        self._started = False
