"""`roder app-server` over real pipes: the thread/turn/approval flow, every error code, streaming
command output, big lines, and shutdown when stdin closes."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from tests.builders import until
from tests.server.support import PipePeer, call, trusted_workspace

pytestmark = pytest.mark.e2e


async def test_thread_turn_and_approval_flow(tmp_path: Path) -> None:
    steps = [
        {"reasoning": "plan it", "text": "Writing the note.", "tool_calls": [call("write_note", path="note.txt", text="hi")]},
        {"text": "Done."},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    peer = await PipePeer.start(workspace, env, "--mode", "ask")
    try:
        info = await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
        assert info["provider"] == "mock"
        assert info["mode"] == "ask"
        assert info["cwd"] == str(workspace)
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.next_notification("thread/started", threadId=thread["id"])
        turn = (await peer.call("turn/start", {"threadId": thread["id"], "prompt": "write a note"}))["turn"]
        assert turn["status"] == "inProgress"
        delta = await peer.next_notification("item/agentMessage/delta", threadId=thread["id"], kind="text")
        assert delta["turnId"] == turn["id"]
        assert delta["itemId"]
        assert delta["delta"]
        request = (await peer.next_notification("approval/requested", threadId=thread["id"]))["request"]
        assert request["tool"] == "write_note"
        assert request["diff"]
        pending = await peer.call("session/get")
        assert [a["approvalId"] for a in pending["pendingApprovals"]] == [request["approvalId"]]
        assert pending["activeTurns"] == {thread["id"]: turn["id"]}
        resolved = await peer.call("session/resolve_approval", {"approvalId": request["approvalId"], "approved": True})
        assert resolved == {"resolved": True}
        done = await peer.next_notification("turn/completed", threadId=thread["id"])
        assert done["turn"]["status"] == "completed"
        assert (workspace / "note.txt").read_text() == "hi"
        read = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
        types = [item["type"] for item in read["turns"][0]["items"]]
        assert types[:3] == ["userMessage", "reasoning", "agentMessage"]
        assert {"toolCall", "approval", "fileChange", "toolResult"} <= set(types)
        listed = (await peer.call("thread/list", {"limit": 5}))["threads"]
        assert listed[0]["id"] == thread["id"]
        methods = [m["method"] for m in peer.seen if m.get("params", {}).get("threadId") == thread["id"]]
        assert methods.index("turn/started") < methods.index("approval/requested") < methods.index("turn/completed")
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_every_error_code_and_the_connection_stays_usable(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [{"text": "ok"}])
    peer = await PipePeer.start(workspace, env)
    try:
        await peer.send_line("{not json")
        await peer.send_line(b"\xff\xfe garbage")
        await peer.send_line("[1, 2")
        await peer.send_line('"just a string"')
        await peer.send_line('{"jsonrpc": "2.0", "id": 7}')
        await until(lambda: len(peer.unmatched) >= 5)
        codes = [m["error"]["code"] for m in peer.unmatched]
        assert codes.count(-32700) == 3
        assert codes.count(-32600) == 2
        assert all(m["id"] in (None, 7) for m in peer.unmatched)
        assert (await peer.call("session/get"))["mode"] == "ask"

        missing = await peer.request("no/such/method")
        assert missing["error"]["code"] == -32601
        auth = await peer.request("auth/codex/login", {})
        assert auth["error"]["code"] == -32602
        assert "set issuer and client_id under [auth.codex] in config.toml" in auth["error"]["message"]
        bad = await peer.request("thread/read", {})
        assert bad["error"]["code"] == -32602
        assert "threadId" in bad["error"]["message"]
        wrong_type = await peer.request("thread/list", {"limit": "ten"})
        assert wrong_type["error"]["code"] == -32602
        thread = (await peer.call("thread/start"))["thread"]
        steer = await peer.request("turn/steer", {"threadId": thread["id"], "expectedTurnId": "turn_x", "prompt": "x"})
        assert steer["error"]["code"] == -32000
        outside = await peer.request("fs/readFile", {"path": "/etc/hostname"})
        assert outside["error"]["code"] == -32004
        relative = await peer.request("fs/readFile", {"path": "relative.txt"})
        assert relative["error"]["code"] == -32602
        await peer.call("session/set_mode", {"mode": "plan"})
        denied = await peer.request("command/exec", {"command": ["touch", "x"]})
        assert denied["error"]["code"] == -32004
        assert "plan" in denied["error"]["message"]
        assert not (workspace / "x").exists()
        assert (await peer.call("session/get"))["mode"] == "plan"
    finally:
        code, _ = await peer.close()
    assert code == 0


async def test_command_exec_streams_and_times_out(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    (workspace / "data.bin").write_bytes(b"\x00\x01binary")
    peer = await PipePeer.start(workspace, env)
    try:
        plain = await peer.call("command/exec", {"command": ["sh", "-c", "echo out; echo err >&2"]})
        assert plain["exitCode"] == 0
        assert plain["stdout"] == "out\n"
        assert plain["stderr"] == "err\n"
        streamed = await peer.call(
            "command/exec",
            {
                "command": ["sh", "-c", "echo one; echo oops >&2; sleep 0.3; echo two"],
                "streamStdoutStderr": True,
                "processId": "p1",
            },
        )
        assert streamed["stdout"] == ""
        assert streamed["stderr"] == ""
        assert streamed["processId"] == "p1"
        chunks: dict[str, str] = {"stdout": "", "stderr": ""}
        for m in peer.seen:
            if m["method"] == "command/exec/output_delta" and m["params"]["processId"] == "p1":
                chunks[m["params"]["stream"]] += base64.b64decode(m["params"]["deltaBase64"]).decode()
        assert chunks == {"stdout": "one\ntwo\n", "stderr": "oops\n"}
        slow = await peer.call("command/exec", {"command": ["sleep", "5"], "timeoutMs": 300})
        assert slow["timedOut"]
        assert slow.get("exitCode") is None
        capped = await peer.call("command/exec", {"command": ["sh", "-c", "yes | head -c 5000"], "outputBytesCap": 100})
        assert len(capped["stdout"]) == 100
        assert capped["truncated"]
        needs_id = await peer.request("command/exec", {"command": ["true"], "streamStdoutStderr": True})
        assert needs_id["error"]["code"] == -32602
        data = await peer.call("fs/readFile", {"path": str(workspace / "data.bin")})
        assert base64.b64decode(data["dataBase64"]) == b"\x00\x01binary"
        listing = await peer.call("fs/readDirectory", {"path": str(workspace)})
        assert {"data.bin", ".roder"} <= {e["name"] for e in listing["entries"]}
    finally:
        await peer.close()


async def test_lines_far_larger_than_64k_both_ways(tmp_path: Path) -> None:
    answer = "a" * 400_000
    workspace, env = trusted_workspace(tmp_path, [{"text": answer, "chunk_size": 400_000}])
    peer = await PipePeer.start(workspace, env)
    try:
        thread = (await peer.call("thread/start"))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "b" * 2_000_000})
        await peer.next_notification("turn/completed", threadId=thread["id"])
        read = (await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
        items = read["turns"][0]["items"]
        assert len(items[0]["text"]) == 2_000_000
        assert items[-1]["text"] == answer
    finally:
        await peer.close()


async def test_stdin_closing_ends_the_server_and_denies_unanswerable_approvals(tmp_path: Path) -> None:
    steps = [{"tool_calls": [call("write_note", path="never.txt", text="x")]}, {"text": "ok then"}]
    workspace, env = trusted_workspace(tmp_path, steps)
    peer = await PipePeer.start(workspace, env, "--mode", "ask")
    thread = (await peer.call("thread/start"))["thread"]
    await peer.call("turn/start", {"threadId": thread["id"], "prompt": "go"})
    await peer.next_notification("approval/requested")
    code, stderr = await peer.close()
    assert code == 0, stderr
    assert not (workspace / "never.txt").exists()
    completed = [m for m in peer.seen if m["method"] == "turn/completed"]
    assert completed
    assert completed[0]["params"]["turn"]["status"] == "completed"


async def test_schema_export_lists_every_method(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *__import__("tests.server.support", fromlist=["roder_command"]).roder_command("app-server", "--schema"),
        stdout=asyncio.subprocess.PIPE,
        cwd=tmp_path,
    )
    out, _ = await proc.communicate()
    schema = json.loads(out)
    assert {"initialize", "turn/start", "command/exec", "hunk/rollback", "memory/query"} <= set(schema["methods"])
    assert {"turn/completed", "item/agentMessage/delta", "command/exec/output_delta"} <= set(schema["notifications"])
    ref = schema["methods"]["turn/start"]["params"]["$ref"].split("/")[-1]
    assert "taskLedgerRequired" in schema["$defs"][ref]["properties"]
    assert schema["errors"]["-32004"]
