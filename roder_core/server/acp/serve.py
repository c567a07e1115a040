"""Runs the ACP agent on stdio with line limits far above asyncio's 64 KB default, and with the
editor's requests bounded: a request reaches the SDK only while fewer than
``MAX_IN_FLIGHT`` requests are waiting to be answered or to have their answer written, so an
editor that sends without reading the answers stops being read instead of growing the agent's
memory (the SDK itself starts a task per request and queues every answer without a limit)."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from acp.core import AgentSideConnection
from acp.router import Route
from acp.utils import normalize_result

from roder_core.server.acp.agent import RoderAcpAgent
from roder_core.server.acp.client_tools import ClientBridge, ClientTerminalMode, client_broker_factory
from roder_core.server.client import LocalAppClient
from roder_core.server.connection import MAX_IN_FLIGHT, decode, encode
from roder_core.server.dispatcher import error_response, parse_error
from roder_core.server.errors import INVALID_REQUEST, RpcError
from roder_core.server.line_stream import read_lines
from roder_core.server.stdio import open_reader
from roder_core.server.wire import MAX_LINE

SET_MODEL_METHOD = "session/set_model"


def add_set_model_route(conn: AgentSideConnection, agent: RoderAcpAgent) -> None:
    """``session/set_model`` predates config options and is not routed by this SDK version;
    editors still send it, so it is added to the connection's router (SDK pinned to 0.12)."""

    async def handle(params: Any) -> Any:
        if (
            not isinstance(params, dict)
            or not isinstance(params.get("sessionId"), str)
            or not isinstance(params.get("modelId"), str)
        ):
            from acp import RequestError

            raise RequestError.invalid_params({"params": "expected sessionId and modelId strings"})
        return await agent.set_session_model(params["sessionId"], params["modelId"])

    handler: Any = conn._conn._handler  # the SDK has no public way to add a method
    handler.add_route(Route(method=SET_MODEL_METHOD, func=handle, kind="request", adapt_result=normalize_result))


#: How the SDK (pinned to 0.12) writes a request of the agent's own (an int id, then the method);
#: any other line that starts with an id is a response to the editor.
_AGENT_REQUEST = re.compile(rb'\{"jsonrpc":"2\.0","id":-?\d+,"method":')
_WITH_ID = b'{"jsonrpc":"2.0","id":'


class AnswerGate(asyncio.StreamWriter):
    """The agent's stdout writer, given to the SDK (which takes only a ``StreamWriter``): it
    counts the responses written out (a message is written when ``drain`` returns, as the SDK's
    sender does after each one) and gives each back its request's slot, which the stdin pump
    takes before passing a request on."""

    def __init__(self, transport: Any, protocol: Any, loop: asyncio.AbstractEventLoop, limit: int = MAX_IN_FLIGHT) -> None:
        super().__init__(transport, protocol, None, loop)
        self._slots = asyncio.Semaphore(limit)
        self._answers = 0

    async def admit(self) -> None:
        """Wait for a free slot for one more request from the editor."""
        await self._slots.acquire()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = bytes(data[: len(_WITH_ID) + 24])
        if head.startswith(_WITH_ID) and not _AGENT_REQUEST.match(head):
            self._answers += 1
        super().write(data)

    def write_own(self, data: bytes) -> None:
        """A line of the pump's own (an error for a line the SDK never saw): it holds no slot."""
        super().write(data)

    async def drain(self) -> None:
        try:
            await super().drain()
        finally:  # written, or never will be: either way the slots are free
            answers, self._answers = self._answers, 0
            for _ in range(answers):
                self._slots.release()


async def open_writer(fd: int) -> AnswerGate:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return AnswerGate(transport, protocol, loop)


def screen(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """(the JSON-RPC error for a line the SDK cannot take, or None; whether the line is a
    request the agent will answer). The SDK would log bad JSON without answering and crash on
    an array or a scalar; JSON-RPC wants an error reply and the connection kept."""
    message, error = decode(line)
    if error is not None:
        return error, False
    if not isinstance(message, dict):
        what = "a batch array" if isinstance(message, list) else f"a JSON {type(message).__name__}"
        return error_response(
            None, RpcError(INVALID_REQUEST, f"invalid request: got {what}; ACP takes one request object per line")
        ), False
    method = message.get("method")
    if (method is not None and not isinstance(method, str)) or (method is None and "id" not in message):
        request_id = message.get("id")
        return error_response(
            request_id if isinstance(request_id, str | int) else None,
            RpcError(INVALID_REQUEST, "invalid request: expected a method name or a response id"),
        ), False
    return None, method is not None and "id" in message


def screened(source: asyncio.StreamReader, gate: AnswerGate) -> asyncio.StreamReader:
    """A reader for the SDK holding only the lines ``screen`` lets through, each request only
    once ``gate`` has a slot for it (responses and notifications from the editor never wait:
    a prompt may be waiting for them); the others are answered right here (whole lines, so
    they never interleave with the SDK's, and drained, so they are bounded too)."""
    out = asyncio.StreamReader(limit=MAX_LINE)

    def too_long() -> None:
        gate.write_own((encode(parse_error(f"line longer than {MAX_LINE} bytes was discarded")) + "\n").encode())

    async def pump() -> None:
        try:
            async for line in read_lines(source, too_long):
                if not line.strip():
                    continue
                problem, request = screen(line)
                if problem is not None:
                    gate.write_own((encode(problem) + "\n").encode())
                    await gate.drain()
                    continue
                if request:
                    await gate.admit()
                out.feed_data(line if line.endswith(b"\n") else line + b"\n")
        finally:
            out.feed_eof()

    _pumps.add(task := asyncio.get_running_loop().create_task(pump(), name="acp stdin screen"))
    task.add_done_callback(_pumps.discard)
    return out


#: Running screen pumps (held so they are not garbage collected mid-run).
_pumps: set[asyncio.Task[None]] = set()


async def serve_acp(app: LocalAppClient, *, stdin: Any, stdout_fd: int, client_terminal: ClientTerminalMode = "auto") -> None:
    bridge = ClientBridge(terminal_mode=client_terminal)
    runtime = app.runtime
    runtime.options.broker_factory = client_broker_factory(runtime.options.broker_factory, bridge)
    agent = RoderAcpAgent(app, bridge)
    gate = await open_writer(stdout_fd)
    reader = screened(await open_reader(stdin, limit=MAX_LINE), gate)
    conn = AgentSideConnection(agent, gate, reader, listening=False, use_unstable_protocol=True)
    add_set_model_route(conn, agent)
    try:
        await conn.listen()
    finally:
        await agent.aclose()
        await asyncio.shield(conn.close())
