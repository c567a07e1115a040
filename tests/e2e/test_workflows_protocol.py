"""Workflow files (``workflow/*``) and workflows (``workflows/*``) through `roder app-server`
over real pipes and a real WebSocket, with the JSON-RPC client of ``tests.server.support``
written from seed 004: every method, the ``workflows/updated`` notifications, an approval asked
by a score command in a step's thread, bad input answered with clear errors, and the trust
rule for a repository's workflow files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.server.support import PipePeer, RemoteServer, RpcPeer, WsPeer, roder_command, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "test-token-workflows-0123456789"

PLANNED = {
    "name": "two-step",
    "description": "say something, then measure it",
    "steps": [
        {"id": "say", "prompt": "Say something short."},
        {"id": "measure", "run": "printf %s {step.say} | wc -c", "depends_on": ["say"], "score": ["test -n {output}"]},
    ],
}
#: The mock answers the first model call of every thread with this (a plan, and step say's output).
STEPS = [{"text": json.dumps(PLANNED)}]
FILE = """name = "checks"
description = "a repository's own workflow"

[[steps]]
id = "hello"
run = "echo hello-from-file"

[[steps]]
id = "shout"
run = "echo {step.hello} | tr a-z A-Z"
depends_on = ["hello"]
"""


async def updated(peer: RpcPeer, workflow_id: str, change: str) -> dict[str, Any]:
    while True:
        note = await peer.next_notification("workflows/updated", timeout=60)
        if note["workflow"]["id"] == workflow_id and note["change"] == change:
            return note


async def approve_next(peer: RpcPeer) -> dict[str, Any]:
    """Allow the next approval request (a workflow's command in ask mode)."""
    asked = await peer.next_notification("approval/requested", timeout=60)
    await peer.call("session/resolve_approval", {"approvalId": asked["request"]["approvalId"], "approved": True})
    return asked


def step(workflow: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in workflow["steps"] if s["id"] == step_id)


async def exercise_files(peer: RpcPeer, workspace: Path) -> None:
    (workspace / ".roder" / "workflows").mkdir(parents=True, exist_ok=True)
    (workspace / ".roder" / "workflows" / "checks.toml").write_text(FILE)
    (workspace / ".roder" / "workflows" / "broken.toml").write_text('name = "broken"\n[[steps]]\nid = "x"\n')
    scan = await peer.call("workflow/scan", {})
    assert scan["trusted"] is True
    rows = {f["name"]: f for f in scan["files"]}
    assert rows["checks"]["valid"] and rows["checks"]["decision"] == "undecided" and rows["checks"]["steps"] == 2
    assert not rows["broken"]["valid"] and "exactly one of prompt" in rows["broken"]["error"]

    preview = await peer.call("workflow/preview", {"path": ".roder/workflows/checks.toml"})
    assert preview["graph"] == {"levels": [["hello"], ["shout"]], "edges": [["hello", "shout"]]}
    assert preview["workflow"]["steps"][1]["dependsOn"] == ["hello"]

    refused = await peer.request("workflows/create", {"path": "checks"})
    assert refused["error"]["code"] == -32602 and "enable it with workflow/enable" in refused["error"]["message"]
    bad_enable = await peer.request("workflow/enable", {"path": "broken"})
    assert bad_enable["error"]["code"] == -32602 and "not a valid workflow" in bad_enable["error"]["message"]
    outside = await peer.request("workflow/preview", {"path": "/etc/passwd"})
    assert outside["error"]["code"] == -32602

    enabled = (await peer.call("workflow/enable", {"path": "checks"}))["file"]
    assert enabled["decision"] == "enabled"
    draft = (await peer.call("workflows/create", {"path": "checks"}))["workflow"]
    assert draft["status"] == "draft" and draft["source"]["kind"] == "file"
    await peer.call("workflows/approve", {"workflowId": draft["id"]})
    done = (await updated(peer, draft["id"], "completed"))["workflow"]
    assert step(done, "shout")["output"] == "HELLO-FROM-FILE\n"

    # An edit after enabling makes it "changed": it must be enabled again before it runs.
    (workspace / ".roder" / "workflows" / "checks.toml").write_text(FILE.replace("hello-from-file", "edited"))
    files = {f["name"]: f for f in (await peer.call("workflow/refresh", {}))["files"]}
    assert files["checks"]["decision"] == "changed"
    changed = await peer.request("workflows/create", {"path": "checks"})
    assert "changed since it was enabled" in changed["error"]["message"]

    assert (await peer.call("workflow/ignore", {"path": "broken"}))["file"]["decision"] == "ignored"
    (workspace / ".roder" / "workflows" / "broken.toml").unlink()
    refreshed = await peer.call("workflow/refresh", {})
    assert [Path(p).name for p in refreshed["removed"]] == ["broken.toml"]
    assert (await peer.call("workflow/remove", {"path": "checks"}))["removed"] is True
    assert (await peer.call("workflow/remove", {"path": "checks"}))["removed"] is False


async def exercise_workflows(peer: RpcPeer, workspace: Path) -> None:
    info = await peer.call("initialize", {"clientInfo": {"name": "seed-004-client"}})
    groups = {g["name"]: g for g in info["methodGroups"]}
    assert groups["workflows"]["available"] and groups["workflowImports"]["available"]
    assert {
        "workflows/plan",
        "workflows/approve",
        "workflows/list",
        "workflows/get",
        "workflows/pause",
        "workflows/resume",
        "workflows/stop",
        "workflows/restartAgent",
    } <= set(groups["workflows"]["methods"])
    assert set(groups["workflowImports"]["methods"]) == {
        "workflow/scan",
        "workflow/preview",
        "workflow/enable",
        "workflow/ignore",
        "workflow/refresh",
        "workflow/remove",
    }
    # seed 004's example
    assert (await peer.call("workflows/list", {"limit": 10})) == {"workflows": []}

    planned = await peer.call("workflows/plan", {"goal": "say something and measure it"})
    draft = planned["workflow"]
    assert draft["status"] == "draft" and draft["source"]["kind"] == "plan" and draft["source"]["threadId"]
    assert planned["graph"]["levels"] == [["say"], ["measure"]]
    # an edit at approval: the score asks for a person (ask mode), answered like any approval
    edited = {**PLANNED, "mode": "ask"}
    edited["steps"] = [PLANNED["steps"][0], {**PLANNED["steps"][1], "score": ["test -n {output} && echo 3"]}]
    await peer.call("workflows/approve", {"workflowId": draft["id"], "workflow": edited, "mode": "ask"})
    script = await approve_next(peer)
    assert script["request"]["tool"] == "bash" and "wc -c" in script["request"]["arguments"]["command"]
    asked = await approve_next(peer)
    assert asked["request"]["tool"] == "bash" and "echo 3" in asked["request"]["arguments"]["command"]
    assert asked["threadId"] == script["threadId"]
    done = (await updated(peer, draft["id"], "completed"))["workflow"]
    say, measure = step(done, "say"), step(done, "measure")
    assert int(measure["output"].strip()) == len(say["output"]) and measure["value"] == 3
    assert measure["scores"][0]["passed"] and measure["threadId"] == asked["threadId"]
    thread = (await peer.call("thread/read", {"threadId": measure["threadId"], "includeTurns": True}))["thread"]
    commands = [i for t in thread["turns"] for i in t["items"] if i["type"] == "commandExecution"]
    assert [c["exitCode"] for c in commands] == [0, 0]

    listed = (await peer.call("workflows/list", {"limit": 10}))["workflows"]
    assert listed[0]["id"] == draft["id"] and listed[0]["status"] == "completed" and listed[0]["live"] is False
    got = (await peer.call("workflows/get", {"workflowId": draft["id"]}))["workflow"]
    assert step(got, "say")["output"] == say["output"]

    restarted = await peer.call(
        "workflows/restartAgent", {"workflowId": draft["id"], "stepId": "say", "instruction": "Be brief."}
    )
    assert step(restarted["workflow"], "measure")["status"] == "pending"
    await approve_next(peer)  # the script and the score ask again
    await approve_next(peer)
    again = (await updated(peer, draft["id"], "completed"))["workflow"]
    assert step(again, "say")["attempts"] == 2 and step(again, "measure")["attempts"] == 2

    # pause interrupts the running step; resume runs it again in the same thread; stop ends it
    slow = {"name": "slow", "steps": [{"id": "wait", "run": "sleep 60"}]}
    created = (await peer.call("workflows/create", {"workflow": slow}))["workflow"]
    await peer.call("workflows/approve", {"workflowId": created["id"], "mode": "bypass"})
    started = await updated(peer, created["id"], "stepStarted")
    paused = (await peer.call("workflows/pause", {"workflowId": created["id"]}))["workflow"]
    assert paused["status"] == "paused" and step(paused, "wait")["status"] == "interrupted"
    resumed = (await peer.call("workflows/resume", {"workflowId": created["id"]}))["workflow"]
    assert resumed["status"] == "running"
    again_started = await updated(peer, created["id"], "stepStarted")
    assert step(again_started["workflow"], "wait")["threadId"] == step(started["workflow"], "wait")["threadId"]
    stopped = (await peer.call("workflows/stop", {"workflowId": created["id"]}))["workflow"]
    assert stopped["status"] == "stopped" and step(stopped, "wait")["status"] == "interrupted"

    # bad requests: clear errors, nothing changes
    cycle = {
        "name": "c",
        "steps": [{"id": "a", "prompt": "x", "dependsOn": ["b"]}, {"id": "b", "prompt": "y", "dependsOn": ["a"]}],
    }
    bad = await peer.request("workflows/create", {"workflow": cycle})
    assert bad["error"]["code"] == -32602 and "cycle" in bad["error"]["message"]
    typo = {"name": "t", "steps": [{"id": "a", "prompt": "x", "depends-on": []}]}
    assert "depends-on" in (await peer.request("workflows/create", {"workflow": typo}))["error"]["message"]
    agent = {"name": "t", "steps": [{"id": "a", "prompt": "x", "agent": "nobody"}]}
    assert "unknown agent 'nobody'" in (await peer.request("workflows/create", {"workflow": agent}))["error"]["message"]
    missing = await peer.request("workflows/get", {"workflowId": "wf_missing"})
    assert missing["error"]["code"] == -32602 and "no workflow" in missing["error"]["message"]
    twice = await peer.request("workflows/approve", {"workflowId": draft["id"]})
    assert "not a draft" in twice["error"]["message"]
    unknown_step = await peer.request("workflows/restartAgent", {"workflowId": draft["id"], "stepId": "nope"})
    assert "no step 'nope'" in unknown_step["error"]["message"]
    empty_goal = await peer.request("workflows/plan", {"goal": ""})
    assert empty_goal["error"]["code"] == -32602
    assert len((await peer.call("workflows/list", {}))["workflows"]) == 2

    await exercise_files(peer, workspace)


async def test_workflows_over_stdio(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, STEPS)
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await exercise_workflows(peer, workspace)
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_workflows_over_websocket(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, STEPS)
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(
        workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false", "--mode", "bypass"
    )
    try:
        peer = await WsPeer.connect(server.url, TOKEN)
        await exercise_workflows(peer, workspace)
        await peer.close()
    finally:
        await server.stop()


async def test_workflow_files_of_an_untrusted_folder_are_not_read(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, STEPS)
    (workspace / ".roder" / "workflows").mkdir(parents=True)
    (workspace / ".roder" / "workflows" / "checks.toml").write_text(FILE)
    proc = await asyncio.create_subprocess_exec(
        *roder_command("app-server", "--provider", "mock", "--mode", "bypass"),  # no --trust
        cwd=workspace,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    peer = PipePeer(proc)
    try:
        scan = await peer.call("workflow/scan", {})
        assert scan["trusted"] is False and scan["files"] == [] and "not trusted" in scan["note"]
        for method in ("workflow/preview", "workflow/enable", "workflows/create"):
            refused = await peer.request(method, {"path": "checks"})
            assert refused["error"]["code"] == -32602 and "not trusted" in refused["error"]["message"], method
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
