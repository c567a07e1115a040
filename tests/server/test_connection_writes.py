"""A connection's writer: on a newline-framed transport (stdio, the host's unix socket) the
messages already queued go out in one write, in order; on a framed one (WebSocket) one each."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from roder_core.server.connection import MAX_WRITE_BATCH, Connection
from roder_core.server.dispatcher import Dispatcher
from roder_core.threads.events import ThreadTitleChanged
from tests.core.harness import make_runtime


async def _no_messages() -> AsyncIterator[str]:
    return
    yield ""  # an async generator that ends at once


async def _writes(workspace: Path, *, lines: bool, burst: int) -> list[str]:
    """What the connection sent for a burst of notifications queued before its writer ran."""
    runtime = make_runtime(workspace)
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    try:
        connection = Connection(Dispatcher(runtime), send, lines=lines)
        for index in range(burst):
            connection.queue.offer(ThreadTitleChanged(thread_id="thr_x", title=f"title {index}"))
        await connection.serve(_no_messages())
        await connection.close()  # the writer sends what is queued, then stops
    finally:
        await runtime.close()
    return sent


async def test_a_burst_leaves_a_line_transport_in_one_write_in_order(workspace: Path) -> None:
    sent = await _writes(workspace, lines=True, burst=5)
    assert len(sent) == 1
    titles = [json.loads(line)["params"]["title"] for line in sent[0].split("\n")]
    assert titles == [f"title {index}" for index in range(5)]


async def test_a_write_holds_at_most_a_batch(workspace: Path) -> None:
    sent = await _writes(workspace, lines=True, burst=MAX_WRITE_BATCH + 3)
    assert [text.count("\n") + 1 for text in sent] == [MAX_WRITE_BATCH, 3]
    titles = [json.loads(line)["params"]["title"] for text in sent for line in text.split("\n")]
    assert titles == [f"title {index}" for index in range(MAX_WRITE_BATCH + 3)]


async def test_a_framed_transport_gets_one_message_per_send(workspace: Path) -> None:
    sent = await _writes(workspace, lines=False, burst=3)
    assert [json.loads(text)["params"]["title"] for text in sent] == ["title 0", "title 1", "title 2"]
