"""Plugins from the official marketplace copy, installed with the real CLI and used by the real
app server against the loopback model server: a command with ``!`` lines and allowed-tools, an
agent through the task tool, a skill that runs its script, a hook that blocks, and an MCP tool
of a plugin without a manifest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.plugins.support import copy_official, git, marketplace, write, write_json
from tests.server.support import PipePeer, roder_command

pytestmark = pytest.mark.e2e
FIXTURE_SERVER = Path(__file__).resolve().parents[1] / "ecosystem" / "mcp_fixture_server.py"
MCP_TOOL = "mcp__plugin_fixture-tools_fixture__echo"
HOOKIFY_RULE = """---
name: block-dangerous-rm
enabled: true
event: bash
pattern: rm\\s+-rf
action: block
---

Dangerous rm command detected by the plugin's hook.
"""


def roder_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(roder_command(*args), cwd=cwd, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr + done.stdout
    return done


def tool_call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def fixture_marketplace(root: Path) -> Path:
    """A catalog with one plugin that has no plugin.json: an MCP server in a flat .mcp.json."""
    plugin = root / "fixture-tools"
    plugin.mkdir(parents=True)
    shutil.copy(FIXTURE_SERVER, plugin / "server.py")
    write_json(
        plugin / ".mcp.json",
        {
            "fixture": {
                "command": sys.executable,
                "args": ["${CLAUDE_PLUGIN_ROOT}/server.py", "stdio"],
                "env": {"FIXTURE_GREETING": "plugin data at ${CLAUDE_PLUGIN_DATA}"},
            }
        },
    )
    return marketplace(root, "fixture-market", [{"name": "fixture-tools", "source": "./fixture-tools"}])


def project(workspace: Path) -> None:
    git(workspace, "init", "-q", "-b", "main")
    write(workspace / "app.py", "print('v1')\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    write(workspace / "app.py", "print('v2')\n")
    (workspace / "build").mkdir()
    write(workspace / "build" / "out.txt", "artifact")
    write(workspace / ".claude" / "hookify.block-rm.local.md", HOOKIFY_RULE)
    write(workspace / ".claude" / "demo.local.md", "---\nenabled: true\nmode: strict\n---\n\nSettings body.\n")


def messages_text(request: Any) -> str:
    return json.dumps(request.json["messages"])


async def test_each_component_kind_end_to_end(tmp_path: Path, roder_home: Path, workspace: Path) -> None:
    official = copy_official(tmp_path / "catalogs", ["commit-commands", "code-simplifier", "plugin-dev", "hookify", "receipts"])
    fixtures = fixture_marketplace(tmp_path / "catalogs" / "fixture-market")
    roder_cli("plugin", "marketplace", "add-default", "--path", str(official), cwd=workspace)
    roder_cli("plugin", "marketplace", "add", str(fixtures), cwd=workspace)
    for name in ("commit-commands", "code-simplifier", "plugin-dev", "hookify", "receipts", "fixture-tools"):
        shown = roder_cli("plugin", "install", name, "--yes", cwd=workspace).stdout
        assert f"installed {name}@" in shown
    installed = {p["id"]: p for p in json.loads(roder_cli("plugin", "list", "--json", cwd=workspace).stdout)["plugins"]}
    plugin_dev = Path(installed["plugin-dev@claude-plugins-official"]["installPath"])
    settings_script = plugin_dev / "skills" / "plugin-settings" / "scripts" / "validate-settings.sh"
    assert settings_script.is_file()
    project(workspace)

    steps: list[dict[str, Any]] = [
        {"text": "Committed nothing yet."},  # 0: /commit-commands:commit
        {
            "tool_calls": [
                tool_call(
                    "task", description="simplify", prompt="Simplify app.py", subagent_type="code-simplifier:code-simplifier"
                )
            ]
        },  # 1
        {"text": "app.py is already simple."},  # 2: the subagent
        {"text": "The simplifier found nothing to change."},  # 3
        {"tool_calls": [tool_call("skill", name="plugin-dev:plugin-settings")]},  # 4
        {"tool_calls": [tool_call("bash", command=f"bash {settings_script} .claude/demo.local.md")]},  # 5
        {"text": "Settings validated."},  # 6
        {"tool_calls": [tool_call("bash", command="rm -rf build")]},  # 7
        {"text": "The hook refused."},  # 8
        {"tool_calls": [tool_call(MCP_TOOL, text="hi")]},  # 9
        {"text": "Echoed."},  # 10
    ]
    async with FakeModelServer(steps) as model:
        write(
            roder_home / "config.toml",
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{model.base_url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n',
        )
        env = {**os.environ, "LOCAL_API_KEY": "sk-local-test-0123456789", "PYTHONUNBUFFERED": "1"}
        peer = await PipePeer.start(workspace, env, "--provider", "local", "--model", "my-model", "--mode", "ask")
        try:
            await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
            listed = {c["name"]: c for c in (await peer.call("commands/list"))["commands"]}
            assert listed["commit-commands:commit"]["scope"] == "plugin:commit-commands@claude-plugins-official"
            assert "receipts:receipts" in listed  # the official plugin without a manifest: its skill loads
            thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]

            # a command: its !`git status` runs under policy (allowed-tools pre-approve it in ask mode)
            run = await peer.call("commands/run", {"threadId": thread["id"], "name": "commit-commands:commit"})
            assert run["kind"] == "turn"
            await peer.next_notification("turn/completed", threadId=thread["id"])
            sent = messages_text(model.calls[0])
            assert "modified:   app.py" in sent and "!`git status`" not in sent
            assert "Based on the above changes, create a single git commit." in sent

            await peer.call("session/set_mode", {"mode": "bypass"})
            # an agent through the task tool: the child runs with the plugin agent's prompt
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "simplify the code"})
            done = await peer.next_notification("turn/completed", threadId=thread["id"])
            assert done["turn"]["status"] == "completed"
            child = messages_text(model.calls[2])
            assert "Simplify app.py" in child and "code simplification specialist" in child.lower()

            # a skill with scripts: loading it names its folder; its script runs through bash
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "check my plugin settings"})
            await peer.next_notification("turn/completed", threadId=thread["id"])
            after_skill = messages_text(model.calls[5])
            assert f'directory=\\"{settings_script.parent.parent}\\"' in after_skill
            after_script = messages_text(model.calls[6])
            assert "File exists" in after_script and "Settings validated" not in after_script

            # a hook that blocks: hookify's PreToolUse hook denies rm -rf
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "clean the build"})
            await peer.next_notification("turn/completed", threadId=thread["id"])
            assert (workspace / "build" / "out.txt").exists()
            refused = messages_text(model.calls[8])
            assert "Dangerous rm command detected by the plugin's hook" in refused and "hooks:\\n{}" not in refused

            # an MCP tool of a plugin without a manifest: first use is reviewed like any server
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "echo hi"})
            review = (await peer.next_notification("approval/requested", threadId=thread["id"]))["request"]
            assert "plugin:fixture-tools:fixture" in review["reason"]
            await peer.call("session/resolve_approval", {"approvalId": review["approvalId"], "approved": True})
            await peer.next_notification("turn/completed", threadId=thread["id"])
            data_dir = roder_home / "data" / "plugins" / "data" / "fixture-tools-fixture-market"
            assert f"plugin data at {data_dir}: hi" in messages_text(model.calls[10])
        finally:
            code, stderr = await peer.close()
    assert code == 0, stderr
