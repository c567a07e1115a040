"""Teams and plan review over both real transports (stdio pipes and a WebSocket), driven by a
client written from seed 004's method list, against the loopback model server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.server.support import RpcPeer, app_server_peer, trusted_workspace
from tests.teams.scenario import MODEL, SUMMARY, TASK, call, members, team_steps, write_config

pytestmark = pytest.mark.e2e


@contextlib.asynccontextmanager
async def peer_over(transport: str, tmp_path: Path, roder_home: Path, steps: list[dict[str, Any]]) -> AsyncIterator[RpcPeer]:
    """``roder app-server`` on the ``local`` provider (the loopback model server playing ``steps``)."""
    async with FakeModelServer(steps, models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        workspace, env = trusted_workspace(tmp_path)
        args = ("--provider", "local", "--model", MODEL, "--mode", "ask", "--sandbox", "off")
        async with app_server_peer(transport, workspace, env, *args) as peer:
            yield peer


async def error_of(peer: RpcPeer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await peer.request(method, params)
    assert "error" in response, response
    return response["error"]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_team_methods(transport: str, tmp_path: Path, roder_home: Path) -> None:
    story = {"when": ["tell a long story"], "text": "Once upon a time " * 400, "chunk_size": 4, "delay_ms": 5}
    async with peer_over(transport, tmp_path, roder_home, [story, *team_steps()]) as peer:
        info = await peer.call("initialize", {"clientInfo": {"name": "seed-004-client"}})
        groups = {g["name"]: g for g in info["methodGroups"]}
        assert groups["teams"]["available"] and groups["planReview"]["available"]
        assert "team/pane/focus" in groups["teams"]["methods"]
        lead = (await peer.call("thread/start", {}))["thread"]["id"]

        team = (await peer.call("team/start", {"leadThreadId": lead, "name": "numbers", "members": members(), "tasks": [TASK]}))[
            "team"
        ]
        team_id = team["teamId"]
        request = (await peer.next_notification("approval/requested", timeout=150))["request"]
        assert request["agent"] == "carol" and request["tool"] == "bash"
        assert (await peer.call("session/resolve_approval", {"approvalId": request["approvalId"], "approved": True}))["resolved"]
        summary = await peer.next_notification("item/completed", timeout=150, threadId=lead)
        while summary["item"].get("text") != SUMMARY:
            summary = await peer.next_notification("item/completed", timeout=150, threadId=lead)
        assert any(n["method"] == "team/updated" and n["params"]["team"]["teamId"] == team_id for n in peer.seen)

        read = (await peer.call("team/read", {"teamId": team_id}))["team"]
        results = {m["name"]: m["lastResult"] for m in read["members"]}
        assert results == {
            "alice": "ALICE-RESULT: the number is 42",
            "bob": "BOB-RESULT: told alice the number",
            "carol": "CAROL-RESULT: ran the command",
        }
        assert read["usage"]["costUsd"] > 0 and all(m["usage"]["costUsd"] > 0 for m in read["members"])
        listed = (await peer.call("team/list", {"leadThreadId": lead}))["teams"]
        assert [t["teamId"] for t in listed] == [team_id]

        added = await peer.call("team/member/start", {"teamId": team_id, "member": {"name": "dave", "agent": "explore"}})
        assert added["member"]["agent"] == "explore" and added["member"]["mode"] == "plan"
        focus = (await peer.call("team/member/focus", {"teamId": team_id, "name": "dave"}))["team"]
        assert focus["focused"] == "dave"

        sent = await peer.call("team/member/message", {"teamId": team_id, "name": "dave", "text": "tell a long story"})
        assert sent["message"]["delivery"] == {"dave": "turn"}
        assert (await peer.call("team/member/interrupt", {"teamId": team_id, "name": "dave"}))["interrupted"] is True
        update = await peer.next_notification("team/updated", timeout=150, change="member/finished", member="dave")
        assert next(m for m in update["team"]["members"] if m["name"] == "dave")["status"] == "interrupted"

        for method in ("team/pane/focus", "team/pane/cleanup"):
            error = await error_of(peer, method, {"teamId": team_id})
            assert error["code"] == -32601 and error["data"]["clientConcern"] is True
        error = await error_of(peer, "team/read", {"teamId": "team_nope"})
        assert error["code"] == -32602 and "no team" in error["message"]

        cleaned = (await peer.call("team/cleanup", {"teamId": team_id}))["team"]
        assert cleaned["status"] == "cleanedUp" and {m["status"] for m in cleaned["members"]} == {"stopped"}


PLAN_1 = "# Plan\n1. add f\n2. test f"
PLAN_2 = "# Plan\n1. test f first\n2. add f"
PLAN_3 = "# Plan\n1. write the test\n2. add f\n3. run the tests"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_plan_review_methods(transport: str, tmp_path: Path, roder_home: Path) -> None:
    steps = [
        {"tool_calls": [call("exit_plan", plan=PLAN_1)]},
        {"when": ["tests first"], "tool_calls": [call("exit_plan", plan=PLAN_2)]},
        {"when": ["too risky"], "tool_calls": [call("exit_plan", plan=PLAN_3)]},
        {"text": "implementing"},
    ]
    async with peer_over(transport, tmp_path, roder_home, steps) as peer:
        await peer.call("initialize", {})
        await peer.call("session/set_mode", {"mode": "plan"})
        thread = (await peer.call("thread/start", {}))["thread"]["id"]
        await peer.call("turn/start", {"threadId": thread, "prompt": "plan the function"})

        opened = await peer.next_notification("plan/review/updated", timeout=150, change="opened")
        review_id = opened["review"]["reviewId"]
        read = (await peer.call("plan/review/read", {"reviewId": review_id}))["review"]
        assert read["status"] == "pending" and read["versions"][0]["text"] == PLAN_1
        error = await error_of(peer, "plan/review/comment", {"reviewId": review_id, "text": "x", "line": 40})
        assert error["code"] == -32602 and "outside version 1" in error["message"]
        commented = await peer.call("plan/review/comment", {"reviewId": review_id, "text": "tests first", "line": 3})
        assert commented["comment"]["quote"] == "2. test f"
        await peer.call("plan/review/comment", {"reviewId": review_id, "text": "short", "section": "Plan"})
        rewriting = (await peer.call("plan/review/rewrite", {"reviewId": review_id, "instructions": "swap the steps"}))["review"]
        assert rewriting["status"] == "rewriting"

        revised = await peer.next_notification("plan/review/updated", timeout=150, change="revised")
        assert revised["review"]["reviewId"] == review_id and [v["text"] for v in revised["review"]["versions"]] == [
            PLAN_1,
            PLAN_2,
        ]
        error = await error_of(peer, "plan/review/reject", {"reviewId": review_id, "reason": ""})
        assert error["code"] == -32602
        rejected = (await peer.call("plan/review/reject", {"reviewId": review_id, "reason": "too risky"}))["review"]
        assert rejected["status"] == "rejected" and rejected["reason"] == "too risky"
        error = await error_of(peer, "plan/review/approve", {"reviewId": review_id, "mode": "ask"})
        assert "rejected" in error["message"]

        second = await peer.next_notification("plan/review/updated", timeout=150, change="opened")
        assert second["review"]["reviewId"] != review_id
        error = await error_of(peer, "plan/review/approve", {"reviewId": second["review"]["reviewId"], "mode": "plan"})
        assert error["code"] == -32602
        approved = await peer.call("plan/review/approve", {"reviewId": second["review"]["reviewId"], "mode": "auto-edit"})
        assert approved["review"]["status"] == "approved" and approved["review"]["nextMode"] == "auto-edit"
        await peer.next_notification("session/mode/changed", timeout=150, mode="auto-edit")
        done = await peer.next_notification("turn/completed", timeout=150, threadId=thread)
        assert done["turn"]["status"] == "completed"
        latest = (await peer.call("plan/review/read", {"threadId": thread}))["review"]
        assert latest["reviewId"] == second["review"]["reviewId"] and latest["versions"][0]["text"] == PLAN_3
