"""The app server's auth token is a secret whatever variable holds it: a real ``roder app-server
--remote`` with the token in a variable whose name says nothing about secrets; a command the
model runs must not find it in its environment, and the banner's ``pair:`` line must not carry it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.server.support import RemoteServer, WsPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "pairing-code-7Hq2mXv9LpR4"


async def test_token_from_env_never_reaches_a_command_or_the_pair_line(tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [call("shell", command="env > seen-env.txt; echo scanned")]},
        {"text": "finished"},
    ]
    workspace, env = trusted_workspace(tmp_path, steps)
    env["RODER_PAIRING"] = TOKEN  # no KEY/TOKEN/SECRET in the name: only its value says it is secret
    env["ALSO_HOLDS_IT"] = f"prefix-{TOKEN}-suffix"
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_PAIRING", "--print-qr=false", "--mode", "bypass")
    try:
        pair = next(line.split("pair: ", 1)[1] for line in server.banner.splitlines() if "pair: " in line)
        assert TOKEN not in server.banner
        assert "token not included: env:RODER_PAIRING" in pair
        payload = pair.split("payload=", 1)[1].split()[0]
        decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert "token" not in decoded
        assert decoded["urls"]
        peer = await WsPeer.connect(server.url, TOKEN)
        thread = (await peer.call("thread/start"))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "look around"})
        done = await peer.next_notification("turn/completed", threadId=thread["id"], timeout=60)
        assert done["turn"]["status"] == "completed"
        seen = (workspace / "seen-env.txt").read_text()
        assert "PATH=" in seen  # the command ran and dumped its environment
        assert TOKEN not in seen
        assert "RODER_PAIRING" not in seen
        assert "ALSO_HOLDS_IT" not in seen
        await peer.close()
    finally:
        await server.stop()
