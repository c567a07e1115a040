"""Agent teams through the in-process control plane, against the loopback model server: three
members in parallel child threads message each other, share a task list, ask for approvals under
their own names, and the lead collects their results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import AgentMessageItem, ToolResultItem
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import METHOD_NOT_FOUND, RpcError
from roder_core.server.protocol import (
    INITIALIZE,
    SESSION_RESOLVE_APPROVAL,
    SESSION_SET_MODE,
    THREAD_START,
    InitializeParams,
    ResolveApprovalParams,
    SessionSetModeParams,
    ThreadStartParams,
)
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads import events as ev
from tests.teams.scenario import GREET, MODEL, SUMMARY, TASK, members, team_steps, write_config


def start_client(workspace: Path, mode: str = "ask") -> LocalAppClient:
    return LocalAppClient.start(StartSettings(cwd=workspace, provider="local", model=MODEL, mode=mode, sandbox="off"))


async def wait_for(events: Any, predicate: Callable[[Any], bool], timeout: float = 150, client: Any = None) -> Any:
    async def find() -> Any:
        async for event in events:
            if predicate(event):
                return event
        raise AssertionError("the notification stream ended")

    try:
        async with asyncio.timeout(timeout):
            return await find()
    except TimeoutError:
        raise AssertionError(f"timed out; the threads hold:\n{threads_now(client)}") from None


def threads_now(client: Any) -> str:
    """What every open thread holds (the failure message of a scripted run gone astray)."""
    if client is None:
        return "?"
    rows = []
    for thread in client.runtime.open_threads():
        shown = [f"{i.type}: {(getattr(i, 'text', '') or str(getattr(i, 'arguments', '')))[:70]!r}" for i in thread.items()]
        rows.append(f"{thread.title or thread.id}: " + " | ".join(shown))
    return "\n".join(rows)


def answers(client: LocalAppClient, thread_id: str) -> list[str]:
    thread = client.runtime.thread(thread_id)
    return [i.text for i in thread.items() if isinstance(i, AgentMessageItem)]


@pytest.mark.timeout(400)
async def test_a_team_of_three_talks_shares_tasks_and_reports_to_the_lead(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    async with FakeModelServer(team_steps(), models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        client = start_client(workspace)
        try:
            await client.call(INITIALIZE, InitializeParams())
            events = client.subscribe()
            lead = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace), title="lead"))).thread
            approvals: list[Any] = []

            async def approve_carol() -> None:
                event = await wait_for(events, lambda e: isinstance(e, ev.ApprovalRequested))
                approvals.append(event.request)
                await client.call(
                    SESSION_RESOLVE_APPROVAL, ResolveApprovalParams(approval_id=event.request.approval_id, decision="allow_once")
                )

            approver = asyncio.ensure_future(approve_carol())
            started = (
                await client.request(
                    "team/start", {"leadThreadId": lead.id, "name": "numbers", "members": members(), "tasks": [TASK]}
                )
            ).wire()["team"]
            assert [m["name"] for m in started["members"]] == ["alice", "bob", "carol"]
            assert all(m["threadId"] != lead.id for m in started["members"])
            async with asyncio.timeout(150):
                await approver
            [request] = approvals
            assert request.agent == "carol" and request.tool == "bash" and "carol-was-here" in (request.command or "")

            # The lead collects the three results and sums them up.
            await wait_for(
                events,
                lambda e: (
                    isinstance(e, ev.ItemCompleted)
                    and e.thread_id == lead.id
                    and isinstance(e.item, AgentMessageItem)
                    and e.item.text == SUMMARY
                ),
                client=client,
            )
            team_id = started["teamId"]
            team = (await client.request("team/read", {"teamId": team_id})).wire()["team"]
            by_name = {m["name"]: m for m in team["members"]}
            assert by_name["alice"]["lastResult"] == "ALICE-RESULT: the number is 42"
            assert by_name["bob"]["lastResult"] == "BOB-RESULT: told alice the number"
            assert by_name["carol"]["lastResult"] == "CAROL-RESULT: ran the command"
            review, greet = team["tasks"]
            assert (review["title"], review["status"], review["createdBy"]) == (TASK, "open", "lead")
            assert (greet["title"], greet["createdBy"]) == (GREET, "carol")
            assert (greet["status"], greet["owner"], greet["result"]) == ("done", "carol", "printed carol-was-here")
            sent = [(m["sender"], m["to"]) for m in team["messages"]]
            assert ("alice", "bob") in sent and ("bob", "alice") in sent
            assert {("alice", "lead"), ("bob", "lead"), ("carol", "lead")} <= set(sent)

            # Token use and cost per member and for the team.
            for member in team["members"]:
                assert member["usage"]["inputTokens"] > 0 and member["usage"]["costUsd"] > 0
            total = sum(m["usage"]["costUsd"] for m in team["members"])
            assert team["usage"]["costUsd"] == pytest.approx(total)

            # Every member ran in its own thread, a child of the lead, and only team threads got team tools.
            for member in team["members"]:
                thread = client.runtime.thread(member["threadId"])
                assert thread.parent is not None and thread.parent.thread_id == lead.id
            carol_thread = client.runtime.thread(by_name["carol"]["threadId"])
            results = [i for i in carol_thread.items() if isinstance(i, ToolResultItem)]
            assert "carol-was-here" in results[0].text
            bodies = [r.json for r in server.calls]
            member_requests = [b for b in bodies if 'You are \\"' in json.dumps(b)]
            assert member_requests and all(
                {"team_message", "team_tasks", "team_broadcast"} <= {t["function"]["name"] for t in b["tools"]}
                for b in member_requests
            )
            assert all("task" not in {t["function"]["name"] for t in b["tools"]} for b in member_requests)
        finally:
            await client.close()


async def test_team_methods_edges_and_modes(workspace: Path, roder_home: Path) -> None:
    steps = [{"text": "idle"} for _ in range(6)]
    async with FakeModelServer(steps, models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        client = start_client(workspace, mode="plan")
        try:
            lead = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
            bad = [
                ({"leadThreadId": lead.id, "members": []}, "members"),
                ({"leadThreadId": lead.id, "members": [{"name": "Lead"}]}, "invalid member name"),
                ({"leadThreadId": lead.id, "members": [{"name": "a"}, {"name": "a"}]}, "used twice"),
                ({"leadThreadId": lead.id, "members": [{"name": "a", "agent": "nobody"}]}, "unknown agent"),
                ({"leadThreadId": "thr_missing", "members": [{"name": "a"}]}, "thr_missing"),
            ]
            for params, message in bad:
                with pytest.raises(RpcError, match=message) as error:
                    await client.request("team/start", params)
                assert error.value.code == -32602
            # A member never runs looser than the lead: the lead is in plan mode here.
            team = (
                await client.request(
                    "team/start",
                    {
                        "leadThreadId": lead.id,
                        "members": [{"name": "ed", "mode": "bypass"}, {"name": "xplr", "agent": "explore"}],
                    },
                )
            ).wire()["team"]
            assert [m["mode"] for m in team["members"]] == ["plan", "plan"]
            with pytest.raises(RpcError, match="already leads"):
                await client.request("team/start", {"leadThreadId": lead.id, "members": [{"name": "z"}]})
            await client.call(SESSION_SET_MODE, SessionSetModeParams(mode="auto-edit"))
            read = (await client.request("team/read", {"teamId": team["teamId"]})).wire()["team"]
            assert [m["mode"] for m in read["members"]] == ["auto-edit", "plan"], "explore stays read-only"
            added = (await client.request("team/member/start", {"teamId": team["teamId"], "member": {"name": "fay"}})).wire()
            assert added["member"]["name"] == "fay" and len(added["team"]["members"]) == 3
            focused = (await client.request("team/member/focus", {"teamId": team["teamId"], "name": "fay"})).wire()["team"]
            assert focused["focused"] == "fay"
            with pytest.raises(RpcError, match="no member 'zed'"):
                await client.request("team/member/message", {"teamId": team["teamId"], "name": "zed", "text": "hi"})
            message = (
                await client.request("team/member/message", {"teamId": team["teamId"], "name": "fay", "text": "hi"})
            ).wire()
            assert message["message"]["delivery"] == {"fay": "turn"}
            listed = (await client.request("team/list", {"leadThreadId": lead.id})).wire()["teams"]
            assert [t["teamId"] for t in listed] == [team["teamId"]]
            for method in ("team/pane/focus", "team/pane/cleanup"):
                with pytest.raises(RpcError, match="client") as error:
                    await client.request(method, {"teamId": team["teamId"]})
                assert error.value.code == METHOD_NOT_FOUND and error.value.data["clientConcern"] is True
            cleaned = (await client.request("team/cleanup", {"teamId": team["teamId"]})).wire()["team"]
            assert cleaned["status"] == "cleanedUp" and {m["status"] for m in cleaned["members"]} == {"stopped"}
            with pytest.raises(RpcError, match="cleaned up"):
                await client.request("team/member/message", {"teamId": team["teamId"], "name": "fay", "text": "hi"})
            assert client.runtime.team_channel(lead.id) is None
        finally:
            await client.close()
