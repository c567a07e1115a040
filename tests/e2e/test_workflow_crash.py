"""A four-step workflow (two parallel steps, a join, a scored step) runs in a real `roder
app-server` against the loopback model server; the server process is killed (SIGKILL) while
the join's answer is held mid-stream, a new process resumes the workflow from its journal, and
it completes with each output passed to the steps after it.

The two parallel steps reach the model server in either order, so the script does not say
which answer is whose: the test reads each step's output from the workflow and checks that the
join's request carried exactly those, under their own step's heading."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.server.support import PipePeer, RpcPeer, trusted_workspace

pytestmark = pytest.mark.e2e

MODEL = "fake-model"
FOUR = {
    "name": "four-steps",
    "steps": [
        {"id": "alpha", "prompt": "Name a colour."},
        {"id": "beta", "prompt": "Name a fruit."},
        {"id": "join", "prompt": "Combine the colour and the fruit.", "depends_on": ["alpha", "beta"]},
        {
            "id": "final",
            "prompt": "Write the label for {step.join}.",
            "depends_on": ["join"],
            "score": ["printf %s {output} | grep -q 'LABEL: orange plum'", "echo 0.9"],
        },
    ],
}
STEPS: list[dict[str, Any]] = [
    {"text": "COLOUR-OR-FRUIT-1"},
    {"text": "COLOUR-OR-FRUIT-2"},
    # The join's first answer is held after its first delta: the process dies there.
    {"text": "orange plum (cut off)", "gate": "join", "gate_after": 1},
    # After the resume, the join runs again in its own thread.
    {"text": "orange plum"},
    {"text": "LABEL: orange plum"},
]


async def start(workspace: Path, env: dict[str, str]) -> PipePeer:
    peer = await PipePeer.start(workspace, env, "--provider", "local", "--model", MODEL, "--mode", "bypass")
    await peer.call("initialize", {"clientInfo": {"name": "crash-test"}})
    return peer


async def until_change(peer: RpcPeer, workflow_id: str, change: str, timeout: float = 90) -> dict[str, Any]:
    while True:
        note = await peer.next_notification("workflows/updated", timeout=timeout)
        if note["workflow"]["id"] == workflow_id and note["change"] == change:
            return note["workflow"]


def step(workflow: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in workflow["steps"] if s["id"] == step_id)


def user_text(request: Any) -> str:
    """The last user message of a chat-completions request."""
    messages = request.json["messages"]
    content = next(m for m in reversed(messages) if m["role"] == "user")["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


async def test_a_killed_workflow_resumes_at_its_step_and_completes(tmp_path: Path, roder_home: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    with ThreadedFakeServer(STEPS) as server:
        (roder_home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\nmodels = ["{MODEL}"]\n'
        )
        first = await start(workspace, env)
        created = (await first.call("workflows/create", {"workflow": FOUR, "goal": "a fruit label"}))["workflow"]
        workflow_id = created["id"]
        await first.call("workflows/approve", {"workflowId": workflow_id})
        joined = await until_change(first, workflow_id, "stepStarted")
        while step(joined, "join")["status"] != "running":
            joined = await until_change(first, workflow_id, "stepStarted")
        join_thread = step(joined, "join")["threadId"]
        reached = await asyncio.to_thread(server.gate_reached("join").wait, 60)
        assert reached, "the join's request never reached the model server"

        first.proc.send_signal(signal.SIGKILL)
        assert await first.proc.wait() == -signal.SIGKILL
        first.reader.cancel()

        second = await start(workspace, env)
        try:
            cut_off = (await second.call("workflows/list", {}))["workflows"][0]
            assert cut_off["id"] == workflow_id and cut_off["status"] == "running" and cut_off["live"] is False
            assert cut_off["elsewhere"] is False  # the killed process's lock went with it
            before = (await second.call("workflows/get", {"workflowId": workflow_id}))["workflow"]
            assert [step(before, s)["status"] for s in ("alpha", "beta", "join", "final")] == [
                "completed",
                "completed",
                "running",
                "pending",
            ]
            resumed = (await second.call("workflows/resume", {"workflowId": workflow_id}))["workflow"]
            assert resumed["live"] is True and step(resumed, "join")["status"] == "interrupted"
            done = await until_change(second, workflow_id, "completed")
        finally:
            server.open_gate("join")
            code, stderr = await second.close()
        assert code == 0, stderr

    alpha, beta, join, final = (step(done, s) for s in ("alpha", "beta", "join", "final"))
    assert {alpha["output"], beta["output"]} == {"COLOUR-OR-FRUIT-1", "COLOUR-OR-FRUIT-2"}
    assert (alpha["attempts"], beta["attempts"], join["attempts"], final["attempts"]) == (1, 1, 2, 1)
    assert join["output"] == "orange plum" and join["threadId"] == join_thread
    assert final["output"] == "LABEL: orange plum" and final["value"] == 0.9
    assert [s["passed"] for s in final["scores"]] == [True, True]

    calls = server.calls
    assert len(calls) == 5
    join_requests = [user_text(c) for c in calls[2:4]]
    for text in join_requests:  # both runs of the join got both outputs, each under its own step
        assert f"### alpha\n{alpha['output']}" in text and f"### beta\n{beta['output']}" in text
    assert "interrupted before it finished" in join_requests[1]
    assert "Write the label for orange plum." in user_text(calls[4])
    assert "### join\norange plum" in user_text(calls[4])
    # The join's thread holds the cut-off run and the resumed one; the journal is one JSON record a line.
    journal = roder_home / "data" / "workflows" / f"{workflow_id}.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert records[0]["kind"] == "created" and records[-1] == {**records[-1], "kind": "status", "status": "completed"}
