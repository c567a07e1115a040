"""JSON-RPC edges over both real transports (stdio pipes and a WebSocket): batch arrays,
over-long ids, the plan review's ``requestId``, and MCP prompts and resources."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.server.connection import MAX_BATCH
from tests.builders import until
from tests.ecosystem.harness import FIXTURE_SERVER
from tests.server.support import RpcPeer, app_server_peer, call, trusted_workspace

pytestmark = pytest.mark.e2e
LONG_ID = "t" * 300


def peer_over(
    transport: str, tmp_path: Path, steps: list[dict[str, Any]] | None = None, *args: str
) -> contextlib.AbstractAsyncContextManager[RpcPeer]:
    workspace, env = trusted_workspace(tmp_path, steps or [{"text": "ok"}])
    return app_server_peer(transport, workspace, env, *args)


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_batches_get_an_array_of_responses(transport: str, tmp_path: Path) -> None:
    async with peer_over(transport, tmp_path) as peer:
        await peer.send_line("[]")
        empty = await wait_unmatched(peer, 1)
        assert empty[0]["id"] is None
        assert empty[0]["error"]["code"] == -32600

        batch = [
            request(101, "session/get"),
            {"jsonrpc": "2.0", "method": "session/set_mode", "params": {"mode": "plan"}},  # a notification
            request(102, "no/such/method"),
            1,
            request(103, "thread/read", {"threadId": "missing"}),
        ]
        await peer.send_line(json.dumps(batch))
        async with asyncio.timeout(30):
            replies = await peer.batches.get()
        by_id = {r["id"]: r for r in replies}
        assert len(replies) == 4
        assert set(by_id) == {101, 102, 103, None}
        assert by_id[101]["result"]["mode"] in ("ask", "plan")
        assert by_id[102]["error"]["code"] == -32601
        assert by_id[None]["error"]["code"] == -32600
        assert by_id[103]["error"]["code"] == -32602

        # A batch of notifications only gets no reply at all; its effect is visible.
        note = {"jsonrpc": "2.0", "method": "session/set_mode", "params": {"mode": "auto-edit"}}
        await peer.send_line(json.dumps([note]))
        while (await peer.call("session/get"))["mode"] != "auto-edit":
            await asyncio.sleep(0.02)
        await peer.send_line(json.dumps([request(104, "session/get")]))
        async with asyncio.timeout(30):
            last = await peer.batches.get()
        assert [r["id"] for r in last] == [104]
    assert peer.batches.empty()  # everything the server wrote was read: no reply to the notification batch


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_an_over_long_batch_is_one_error_and_none_of_it_runs(transport: str, tmp_path: Path) -> None:
    """A batch runs its requests at once and answers in one array: past ``MAX_BATCH`` it would
    cost memory in proportion to one line, so it is refused whole, with one clear error."""
    async with peer_over(transport, tmp_path) as peer:
        mode = (await peer.call("session/get"))["mode"]
        other = "plan" if mode != "plan" else "ask"
        batch = [request(1000 + i, "session/set_mode", {"mode": other}) for i in range(MAX_BATCH + 1)]
        await peer.send_line(json.dumps(batch))
        refused = await wait_unmatched(peer, 1)
        assert refused[0]["id"] is None
        assert refused[0]["error"]["code"] == -32600
        assert f"at most {MAX_BATCH}" in refused[0]["error"]["message"]
        assert (await peer.call("session/get"))["mode"] == mode  # none of it ran
        ok = [request(2000 + i, "session/get") for i in range(MAX_BATCH)]
        await peer.send_line(json.dumps(ok))
        async with asyncio.timeout(60):
            replies = await peer.batches.get()
        assert len(replies) == MAX_BATCH


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_an_approval_answered_twice_at_once_takes_the_first_and_refuses_the_second(transport: str, tmp_path: Path) -> None:
    """Two answers in one batch run before the waiting turn wakes up: the second used to get
    ``{"resolved": false}`` then (and -32602 a moment later); it is refused the same way always."""
    steps = [{"tool_calls": [call("write_note", path="once.txt", text="hi")]}, {"text": "done"}]
    async with peer_over(transport, tmp_path, steps, "--mode", "ask") as peer:
        thread = (await peer.call("thread/start"))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "write"})
        approval = (await peer.next_notification("approval/requested", threadId=thread["id"]))["request"]["approvalId"]
        answers = [
            request(301, "session/resolve_approval", {"approvalId": approval, "approved": True}),
            request(302, "session/resolve_approval", {"approvalId": approval, "approved": False}),
        ]
        await peer.send_line(json.dumps(answers))
        async with asyncio.timeout(30):
            replies = {r["id"]: r for r in await peer.batches.get()}
        assert replies[301]["result"] == {"resolved": True}
        assert replies[302]["error"]["code"] == -32602
        assert "already answered" in replies[302]["error"]["message"]
        done = await peer.next_notification("turn/completed", threadId=thread["id"])
        assert done["turn"]["status"] == "completed"
        assert (await peer.call("session/get"))["pendingApprovals"] == []


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_over_long_ids_are_invalid_params_with_a_short_message(transport: str, tmp_path: Path) -> None:
    async with peer_over(transport, tmp_path) as peer:
        calls = {
            "thread/read": {"threadId": LONG_ID},
            "thread/resume": {"threadId": LONG_ID},
            "thread/fork": {"threadId": LONG_ID},
            "turn/start": {"threadId": LONG_ID, "prompt": "x"},
            "turn/subagentTraces/list": {"threadId": LONG_ID, "turnId": "turn_x"},
            "turn/subagentTrace/read": {"threadId": LONG_ID, "traceId": "x"},
            "hunk/list": {"threadId": LONG_ID},
            "thread/close": {"threadId": LONG_ID},
        }
        for method, params in calls.items():
            reply = await peer.request(method, params)
            error = reply["error"]
            assert error["code"] == -32602, (method, error)
            assert len(error["message"]) < 100 and "/" not in error["message"] and "data" not in error, (method, error)
        assert (await peer.call("session/get"))["mode"]


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_plan_review_names_the_request_id_for_exit_plan(transport: str, tmp_path: Path) -> None:
    steps = [{"tool_calls": [call("exit_plan", plan="1. write it")]}, {"text": "starting"}]
    async with peer_over(transport, tmp_path, steps, "--mode", "plan") as peer:
        await peer.call("initialize")
        thread = (await peer.call("thread/start"))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "plan it"})
        review = await peer.next_notification("approval/requested", threadId=thread["id"])
        assert review["request"]["tool"] == "exit_plan"
        assert review["requestId"] == review["request"]["approvalId"]
        await peer.call("session/exit_plan", {"requestId": review["requestId"], "approved": True, "mode": "auto-edit"})
        done = await peer.next_notification("turn/completed", threadId=thread["id"])
        assert done["turn"]["status"] == "completed"
        assert (await peer.call("session/get"))["mode"] == "auto-edit"


async def wait_unmatched(peer: RpcPeer, count: int) -> list[dict[str, Any]]:
    """Replies nobody asked for (``id`` null), once ``count`` of them arrived."""

    await until(lambda: len(peer.unmatched) >= count)
    return peer.unmatched


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_mcp_prompts_and_resources_over_the_app_server(transport: str, tmp_path: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(
        f'[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(FIXTURE_SERVER))}, "stdio"]\n'
    )
    async with peer_over(transport, tmp_path, [{"text": "noted"}]) as peer:
        servers = (await peer.call("mcp/list", {"waitMs": 30_000}))["servers"]
        assert servers[0]["prompts"] == ["/mcp__fixture__review"]
        assert servers[0]["resources"] == ["@fixture:fixture://notes/readme"]
        commands = {c["name"]: c for c in (await peer.call("commands/list"))["commands"]}
        assert commands["mcp__fixture__review"]["kind"] == "prompt"
        assert commands["mcp__fixture__review"]["argumentHint"] == "<path> [focus]"
        expanded = await peer.call("commands/expand", {"name": "mcp__fixture__review", "arguments": "a.py style"})
        assert expanded["text"] == "Please review a.py, focusing on style."
        missing = await peer.request("commands/expand", {"name": "mcp__fixture__review"})
        assert missing["error"]["code"] == -32602
        assert "path" in missing["error"]["message"]

        thread = (await peer.call("thread/start"))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "see @fixture:fixture://notes/readme, ok?"})
        await peer.next_notification("turn/completed", threadId=thread["id"])
        items = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]["turns"][0]["items"]
        attachments = items[0]["attachments"]
        assert [a["name"] for a in attachments] == ["fixture:fixture://notes/readme"]
        assert "The answer is 42." in attachments[0]["text"]
        bad = await peer.request("turn/start", {"threadId": thread["id"], "prompt": "see @fixture:fixture://nope"})
        assert bad["error"]["code"] == -32602
        assert "fixture://nope" in bad["error"]["message"]
        plain = await peer.call("turn/start", {"threadId": thread["id"], "prompt": "mail me@example.com:about it"})
        assert plain["turn"]["id"]  # an @name: that is no MCP server is plain text
