"""`roder app-server --remote` over real WebSockets: auth refusals, two clients on one thread,
approvals that survive a disconnect, a slow client cut off without hurting the others, and a
client that sends requests but never reads their answers stops being read."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from roder_core.server.connection import MAX_IN_FLIGHT
from tests.server.support import RawWsClient, RemoteServer, WsPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "test-token-0123456789"


@pytest.fixture
async def served(tmp_path: Path):
    steps = [{"tool_calls": [call("write_note", path="shared.txt", text="both saw it")]}, {"text": "finished"}]
    workspace, env = trusted_workspace(tmp_path, steps)
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false", "--mode", "ask")
    yield server, workspace
    await server.stop()


async def test_auth_refusals_before_any_method(served) -> None:
    server, _ = served
    for headers, subprotocols in [
        ({}, ["roder.remote.v1"]),
        ({"Authorization": "Bearer wrong"}, None),
        ({}, ["roder.remote.v1", "bearer.wrong"]),
        ({"Authorization": "Basic " + TOKEN}, None),
    ]:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(server.url, additional_headers=headers, subprotocols=subprotocols):
                pass
        assert refused.value.response.status_code == 401
    by_header = await WsPeer.connect(server.url, TOKEN)
    assert by_header.socket.subprotocol == "roder.remote.v1"
    info = await by_header.call("initialize")
    assert info["remote"]["authenticated"]
    assert info["remote"]["subprotocol"] == "roder.remote.v1"
    await by_header.close()
    by_subprotocol = await WsPeer.connect(server.url, TOKEN, header=False)
    assert (await by_subprotocol.call("session/get"))["mode"] == "ask"
    await by_subprotocol.close()
    async with connect(server.url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as plain:
        assert plain.subprotocol is None
        await plain.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "bogus"}))
        assert json.loads(await plain.recv())["error"]["code"] == -32601
    assert "secr" not in server.banner
    assert "test…6789" in server.banner
    assert "roder://connect?payload=" in server.banner


async def test_two_clients_on_one_thread(served) -> None:
    server, workspace = served
    alice = await WsPeer.connect(server.url, TOKEN)
    bob = await WsPeer.connect(server.url, TOKEN, header=False)
    try:
        await alice.call("initialize")
        await bob.call("initialize")
        thread = (await alice.call("thread/start"))["thread"]
        turn = (await alice.call("turn/start", {"threadId": thread["id"], "prompt": "share"}))["turn"]
        request = (await bob.next_notification("approval/requested", threadId=thread["id"]))["request"]
        await alice.next_notification("approval/requested", threadId=thread["id"])
        assert (await bob.call("session/resolve_approval", {"approvalId": request["approvalId"], "decision": "allow_once"}))[
            "resolved"
        ]
        for peer in (alice, bob):
            done = await peer.next_notification("turn/completed", threadId=thread["id"])
            assert done["turn"]["id"] == turn["id"]
            assert done["turn"]["status"] == "completed"
            # the thread goes idle after its turn completes: the last event either peer gets
            await peer.next_notification("thread/status/changed", threadId=thread["id"], status="idle")
        assert (workspace / "shared.txt").read_text() == "both saw it"
        sequences = [[m["method"] for m in p.seen if m["params"].get("threadId") == thread["id"]] for p in (alice, bob)]
        assert sequences[0] == sequences[1]
        assert sequences[0][-2:] == ["turn/completed", "thread/status/changed"]
    finally:
        await alice.close()
        await bob.close()


async def test_pending_approval_survives_the_client_that_saw_it(served) -> None:
    server, workspace = served
    first = await WsPeer.connect(server.url, TOKEN)
    thread = (await first.call("thread/start"))["thread"]
    await first.call("turn/start", {"threadId": thread["id"], "prompt": "go"})
    await first.next_notification("approval/requested", threadId=thread["id"])
    await first.close()
    later = await WsPeer.connect(server.url, TOKEN)
    try:
        await later.call("initialize")
        replayed = (await later.next_notification("approval/requested", threadId=thread["id"]))["request"]
        await later.call("session/resolve_approval", {"approvalId": replayed["approvalId"], "approved": True})
        assert (await later.next_notification("turn/completed", threadId=thread["id"]))["turn"]["status"] == "completed"
        assert (workspace / "shared.txt").exists()
    finally:
        await later.close()


def kernel_send_room() -> int:
    """The most a server's TCP socket buffers before its writes wait: Linux autotunes a send
    buffer up to ``tcp_wmem``'s maximum (``wmem_max`` bounds one set by hand)."""
    autotuned = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    return max(autotuned, int(Path("/proc/sys/net/core/wmem_max").read_text()))


async def test_slow_client_is_cut_off_and_others_continue(tmp_path: Path) -> None:
    queue_size, deltas = 20, 200  # ten times the queue: a stalled client overflows it whatever the timing
    workspace, env = trusted_workspace(tmp_path, [{"text": "y" * 50 * deltas, "chunk_size": 50}])
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(
        workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false", "--queue-size", str(queue_size)
    )
    slow = await RawWsClient.connect(server.url, TOKEN, receive_buffer=64 * 1024)
    try:
        # The slow client asks for an answer larger than everything the kernel can hold between
        # the server and it (plus a megabyte for the transport's own buffer), then never reads:
        # once its first bytes arrive, the server's writer for it waits on a full socket.
        big = workspace / "big.bin"
        big.write_bytes(b"x" * (kernel_send_room() + slow.buffered_bytes + 1024 * 1024))
        await slow.request("fs/readFile", {"path": str(big)})
        await slow.readable()
        fast = await WsPeer.connect(server.url, TOKEN)
        thread = (await fast.call("thread/start"))["thread"]
        await fast.call("turn/start", {"threadId": thread["id"], "prompt": "stream a lot"})
        done = await fast.next_notification("turn/completed", threadId=thread["id"], timeout=120)
        assert done["turn"]["status"] == "completed"
        streamed = [m for m in fast.seen if m["method"] == "item/agentMessage/delta"]
        assert len(streamed) == deltas  # the fast client missed nothing
        messages = await slow.read_to_end()
        seen = [m for m in messages if m.get("method") == "item/agentMessage/delta"]
        assert len(seen) < deltas  # the slow one was cut off, not served
        errors = [m for m in messages if m.get("method") == "server/error"]
        if errors:
            # The error and the close frame queue behind what the kernel already holds for a reader
            # that stopped reading; when the server's close handshake times out first, the client
            # sees an abnormal close (1006) without them.
            assert errors[0]["params"]["code"] == -32001
            assert slow.close_code == 1013
        else:
            assert slow.close_code in (1006, 1013)
        assert (await fast.call("session/get"))["mode"] == "ask"
        await fast.close()
    finally:
        slow.close()
        await server.stop()


#: Seconds a client's send may stay stuck before the server counts as having stopped reading it.
#: Only an unfixed server (one that keeps reading) could ever unstick it, so under load the
#: window can only make this test pass late, never fail wrongly.
STALL = 5.0


async def test_a_client_that_never_reads_answers_stops_being_read(tmp_path: Path) -> None:
    """Answers are never dropped, so their memory is bounded by pausing the reading of a client
    that does not take them: its sends stop going through, long before the budget, and another
    client is still served."""
    workspace, env = trusted_workspace(tmp_path)
    env["RODER_TEST_TOKEN"] = TOKEN
    size = 16 * 1024
    (workspace / "page.txt").write_text("x" * size)  # each answer is at least this large
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
    mute = await RawWsClient.connect(server.url, TOKEN, receive_buffer=64 * 1024)
    padding = "p" * size  # an unknown field, ignored by the method (forward compatibility)
    # A bounded server reads what the kernel's buffers hold towards it, plus the requests whose
    # answers fit in the buffers back to the client, plus its 64 slots; four times that is the
    # budget, all of which an unbounded server would read and answer.
    receive_room = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    answered = (kernel_send_room() + mute.buffered_bytes) // size + MAX_IN_FLIGHT
    budget = 4 * (receive_room + answered * (size + 200))
    sent = 0
    try:
        while sent < budget:
            try:
                async with asyncio.timeout(STALL):
                    await mute.request("fs/readFile", {"path": str(workspace / "page.txt"), "pad": padding})
            except TimeoutError:
                break
            sent += len(padding)
        assert sent < budget, "the server kept reading a client that never read an answer"
        other = await WsPeer.connect(server.url, TOKEN)
        assert (await other.call("session/get"))["mode"]
        await other.close()
    finally:
        mute.close()
        await server.stop()


async def test_generated_token_link_qr_and_non_loopback_warning(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    server = await RemoteServer.start(workspace, env, listen="ws://0.0.0.0:0")
    try:
        await server.read_banner_until(lambda banner: "TLS" in banner and ("█" in banner or "▀" in banner))
        token = next(line.split("token: ", 1)[1].strip() for line in server.banner.splitlines() if "token: " in line)
        link = next(line.split("pair: ", 1)[1].strip() for line in server.banner.splitlines() if "pair: " in line)
        payload = link.split("payload=", 1)[1]
        decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert decoded["token"] == token
        assert decoded["subprotocol"] == "roder.remote.v1"
        assert "WARNING" in server.banner
        assert "TLS" in server.banner
        assert "█" in server.banner or "▀" in server.banner
        port = server.url.rsplit(":", 1)[1]
        peer = await WsPeer.connect(f"ws://127.0.0.1:{port}", token)
        assert (await peer.call("initialize"))["remote"]["workspace"] == str(workspace)
        await peer.close()
    finally:
        await server.stop()
