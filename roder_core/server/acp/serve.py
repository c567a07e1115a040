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
from roder_core.server.stdio import MAX_LINE, open_reader

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
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str) \
                or not isinstance(params.get("modelId"), str):
            from acp import RequestError

            raise RequestError.invalid_params({"params": "expected sessionId and modelId strings"})
        return await agent.set_session_model(params["sessionId"], params["modelId"])

    conn._conn._handler.add_route(Route(method=SET_MODEL_METHOD, func=handle, kind="request",
                                        adapt_result=normalize_result))


async def serve_acp(app: LocalAppClient, *, stdin: Any, stdout_fd: int,
                    client_terminal: ClientTerminalMode = "auto") -> None:
    bridge = ClientBridge(terminal_mode=client_terminal)
    runtime = app.runtime
    runtime.options.broker_factory = client_broker_factory(runtime.options.broker_factory, bridge)
    agent = RoderAcpAgent(app, bridge)
    reader = await open_reader(stdin, limit=MAX_LINE)
    writer = await open_writer(stdout_fd)
    conn = AgentSideConnection(agent, writer, reader, listening=False, use_unstable_protocol=True)
    add_set_model_route(conn, agent)
    try:
        await conn.listen()
    finally:
        await agent.aclose()
        await asyncio.shield(conn.close())
