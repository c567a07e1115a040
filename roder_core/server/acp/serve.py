"""Runs the ACP agent on stdio with line limits far above asyncio's 64 KB default."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from acp.core import AgentSideConnection
from acp.router import Route
from acp.utils import normalize_result

from roder_core.server.acp.agent import RoderAcpAgent
from roder_core.server.acp.client_tools import ClientBridge, ClientTerminalMode, client_broker_factory
from roder_core.server.client import LocalAppClient
from roder_core.server.connection import decode, encode
from roder_core.server.dispatcher import error_response, parse_error
from roder_core.server.errors import INVALID_REQUEST, RpcError
from roder_core.server.line_stream import read_lines
from roder_core.server.stdio import open_reader
from roder_core.server.wire import MAX_LINE

SET_MODEL_METHOD = "session/set_model"


async def open_writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return asyncio.StreamWriter(transport, protocol, None, loop)


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


def screen(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a line the SDK cannot take (not JSON, not one request object), or
    None for a line to pass on. The SDK would log bad JSON without answering and crash on an
    array or a scalar; JSON-RPC wants an error reply and the connection kept."""
    message, error = decode(line)
    if error is not None:
        return error
    if not isinstance(message, dict):
        what = "a batch array" if isinstance(message, list) else f"a JSON {type(message).__name__}"
        return error_response(
            None, RpcError(INVALID_REQUEST, f"invalid request: got {what}; ACP takes one request object per line")
        )
    method = message.get("method")
    if (method is not None and not isinstance(method, str)) or (method is None and "id" not in message):
        request_id = message.get("id")
        return error_response(
            request_id if isinstance(request_id, str | int) else None,
            RpcError(INVALID_REQUEST, "invalid request: expected a method name or a response id"),
        )
    return None


def screened(source: asyncio.StreamReader, writer: asyncio.StreamWriter) -> asyncio.StreamReader:
    """A reader for the SDK holding only the lines ``screen`` lets through; the others are
    answered on ``writer`` right here (whole lines, so they never interleave with the SDK's)."""
    out = asyncio.StreamReader(limit=MAX_LINE)

    def too_long() -> None:
        writer.write((encode(parse_error(f"line longer than {MAX_LINE} bytes was discarded")) + "\n").encode())

    async def pump() -> None:
        try:
            async for line in read_lines(source, too_long):
                if not line.strip():
                    continue
                problem = screen(line)
                if problem is None:
                    out.feed_data(line if line.endswith(b"\n") else line + b"\n")
                else:
                    writer.write((encode(problem) + "\n").encode())
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
    writer = await open_writer(stdout_fd)
    reader = screened(await open_reader(stdin, limit=MAX_LINE), writer)
    conn = AgentSideConnection(agent, writer, reader, listening=False, use_unstable_protocol=True)
    add_set_model_route(conn, agent)
    try:
        await conn.listen()
    finally:
        await agent.aclose()
        await asyncio.shield(conn.close())
