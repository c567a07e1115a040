"""Hooks get tool results as the transcript has them: without secrets.

A file in the workspace holds the value of a secret variable (a ``.env`` the model reads, a
config with a token pasted in). The model's copy of a ``read`` is redacted, but the result went
to ``PostToolUse`` hooks before that: a command hook that logs its payloads (or an HTTP hook
posting them elsewhere) got the secret. Through the real loop (the loopback model server, a real
hook process from the user's config), the hook's payload holds ``[redacted:NAME]`` and never the
value, for a file read and for a command's output alike.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import marker


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.mark.parametrize(
    "call",
    [_call("read", path="notes.txt"), _call("grep", pattern="token", path="notes.txt"), _call("bash", command="cat notes.txt")],
    ids=["read", "grep", "bash"],
)
async def test_a_post_tool_use_hook_never_sees_a_secret_a_file_held(
    workspace: Path, roder_home: Path, tmp_path: Path, call: dict[str, Any]
) -> None:
    secret = f"db-{marker()}-secretvalue"
    (workspace / "notes.txt").write_text(f"token = {secret}\n")
    log = tmp_path / "payloads.jsonl"
    hook = tmp_path / "log_hook.py"
    hook.write_text(f"import sys\nopen({str(log)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    async with FakeModelServer([call, {"text": "done"}]) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
            "[[hooks.PostToolUse]]\n"
            f'hooks = [{{ type = "command", command = {json.dumps(f"{sys.executable} {hook}")} }}]\n'
        )
        env = {**os.environ, "LOCAL_API_KEY": "sk-local-1", "APP_DB_SECRET": secret}
        runtime = start_runtime(StartSettings(cwd=workspace, provider="local", mode="bypass", interactive=False, env=env)).runtime
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "go")
        finally:
            await runtime.close()
        model_saw = server.calls[-1].body.decode("utf-8")
    payloads = log.read_text()
    assert "[redacted:APP_DB_SECRET]" in payloads, payloads  # the hook did get the result
    assert secret not in payloads
    assert secret not in model_saw and "[redacted:APP_DB_SECRET]" in model_saw


EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "SessionEnd")


async def test_no_hook_event_payload_carries_a_secret(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    """The prompt, a tool call's arguments, the model's last message and the items to compact
    all hold a secret's value: a command hook on every event logs its stdin, and no payload has
    the value (each has the marker where it was). The PreToolUse hook hands the call's input back
    unchanged (``updatedInput``): the command still runs with the real value, as the model wrote it."""
    secret = f"db-{marker()}-secretvalue"
    log = tmp_path / "payloads.jsonl"
    hook = tmp_path / "log_hook.py"
    hook.write_text(
        "import json, sys\n"
        "data = sys.stdin.read()\n"
        f"open({str(log)!r}, 'a').write(data + '\\n')\n"
        "event = json.loads(data)\n"
        "if event['hook_event_name'] == 'PreToolUse':\n"
        "    print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', 'permissionDecision': 'allow',"
        " 'updatedInput': event['tool_input']}}))\n"
    )
    command = json.dumps(f"{sys.executable} {hook}")
    hooks = "".join(f'[[hooks.{event}]]\nhooks = [{{ type = "command", command = {command} }}]\n' for event in EVENTS)
    script = [
        _call("bash", command=f"echo {secret} > kept.txt"),
        {"text": f"The value is {secret}."},
        {"text": f"Summary: the user's value was {secret}."},
    ]
    async with FakeModelServer(script) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n' + hooks
        )
        env = {**os.environ, "LOCAL_API_KEY": "sk-local-1", "APP_DB_SECRET": secret}
        runtime = start_runtime(StartSettings(cwd=workspace, provider="local", mode="bypass", interactive=False, env=env)).runtime
        try:
            thread = await runtime.start_thread()
            turn = await runtime.run_turn(thread.id, f"Store the value {secret} in kept.txt")
            assert turn.status == "completed", turn
            await runtime.compact(thread.id)
            await runtime.close_thread(thread.id)
        finally:
            await runtime.close()
    payloads = [json.loads(line) for line in log.read_text().splitlines() if line]
    seen = {payload["hook_event_name"] for payload in payloads}
    assert seen == set(EVENTS), seen
    text = log.read_text()
    assert secret not in text
    for event in ("UserPromptSubmit", "PreToolUse", "Stop"):  # PreCompact names no items, only the transcript (stored redacted)
        [payload] = [p for p in payloads if p["hook_event_name"] == event]
        assert "[redacted:APP_DB_SECRET]" in json.dumps(payload), (event, payload)
    assert (workspace / "kept.txt").read_text().strip() == secret
