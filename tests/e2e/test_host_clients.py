"""A real ``roder serve`` host and clients on its unix socket: a late client catches up on a
streaming answer to the character, several clients see the same events, an approval raised
while no client is attached waits for the next one, and only the socket may stop the host."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.server.protocol import (
    INITIALIZE,
    SESSION_GET,
    SESSION_RESOLVE_APPROVAL,
    THREAD_RESUME,
    THREAD_START,
    TURN_START,
    ClientInfo,
    InitializeParams,
    ResolveApprovalParams,
    SessionGetParams,
    ThreadResumeParams,
    ThreadStartParams,
    TurnStartParams,
)
from roder_core.server.protocol_attach import (
    HOST_STATUS,
    HOST_STOP,
    THREAD_LIVE,
    ThreadLive,
    ThreadLiveParams,
)
from roder_core.server.remote_client import RemoteAppClient
from roder_core.server.rpc_client import ConnectionLost
from roder_core.testing.fake_server import ThreadedFakeServer
from roder_core.threads.events import AgentMessageDelta, ApprovalRequested, ItemCompleted, TurnCompleted
from tests.builders import wait_until
from tests.e2e.host_support import HostProcess, write_local_provider

pytestmark = pytest.mark.e2e

ANSWER = "".join(f"word{n} " for n in range(60)).strip()


async def _until_completed(queue: Any, into: list[Any]) -> TurnCompleted:
    async for event in queue:
        into.append(event)
        if isinstance(event, TurnCompleted):
            return event
    raise AssertionError("the stream ended before the turn completed")


async def _until_delta(queue: Any, into: list[Any]) -> None:
    """Until the host has passed on some of the answer: the server writing its part says
    nothing of when the host read it (its reads are paced)."""
    async for event in queue:
        into.append(event)
        if isinstance(event, AgentMessageDelta):
            return
    raise AssertionError("the stream ended before any of the answer")


async def test_a_late_client_catches_up_exactly_and_every_client_sees_the_same_events(roder_home: Path, workspace: Path) -> None:
    steps = [{"text": ANSWER, "chunk_size": 7, "gate": "mid", "gate_after": 12}]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, "--provider", "local", "--model", "my-model")
        try:
            assert stat.S_IMODE(os.stat(host.socket).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(host.socket.parent).st_mode) == 0o700
            first = await RemoteAppClient.connect_unix(host.socket)
            await first.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="first")))
            first_events = first.subscribe()
            thread = (await first.call(THREAD_START, ThreadStartParams())).thread
            await first.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="stream something"))
            await asyncio.to_thread(server.gate_reached("mid").wait, 60)
            seen_first: list[Any] = []
            await _until_delta(first_events, seen_first)

            second = await RemoteAppClient.connect_unix(host.socket)
            await second.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="second")))
            second_events = second.subscribe()
            session = await second.call(SESSION_GET, SessionGetParams())
            assert thread.id in session.active_turns
            resumed = (await second.call(THREAD_RESUME, ThreadResumeParams(thread_id=thread.id))).thread
            live = await second.call(THREAD_LIVE, ThreadLiveParams(thread_id=resumed.id))
            assert live.turn_id == session.active_turns[thread.id]
            assert live.streaming and ANSWER.startswith(live.streaming[0].text) and live.streaming[0].text

            server.open_gate("mid")
            seen_second: list[Any] = []
            done_first, done_second = await asyncio.gather(
                _until_completed(first_events, seen_first), _until_completed(second_events, seen_second)
            )
            assert done_first.turn.status == done_second.turn.status == "completed"
            final = next(e.item.text for e in seen_first if isinstance(e, ItemCompleted) and e.item.type == "agentMessage")
            assert final == ANSWER
            assert "".join(e.delta for e in seen_first if isinstance(e, AgentMessageDelta)) == ANSWER
            # the late client: its snapshot, then the deltas after it in its own stream, is the answer
            at = next(i for i, e in enumerate(seen_second) if isinstance(e, ThreadLive))
            snapshot = seen_second[at].streaming[0].text
            after = "".join(e.delta for e in seen_second[at + 1 :] if isinstance(e, AgentMessageDelta))
            assert snapshot + after == ANSWER
            # from the moment it subscribed, the second client saw exactly what the first saw
            shared = [(e.method, e.params()) for e in seen_second if not isinstance(e, ThreadLive)]
            tail = [(e.method, e.params()) for e in seen_first[len(seen_first) - len(shared) :]]
            assert shared == tail and len(shared) > 3
            await first.close()
            await second.close()
        finally:
            assert host.stop() == 0
    assert not host.socket.exists()


async def test_an_approval_raised_with_nobody_attached_waits_for_the_next_client(roder_home: Path, workspace: Path) -> None:
    steps = [
        {"text": "Checking.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo approved-$((6*7))"}}], "gate": "g"},
        {"text": "The command said approved-42. LATE-OK"},
    ]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(
            workspace, roder_home, "--provider", "local", "--model", "my-model", "--mode", "ask", "--sandbox", "off"
        )
        try:
            starter = await RemoteAppClient.connect_unix(host.socket)
            await starter.call(INITIALIZE, InitializeParams())
            thread = (await starter.call(THREAD_START, ThreadStartParams())).thread
            await starter.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="run the check"))
            await starter.close()  # nobody is attached from here on
            await asyncio.to_thread(server.gate_reached("g").wait, 60)
            server.open_gate("g")
            stored = roder_home / "data" / "threads"
            wait_until(
                lambda: any("approval/requested" in p.read_text() for p in stored.rglob("*.jsonl")),
                "the approval request",
                timeout=60,
            )
            later = await RemoteAppClient.connect_unix(host.socket)
            events = later.subscribe()
            await later.call(INITIALIZE, InitializeParams())  # replays the pending approval to this client
            replayed = await anext(e async for e in events if isinstance(e, ApprovalRequested))
            assert replayed.request.tool == "bash" and "approved-$((6*7))" in str(replayed.request.arguments)
            pending = (await later.call(SESSION_GET, SessionGetParams())).pending_approvals
            assert [r.approval_id for r in pending] == [replayed.request.approval_id]
            await later.call(
                SESSION_RESOLVE_APPROVAL, ResolveApprovalParams(approval_id=replayed.request.approval_id, decision="allow_once")
            )
            seen: list[Any] = []
            done = await _until_completed(events, seen)
            assert done.turn.status == "completed"
            assert any(isinstance(e, ItemCompleted) and "approved-42" in getattr(e.item, "text", "") for e in seen)
            await later.close()
        finally:
            host.stop()


async def test_only_the_unix_socket_stops_the_host_and_a_second_host_is_refused(roder_home: Path, workspace: Path) -> None:
    host = HostProcess(workspace, roder_home, "--provider", "mock")
    try:
        client = await RemoteAppClient.connect_unix(host.socket)
        status = (await client.call(HOST_STATUS)).wire()
        assert status["cwd"] == str(workspace.resolve()) and status["socket"] == str(host.socket)
        second = subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "serve", "--foreground", "--provider", "mock"],
            cwd=workspace,
            env=host.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2 and "already listening" in second.stderr
        await client.call(HOST_STOP)
        async with asyncio.timeout(60):
            await client.closed.wait()
        with pytest.raises(ConnectionLost, match="host"):
            await client.call(SESSION_GET, SessionGetParams())
        assert host.process.wait(timeout=30) == 0
    finally:
        host.kill()
