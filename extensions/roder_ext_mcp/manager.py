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
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core import __version__
from roder_core.brokers.secrets import SecretRedactor
from roder_core.kernel.tools import ToolExecutionContext
from roder_core.settings.credentials import CredentialsError, CredentialStore
from roder_ext_mcp.client_features import ClientFeatures, RootSet
from roder_ext_mcp.config import ServerConfig, tool_names
from roder_ext_mcp.server_log import ServerLog
from roder_ext_mcp.stdio import TERM_GRACE, first_problem, stdio_streams

if TYPE_CHECKING:
    from roder_ext_mcp.authorization import ServerAuth

log = logging.getLogger(__name__)

_STDERR_TAIL_LINES = 8
#: Pages of one listing read at most: a server whose pagination never ends cannot hang startup.
MAX_PAGES = 100


def _mcp_http_client(url: str, headers: dict[str, str] | None, timeout: Any = None, auth: Any = None) -> Any:
    """The MCP client library's HTTP client, connecting through Roder's outbound rule: the
    configured server's own host is named (a local server works); a redirect or any other
    connection to a non-public address is refused."""
    import httpx2

    from roder_core.brokers.outbound import async_transport
    from roder_ext_mcp.authorization import server_rule

    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        transport=async_transport(server_rule(url), flavor="httpx2"),
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
    if isinstance(leaf, ValueError) and type(leaf).__name__ == "ValidationError":  # pydantic's, pages long
        return f"the server's answer does not fit the MCP schema: {first_problem(leaf)}"
    text = str(leaf) or type(leaf).__name__
    return text if type(leaf).__name__ in text else f"{type(leaf).__name__}: {text}"


#: The listings a ``notifications/<kind>/list_changed`` names, and what is listed again.
_LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


class ServerConnection:
    def __init__(
        self,
        config: ServerConfig,
        log_dir: Path,
        roots: RootSet | None = None,
        store: CredentialStore | None = None,
        secrets: SecretRedactor | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self._tools: list[Any] = []
        #: Each tool's name as Roder offers it (``mcp__<server>__<tool>``), by the server's name.
        self.tool_names: dict[str, str] = {}
        #: Tools of the listing Roder could not offer (a schema the registry refuses, a name
        #: another server's tool has), with the reason; said once each in the log and shown in
        #: the server's status.
        self.left_out: dict[str, str] = {}
        #: Listings cut short because the server's pagination never ended, by kind, with why.
        self.listing_problems: dict[str, str] = {}
        #: The server's prompts, resources and resource templates (empty when it offers none).
        self.prompts: list[Any] = []
        self.resources: list[Any] = []
        self.resource_templates: list[Any] = []
        #: How many times a list_changed notification made Roder list again.
        self.relists = 0
        self.server_version = ""
        self.connected_at: float | None = None
        self.starts = 0
        #: The stdio server's process id (its process group), once spawned.
        self.pid: int | None = None
        #: Lines of stdout that were not JSON-RPC, and the first of them.
        self.noise_lines = 0
        self.noise = ""
        #: The server's log in Roder's cache (its stderr and log messages, redacted).
        self.log = ServerLog(log_dir / f"{config.name}.log", secrets or SecretRedactor(), config.env)
        self.roots = roots if roots is not None else RootSet(())
        self.roots.listen(self._roots_changed)
        #: Sampling, elicitation, roots, logging and progress: what this server may ask of Roder.
        self.features = ClientFeatures(config, self.roots, self.log)
        #: Where an HTTP server's sign-in is kept (the user's credentials file).
        self.store = store if store is not None else CredentialStore.for_env()
        #: The HTTP server's sign-in state for this connection (None on stdio).
        self.auth: ServerAuth | None = None
        #: The stored access token when the server last asked for a sign-in (None: there was none).
        self._refused_token: str | None = None
        self._relisting: set[asyncio.Task[None]] = set()
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

    @property
    def tools(self) -> list[Any]:
        """The server's tools as last listed."""
        return self._tools

    @tools.setter
    def tools(self, tools: list[Any]) -> None:
        self._tools = tools
        self.tool_names = tool_names(self.config.tool_prefix, [t.name for t in tools])
        self.left_out = {}

    def leave_out(self, tool: str, why: str) -> None:
        """A tool of this server cannot be offered; the others still are."""
        if self.left_out.get(tool) != why:
            self.left_out[tool] = why
            log.warning("MCP server %r: tool %r is not offered to the model: %s", self.name, tool, why)

    def listing_reason(self) -> str | None:
        """What of the server's listings is not offered, and why (None: all of it is)."""
        lines = [*self.listing_problems.values(), *(f"tool {tool!r} left out: {why}" for tool, why in self.left_out.items())]
        return "; ".join(lines) or None

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
        self.auth = None
        self.starts += 1
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp server {self.name}")

    async def wait_settled(self, timeout: float) -> None:
        """Until connected (or failed), and any listing a list_changed started has finished."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._settled.wait()
                while self._relisting:
                    await asyncio.gather(*self._relisting, return_exceptions=True)

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

    def _needs_login(self, why: str) -> None:
        """The server refused for want of a sign-in; the token stored now is the one it refused."""
        self.status, self.error = "needs-login", why
        self._refused_token = self._stored_token()

    def _stored_token(self) -> str | None:
        from roder_ext_mcp.authorization import stored_token

        try:
            return stored_token(self.config, self.store)
        except CredentialsError:
            return None

    async def resume_if_signed_in(self) -> None:
        """A server that needed a sign-in connects again once another one is stored for it
        (``roder mcp login`` in another terminal, ``/mcp login``), so its status says so when
        asked, not only at the next call of one of its tools."""
        if self.status != "needs-login" or self.config.transport == "stdio":
            return
        token = self._stored_token()
        if token is None or token == self._refused_token:
            return
        await self.stop()
        self.start()

    def availability(self) -> str | None:
        """Why the server's tools cannot be called now (None: connected). The one wording of a
        server's state: the model reads it for a call to one of its tools, and ``/mcp``,
        ``roder mcp list`` and the app server's listings show it."""
        error = self.error or "no reason was given"
        if self.status == "connected":
            return None
        if self.status == "needs-login":
            return error
        if self.status == "disabled":
            return "is disabled in the configuration (enabled = false)"
        if self.status == "failed":
            return f"failed to start: {error}"
        if self.status == "connecting":
            if self.starts > 1:
                return f"is restarting (start {self.starts}); its tools return when it has connected"
            return "is still starting; its tools appear when it has connected"
        if self.status == "exited":
            return f"exited: {error}"
        if self.status == "pending":
            return "has not been started yet"
        return "was stopped"

    def unavailable_reason(self) -> str:
        return f"MCP server {self.name!r} {self.availability() or 'is connected'}"

    # ------------------------------------------------------------------ the connection task

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        cfg = self.config
        if cfg.transport == "stdio":
            self.log.begin()
            async with stdio_streams(
                cfg, self.log, handshake_done=lambda: self.status == "connected", on_noise=self._noise, on_spawn=self._spawned
            ) as streams:
                yield streams
        else:
            from roder_ext_mcp.authorization import BearerAuth, ServerAuth

            self.auth = ServerAuth(cfg, self.store)
            bearer = BearerAuth(self.auth)
            if cfg.transport == "http":
                from mcp.client.streamable_http import streamable_http_client

                async with (
                    _mcp_http_client(cfg.url, dict(cfg.headers) or None, auth=bearer) as http,
                    streamable_http_client(cfg.url, http_client=http) as streams,
                ):
                    yield streams
            else:
                from mcp.client.sse import sse_client

                def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
                    return _mcp_http_client(cfg.url, headers, timeout, auth)

                async with sse_client(
                    cfg.url, headers=dict(cfg.headers) or None, httpx_client_factory=factory, auth=bearer
                ) as streams:
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

        features = self.features
        step = "the handshake (initialize)"  # what a startup that timed out was waiting for
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    self._transport(),
                    client_info=Implementation(name="roder", version=__version__),
                    read_timeout_seconds=self.config.tool_timeout,
                    sampling_callback=features.sampling,
                    elicitation_callback=features.elicitation,
                    list_roots_callback=features.list_roots,
                    logging_callback=features.logging,
                    log_level=self.config.log_level,  # type: ignore[arg-type]
                    message_handler=self._on_message,
                )
                async with asyncio.timeout(self.config.startup_timeout):
                    await stack.enter_async_context(client)
                    # Prompts and resources are asked for only when declared: a server may leave a
                    # method it does not offer unanswered, and that must not hold the connection.
                    # Tools are always listed (servers that serve them without declaring them exist).
                    offered = client.session.server_capabilities
                    step = "tools/list"
                    self.tools = await self._list_tools(client)
                    if offered is None or offered.prompts is not None:
                        step = "prompts/list"
                        self.prompts = await self._list_optional(client.list_prompts, "prompts")
                    if offered is None or offered.resources is not None:
                        step = "resources/list"
                        self.resources = await self._list_optional(client.list_resources, "resources")
                        step = "resources/templates/list"
                        self.resource_templates = await self._list_optional(client.list_resource_templates, "resource_templates")
                    step = "logging/setLevel"
                    await self._set_log_level(client)
                info = client.server_info
                self.server_version = f"{info.name} {info.version}".strip() if info is not None else ""
                self._client = client
                self.status, self.error = "connected", None
                self.connected_at = time.time()
                self._settled.set()
                await self._stop.wait()
            # Only now, with the transport closed: while it closes, a connected server is still
            # "connected", so it gets the graceful shutdown (stdin closed, a short grace) first.
            if self.status == "connected":
                self.status = "stopped"
        except asyncio.CancelledError:
            if self.status != "exited":
                self.status = "stopped"
            raise
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            if not isinstance(exc, Exception | BaseExceptionGroup):
                raise
            if self.auth is not None and self.auth.needs_login:
                self._needs_login(self.auth.needs_login)
                log.warning("MCP server %r %s", self.name, self.error)  # a headless run says what to run here
            elif self.status != "exited":
                self.status = "failed"
                noise = f" (its stdout had {self.noise_lines} non-JSON line(s), first: {self.noise})" if self.noise_lines else ""
                if self.auth is not None and self.auth.unauthorized:
                    why = self.auth.unauthorized
                elif isinstance(_leaf(exc), TimeoutError):
                    why = f"no answer to {step} within {self.config.startup_timeout:g} s (startup_timeout)"
                else:
                    why = describe_error(exc)
                self.error = self._with_stderr(f"could not connect: {why}{noise}")
            log.debug("MCP server %s: %s", self.name, self.error)
        finally:
            self._client = None
            self._settled.set()

    async def _set_log_level(self, client: Any) -> None:
        """``logging/setLevel`` from config, for a server that offers logging."""
        from mcp import MCPError

        capabilities = client.session.server_capabilities
        if capabilities is None or capabilities.logging is None:
            return
        try:
            with warnings.catch_warnings():  # deprecated from 2026-07-28; 2025-11-25 servers still use it
                warnings.simplefilter("ignore")
                await client.set_logging_level(self.config.log_level)
        except MCPError as exc:
            log.debug("MCP server %s: logging/setLevel: %s", self.name, exc)

    async def _on_message(self, message: Any) -> None:
        """Server notifications: a list_changed lists that kind again (in its own task: the
        handler runs on the connection's reader, which must keep reading to get the answer)."""
        kind = _LIST_CHANGED.get(str(getattr(message, "method", "")))
        if kind is None:
            if isinstance(message, Exception):
                log.debug("MCP server %s: %s", self.name, describe_error(message))
            return
        task = asyncio.get_running_loop().create_task(self._relist(kind), name=f"mcp relist {self.name} {kind}")
        self._relisting.add(task)
        task.add_done_callback(self._relisting.discard)

    async def _relist(self, kind: str) -> None:
        """The new listing replaces the old one: running threads see it at their next model call."""
        from mcp import MCPError

        client = self._client
        if client is None:  # still connecting: the first listing is after the handshake anyway
            await self._settled.wait()
            client = self._client
            if client is None:
                return
        try:
            if kind == "tools":
                self.tools = await self._list_tools(client, refresh=True)
            elif kind == "prompts":
                self.prompts = await self._list_optional(client.list_prompts, "prompts", refresh=True)
            else:
                self.resources = await self._list_optional(client.list_resources, "resources", refresh=True)
                self.resource_templates = await self._list_optional(
                    client.list_resource_templates, "resource_templates", refresh=True
                )
            self.relists += 1
        except (MCPError, OSError) as exc:
            log.warning("MCP server %r: listing %s again failed: %s", self.name, kind, describe_error(exc))

    def _roots_changed(self) -> None:
        client = self._client
        if self.status != "connected" or client is None:
            return  # a server connecting later lists the roots when it asks

        async def announce() -> None:
            with contextlib.suppress(Exception), warnings.catch_warnings():  # deprecated only from 2026-07-28
                warnings.simplefilter("ignore")
                await client.send_roots_list_changed()

        task = asyncio.get_running_loop().create_task(announce(), name=f"mcp roots {self.name}")
        self._relisting.add(task)
        task.add_done_callback(self._relisting.discard)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        await self.ensure_connected()
        return await self._client.get_prompt(name, arguments)

    async def read_resource(self, uri: str) -> Any:
        await self.ensure_connected()
        return await self._client.read_resource(uri)

    async def _list_tools(self, client: Any, refresh: bool = False) -> list[Any]:
        return await self._pages(client.list_tools, "tools", refresh)

    async def _list_optional(self, fetch: Any, attribute: str, refresh: bool = False) -> list[Any]:
        """Every page of an optional listing (prompts, resources); a server without it gives []."""
        from mcp import MCPError

        try:
            return await self._pages(fetch, attribute, refresh)
        except MCPError as exc:  # method not found: the server has no such capability
            log.debug("listing %s: %s", attribute, exc)
            return []

    async def _pages(self, fetch: Any, attribute: str, refresh: bool) -> list[Any]:
        """Every page of one listing, each entry once (by URI, or name). Pagination that never
        ends (a cursor seen before, or more than ``MAX_PAGES`` pages) stops the listing with
        what was read, and says so: in the log and in the server's status."""
        rows: dict[str, Any] = {}
        seen: set[str] = set()
        cursor: str | None = None
        self.listing_problems.pop(attribute, None)
        for _ in range(MAX_PAGES):
            page = await fetch(cursor=cursor, cache_mode="refresh" if refresh else "use")
            for row in getattr(page, attribute):
                key = getattr(row, "uri", None) or getattr(row, "uri_template", None) or getattr(row, "name", None)
                rows.setdefault(str(key or id(row)), row)
            cursor = page.next_cursor
            if not cursor:
                return list(rows.values())
            if cursor in seen:
                return self._cut_listing(attribute, rows, f"its {attribute}/list gave the cursor {cursor[:80]!r} again")
            seen.add(cursor)
        return self._cut_listing(attribute, rows, f"its {attribute}/list had more than {MAX_PAGES} pages")

    def _cut_listing(self, attribute: str, rows: dict[str, Any], why: str) -> list[Any]:
        problem = f"{attribute} listing stopped after {len(rows)}: {why}"
        self.listing_problems[attribute] = problem
        log.warning("MCP server %r: %s", self.name, problem)
        return list(rows.values())

    def _stderr_tail(self) -> str:
        if self.config.transport != "stdio":
            return ""
        try:
            with open(self.log.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.log.offset)
                lines = [line.rstrip() for line in f.read().splitlines() if line.strip()]
        except OSError:
            return ""
        return "\n".join(lines[-_STDERR_TAIL_LINES:])

    def _with_stderr(self, message: str) -> str:
        tail = self._stderr_tail()
        return f"{message}\nserver stderr:\n{tail}" if tail else message

    # ------------------------------------------------------------------ calls

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], ctx: ToolExecutionContext | None = None, *, retry: bool = True
    ) -> Any:
        """Call one tool; a closed connection marks the server ``exited`` and raises. With the
        call's context, the server's sampling, elicitation, log messages and progress during the
        call reach that call's user and tool card, and its workspace becomes a root. A call the
        server refuses until the user visits an address (-32042) shows the address, and once the
        user says they went there, is made again (once)."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, URL_ELICITATION_REQUIRED

        await self.ensure_connected()
        client = self._client
        if ctx is not None:
            self.roots.add(ctx.workspace)
            self.features.calls.enter(ctx)
        try:
            return await client.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.config.tool_timeout,
                progress_callback=self.features.progress_for(ctx) if ctx is not None else None,
            )
        except MCPError as exc:
            if self.auth is not None and self.auth.needs_login:  # the sign-in expired and could not be refreshed
                self._needs_login(self.auth.needs_login)
                self._client = None
                self._stop.set()
                raise ServerUnavailable(self.unavailable_reason()) from exc
            url_required = exc.code == URL_ELICITATION_REQUIRED and retry and ctx is not None
            if url_required and await self.features.url_elicitations(exc.data):
                return await self.call_tool(tool, arguments, ctx, retry=False)
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._mark_exited()
            raise ServerUnavailable(
                f"{self.unavailable_reason()}\nIt will be restarted the next time one of its tools is called."
            ) from exc
        finally:
            if ctx is not None:
                self.features.calls.leave(ctx)

    async def _mark_exited(self) -> None:
        await self.log.drained(TERM_GRACE)  # its last words (a crash's traceback) are in the log first
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
                await self._mark_exited()
        except TimeoutError:
            self.error = f"did not answer within {timeout:g}s"


class McpManager:
    """All configured servers of one runtime."""

    def __init__(
        self,
        servers: dict[str, ServerConfig],
        log_dir: Path,
        startup_wait: float = 5.0,
        roots: RootSet | None = None,
        store: CredentialStore | None = None,
        secrets: SecretRedactor | None = None,
    ) -> None:
        self.roots = roots if roots is not None else RootSet(())
        self.store = store if store is not None else CredentialStore.for_env()
        #: The run's known secrets, redacted from every server's log.
        self.secrets = secrets if secrets is not None else SecretRedactor()
        self.connections = {
            name: ServerConnection(cfg, log_dir, self.roots, self.store, self.secrets) for name, cfg in servers.items()
        }
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
        """Add (or replace) a server while running: servers an editor passes for a session, a
        plugin's enabled meanwhile. It starts now when the others run, else with them (a one-shot
        command that installs a plugin spawns nothing). The same definition again keeps the
        running connection."""
        existing = self.connections.get(config.name)
        if existing is not None and existing.config == config:
            if self._started:
                existing.start()
            return existing
        if existing is not None:  # a new definition under the same name replaces the old server
            self._retire(existing)
        connection = ServerConnection(config, self._log_dir, self.roots, self.store, self.secrets)
        self.connections[config.name] = connection
        if self._started:
            connection.start()
        return connection

    def remove(self, name: str) -> None:
        """Stop a server and forget it (its plugin was disabled or removed while running): its
        tools leave the next turn."""
        existing = self.connections.pop(name, None)
        if existing is not None:
            self._retire(existing)

    def _retire(self, connection: ServerConnection) -> None:
        """Stop a connection in the background; ``aclose`` still waits for it."""
        retired = asyncio.get_running_loop().create_task(connection.stop(), name=f"mcp stop {connection.name}")
        self._retired.add(retired)
        retired.add_done_callback(self._retired.discard)

    async def wait_ready(self, timeout: float) -> None:
        """Until every server settled; one that needed a sign-in and has one now connects again."""
        self.start()
        for connection in list(self.connections.values()):
            await connection.resume_if_signed_in()
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
