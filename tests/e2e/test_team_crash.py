"""Crash safety of a team: a real ``roder app-server`` is killed (SIGKILL) while two members are
mid-turn; a new server shows the team and each member's state, every member thread resumes, and
a message takes the team up again."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.server.support import PipePeer, trusted_workspace
from tests.teams.scenario import LEADING, MEMBER, MODEL, me, write_config

pytestmark = pytest.mark.e2e

SLOW = {"text": "Working through it step by step. " * 300, "chunk_size": 4, "delay_ms": 10}


@pytest.mark.timeout(400)
async def test_killed_mid_team_then_read_resumed_and_continued(tmp_path: Path, roder_home: Path) -> None:
    steps = [
        {"when": [me("ann"), "[Team message from user to ann", "> carry on"], "text": "ANN-RESUMED"},
        {"when": [me("ann")], **SLOW},
        {"when": [me("ben")], **SLOW},
        {"when": [me("cy")], "text": "CY-HERE"},
        {"when": [LEADING], "unless": [MEMBER], "text": "Waiting for my team."},
    ]
    async with FakeModelServer(steps, models=(MODEL,)) as server:
        write_config(roder_home, server.base_url)
        workspace, env = trusted_workspace(tmp_path)
        args = ("--provider", "local", "--model", MODEL, "--mode", "ask", "--sandbox", "off")
        first = await PipePeer.start(workspace, env, *args)
        try:
            await first.call("initialize", {})
            lead = (await first.call("thread/start", {"title": "lead"}))["thread"]["id"]
            team = (
                await first.call(
                    "team/start",
                    {
                        "leadThreadId": lead,
                        "members": [
                            {"name": "ann", "prompt": "write a long report"},
                            {"name": "ben", "prompt": "write another"},
                            {"name": "cy"},  # waits for a message: its thread has no turn, so is not saved yet
                        ],
                    },
                )
            )["team"]
            threads = {m["name"]: m["threadId"] for m in team["members"] if m["name"] != "cy"}
            await first.next_notification("turn/completed", timeout=150, threadId=lead)  # the lead knows its team
            for thread_id in threads.values():  # both stream, their prompts saved
                await first.next_notification("item/updated", timeout=150, threadId=thread_id)
            first.proc.send_signal(signal.SIGKILL)
            assert await first.proc.wait() == -signal.SIGKILL
        finally:
            await first.close()

        second = await PipePeer.start(workspace, env, *args)
        try:
            await second.call("initialize", {})
            read = (await second.call("team/read", {"teamId": team["teamId"]}))["team"]
            assert read["leadThreadId"] == lead and read["status"] == "active"
            assert {m["name"]: m["status"] for m in read["members"]} == {"ann": "interrupted", "ben": "interrupted", "cy": "idle"}
            assert [t["teamId"] for t in (await second.call("team/list", {}))["teams"]] == [team["teamId"]]
            for name, thread_id in threads.items():
                thread = (await second.call("thread/resume", {"threadId": thread_id}))["thread"]
                assert thread["parent"]["threadId"] == lead
                last = thread["turns"][-1]
                assert last["status"] == "interrupted"
                assert last["items"][0]["type"] == "userMessage" and me(name) in last["items"][0]["text"]

            sent = await second.call("team/member/message", {"teamId": team["teamId"], "name": "ann", "text": "carry on"})
            assert sent["message"]["delivery"] == {"ann": "turn"}
            done = await second.next_notification("item/completed", timeout=150, threadId=threads["ann"])
            while done["item"].get("text") != "ANN-RESUMED":
                done = await second.next_notification("item/completed", timeout=150, threadId=threads["ann"])
            update = await second.next_notification("team/updated", timeout=150, change="member/finished", member="ann")
            ann = next(m for m in update["team"]["members"] if m["name"] == "ann")
            assert ann["status"] == "idle" and ann["lastResult"] == "ANN-RESUMED" and ann["turns"] == 2

            # The member that never ran had no saved thread: it gets a new one and runs.
            await second.call("team/member/message", {"teamId": team["teamId"], "name": "cy", "text": "are you there?"})
            update = await second.next_notification("team/updated", timeout=150, change="member/finished", member="cy")
            cy = next(m for m in update["team"]["members"] if m["name"] == "cy")
            assert cy["lastResult"] == "CY-HERE" and cy["threadId"] not in threads.values()
        finally:
            await second.close()
