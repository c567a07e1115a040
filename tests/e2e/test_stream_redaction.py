"""Secrets split across live chunks, end to end: a model that streams an environment key and a
stored provider key a few characters at a time, and a bash command that prints the key in two
writes, seen by a client over a real stdio app-server pipe (command/exec's streamed output too)
and on `roder -p --output-format stream-json` stdout. Neither secret (nor half of one) reaches the client; the redaction marker
does; everything else arrives intact and in order; item/started shows the item as it was when
it started."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.settings.credentials import CredentialStore
from roder_core.settings.paths import RoderPaths
from tests.server.support import PipePeer

pytestmark = pytest.mark.e2e

KEY = "Zq9xTt4Lm2Pp8Rr1Vv6Nn3Ww5"  # no token format: only knowing the value can catch it
STORED = "or-stored-" + "Hh4Jj" * 6
HALF = len(KEY) // 2
TEXT = f"The key is {KEY} and the stored one is {STORED}, twice: {KEY}{STORED}. Done."
SHOWN_TEXT = (
    "The key is [redacted:MY_SERVICE_API_KEY] and the stored one is [redacted:openrouter key], twice: "
    "[redacted:MY_SERVICE_API_KEY][redacted:openrouter key]. Done."
)
# The two halves of the key come out in two writes, half a second apart.
COMMAND = (
    f"printf 'before %s' \"${{MY_SERVICE_API_KEY:0:{HALF}}}\"; sleep 0.5; printf '%s after\\n' \"${{MY_SERVICE_API_KEY:{HALF}}}\""
)
STEPS = [
    {
        "reasoning": f"the key {KEY} matters",
        "text": TEXT,
        "chunk_size": 4,
        "tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}],
    },
    {"text": "All set.", "chunk_size": 3},
]


def setup_run(workspace: Path, roder_home: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of a run: the key in the environment and granted to commands by name,
    another key stored with `roder providers login`, the script above."""
    env = {**os.environ, "RODER_HOME": str(roder_home), "MY_SERVICE_API_KEY": KEY, "PYTHONUNBUFFERED": "1"}
    config = RoderPaths.from_env(env).config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[secrets]\npass_env = ["MY_SERVICE_API_KEY"]\n')
    CredentialStore.for_env(env).set("openrouter", STORED)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": STEPS}))
    env["RODER_MOCK_SCRIPT"] = str(script)
    return env


def assert_no_secret(wire: str) -> None:
    for secret in (KEY, STORED):
        half = len(secret) // 2
        assert secret[:half] not in wire and secret[half:] not in wire, "a secret (or half of one) was shown"


def check_stream(notes: list[dict[str, Any]]) -> None:
    """Deltas add up to the redacted text in order; item/started shows an empty streaming item."""
    completed = {n["item"]["id"]: n["item"] for n in notes if n["type"] == "item/completed"}
    texts: dict[tuple[str, str], str] = {}
    for note in notes:
        if note["type"] == "item/agentMessage/delta":
            key = (note["itemId"], note["kind"])
            texts[key] = texts.get(key, "") + note["delta"]
    messages = [(item_id, text) for (item_id, kind), text in texts.items() if kind == "text"]
    assert [text for _, text in messages] == [SHOWN_TEXT, "All set."]
    assert all(completed[item_id]["text"] == text for item_id, text in messages)
    reasoning = [text for (_, kind), text in texts.items() if kind == "reasoning"]
    assert reasoning == ["the key [redacted:MY_SERVICE_API_KEY] matters"]
    output = "".join(n["delta"] for n in notes if n["type"] == "item/toolOutput/delta")
    assert output == "before [redacted:MY_SERVICE_API_KEY] after\n"
    started = [n["item"] for n in notes if n["type"] == "item/started" and n["item"]["type"] in ("agentMessage", "reasoning")]
    assert len(started) == 3
    assert all(item["text"] == "" for item in started)


async def test_stdio_app_server_never_shows_a_split_secret(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    env = setup_run(workspace, roder_home, tmp_path)
    peer = await PipePeer.start(workspace, env, "--mode", "bypass")
    try:
        await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
        thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
        await peer.call("turn/start", {"threadId": thread["id"], "prompt": "show me"})
        done = await peer.next_notification("turn/completed", threadId=thread["id"], timeout=60)
        assert done["turn"]["status"] == "completed"
        read = await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True})
        executed = await peer.call(
            "command/exec", {"command": ["bash", "-c", COMMAND], "streamStdoutStderr": True, "processId": "p1"}
        )
        assert executed["exitCode"] == 0
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr
    exec_output = [
        base64.b64decode(m["params"]["deltaBase64"]).decode() for m in peer.seen if m["method"] == "command/exec/output_delta"
    ]
    assert_no_secret(json.dumps(peer.seen) + json.dumps(read) + stderr + json.dumps(exec_output))
    assert "".join(exec_output) == "before [redacted:MY_SERVICE_API_KEY] after\n"
    check_stream([{"type": m["method"], **m["params"]} for m in peer.seen])


def test_one_shot_stream_json_never_shows_a_split_secret(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    env = setup_run(workspace, roder_home, tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roder_tui.cli",
            "-p",
            "show me",
            "--provider",
            "mock",
            "--mode",
            "bypass",
            "--output-format",
            "stream-json",
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert_no_secret(done.stdout + done.stderr)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    check_stream(lines)
    assert lines[-1]["type"] == "result"
    assert lines[-1]["text"] == "All set."
