"""Plugin features through the real loop: a plugin's ``bin/`` on the PATH of sandboxed commands
(read-only, only while enabled), and its ``prompt``, ``agent`` and ``http`` hooks judging tool
calls. The model is the loopback model server speaking Chat Completions; everything else is
the default distribution (bootstrap, registry, hooks, policy, the process broker, bubblewrap)."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from roder_core.ir import ToolResultItem
from roder_core.plugins.store import PluginStore
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.runtime.runtime import Runtime
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap
from tests.plugins.support import marketplace, write, write_json
from tests.server.support import PipePeer

HELLO = '#!/bin/sh\necho "hello from $0"\n'


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def results(runtime: Runtime, thread_id: str) -> list[ToolResultItem]:
    return [i for i in runtime.thread(thread_id).items() if isinstance(i, ToolResultItem)]


def install(root: Path, name: str, plugin: dict[str, Any], files: dict[str, str], options: dict[str, Any] | None = None) -> str:
    """A one-plugin catalog under ``root``, added and installed (consenting to what it runs)."""
    folder = root / name
    write_json(folder / ".claude-plugin" / "plugin.json", {"name": name, "version": "1.0.0", **plugin})
    for relative, text in files.items():
        write(folder / relative, text)
        if relative.startswith("bin/"):
            (folder / relative).chmod(0o755)
    marketplace(root, f"{name}-market", [{"name": name, "source": f"./{name}"}])
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(root))
    identifier = f"{name}@{name}-market"
    store.install(identifier, store.preview(identifier).consent, options=options)
    return identifier


def start(workspace: Path, roder_home: Path, server: FakeModelServer, extra: str = "") -> Runtime:
    (roder_home / "config.toml").write_text(
        '[providers.local]\ndialect = "chat-completions"\n'
        f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n{extra}'
    )
    started = start_runtime(
        StartSettings(
            cwd=workspace,
            provider="local",
            mode="bypass",
            interactive=False,
            trust=False,
            env={"RODER_HOME": str(roder_home), "LOCAL_API_KEY": "sk-local-xyz12345", "PATH": "/usr/bin:/bin"},
        )
    )
    return started.runtime


@needs_bwrap
async def test_a_plugins_bin_folder_is_on_the_sandboxed_path_only_while_enabled(
    tmp_path: Path, workspace: Path, roder_home: Path
) -> None:
    identifier = install(tmp_path / "catalog", "tools", {}, {"bin/plugin-hello": HELLO})
    probe = 'plugin-hello; touch "$(dirname "$(command -v plugin-hello)")/planted" 2>&1 || echo write refused'
    steps: list[dict[str, Any]] = [{"tool_calls": [call("bash", command=probe)]}, {"text": "ran it"}]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server)
        try:
            assert runtime.sandbox.effective == "workspace-write", runtime.sandbox.reason
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "say hello")
            [result] = results(runtime, thread.id)
        finally:
            await runtime.close()
    record = PluginStore(RoderPaths.from_env()).installed()[identifier]
    assert f"hello from {record.install_path}/bin/plugin-hello" in result.text, result.text
    assert "Read-only file system" in result.text and "write refused" in result.text
    assert "sandbox workspace-write" in result.text
    assert not (Path(record.install_path) / "bin" / "planted").exists()

    PluginStore(RoderPaths.from_env()).set_enabled(identifier, False)
    steps = [{"tool_calls": [call("bash", command="plugin-hello")]}, {"text": "gone"}]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "say hello again")
            [result] = results(runtime, thread.id)
        finally:
            await runtime.close()
    assert "plugin-hello: command not found" in result.text, result.text


def hooks_file(event: str, matcher: str, handler: dict[str, Any]) -> str:
    return json.dumps({"hooks": {event: [{"matcher": matcher, "hooks": [handler]}]}})


async def test_a_prompt_hook_asks_the_model_and_a_no_refuses(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    handler = {"type": "prompt", "prompt": "Is this command safe to run? $ARGUMENTS"}
    install(tmp_path / "catalog", "judge", {}, {"hooks/hooks.json": hooks_file("PreToolUse", "Bash", handler)})
    (workspace / "build").mkdir()
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command="rm -rf build")]},  # the main thread
        {"text": '{"ok": false, "reason": "deleting build/ is not allowed"}'},  # the hook's model call
        {"tool_calls": [call("bash", command="echo fine")]},
        {"text": 'Looks safe. {"ok": true}'},
        {"text": "done"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            turn = await runtime.run_turn(thread.id, "clean up")
            assert turn.status == "completed"
            refused, ran = results(runtime, thread.id)
        finally:
            await runtime.close()
    assert refused.is_error and "deleting build/ is not allowed" in refused.text, refused.text
    assert (workspace / "build").is_dir()
    assert not ran.is_error and "fine" in ran.text, ran.text
    asked = json.dumps(server.calls[1].json)
    assert "Is this command safe to run?" in asked and '\\"tool_name\\": \\"Bash\\"' in asked and "rm -rf build" in asked
    assert not server.calls[1].json.get("tools")  # one model call, no tools offered


async def test_an_agent_hook_reads_files_before_it_answers(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    handler = {"type": "agent", "prompt": "Check the command against policy.txt. $ARGUMENTS"}
    # every tool call, the agent's own read included: that one must not be judged again
    install(tmp_path / "catalog", "auditor", {}, {"hooks/hooks.json": hooks_file("PreToolUse", "", handler)})
    write(workspace / "policy.txt", "POLICY: never run echo in this project")
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command="echo hi")]},
        {"tool_calls": [call("read", path="policy.txt")]},  # the hook's agent looks first
        {"text": '{"ok": false, "reason": "policy.txt forbids echo"}'},
        {"text": "understood"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "greet")
            [refused] = results(runtime, thread.id)
        finally:
            await runtime.close()
    assert refused.is_error and "policy.txt forbids echo" in refused.text, refused.text
    assert len(server.calls) == 4  # the agent's read ran without a hook of its own
    agent_tools = {t["function"]["name"] for t in server.calls[1].json.get("tools", [])}
    assert agent_tools and agent_tools <= {"read", "grep", "glob", "ls"}, agent_tools
    assert "POLICY: never run echo in this project" in json.dumps(server.calls[2].json)


@contextmanager
def hook_server(answer: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback endpoint for http hooks: records each POST (headers and body), answers ``answer``."""
    seen: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({"headers": dict(self.headers), "body": json.loads(body)})
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_an_http_hook_posts_through_the_network_policy(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "the ci gate says no",
        }
    }
    with hook_server(deny) as (url, seen):
        handler = {
            "type": "http",
            "url": url,
            "headers": {"Authorization": "Bearer ${CLAUDE_PLUGIN_OPTION_TOKEN}", "X-Home": "$HOME"},
            "allowedEnvVars": ["CLAUDE_PLUGIN_OPTION_TOKEN"],
        }
        install(
            tmp_path / "catalog",
            "gate",
            {"userConfig": {"TOKEN": {"type": "string", "sensitive": True, "required": True}}},
            {"hooks/hooks.json": hooks_file("PreToolUse", "", handler)},
            options={"TOKEN": "hook-token-0123456789"},
        )
        steps: list[dict[str, Any]] = [{"tool_calls": [call("bash", command="echo one")]}, {"text": "refused"}]
        async with FakeModelServer(steps) as server:
            # not in the [network] allow list: the hook cannot run, so the call is refused (fail closed)
            runtime = start(workspace, roder_home, server)
            try:
                thread = await runtime.start_thread()
                await runtime.run_turn(thread.id, "one")
                [blocked] = results(runtime, thread.id)
            finally:
                await runtime.close()
        assert blocked.is_error and "http hook refused by the network policy" in blocked.text, blocked.text
        assert 'add "127.0.0.1" to it' in blocked.text
        assert seen == []

        steps = [{"tool_calls": [call("bash", command="echo two")]}, {"text": "denied"}]
        async with FakeModelServer(steps) as server:
            runtime = start(workspace, roder_home, server, '[network]\nallow = ["127.0.0.1"]\n')
            try:
                thread = await runtime.start_thread()
                await runtime.run_turn(thread.id, "two")
                [denied] = results(runtime, thread.id)
            finally:
                await runtime.close()
    assert denied.is_error and "the ci gate says no" in denied.text, denied.text
    [posted] = seen
    assert posted["body"]["hook_event_name"] == "PreToolUse" and posted["body"]["tool_input"] == {"command": "echo two"}
    assert posted["headers"]["Authorization"] == "Bearer hook-token-0123456789"
    assert posted["headers"]["X-Home"] == ""  # not listed in allowedEnvVars
    assert "hook-token-0123456789" not in json.dumps([r.json for r in server.calls])


TERSE = """---
name: terse
description: short answers, no preamble
keep-coding-instructions: true
---

Answer in at most three sentences. Never restate the question.
"""


async def test_an_output_style_is_chosen_with_a_slash_command_and_joins_the_system_prompt(
    tmp_path: Path, workspace: Path, roder_home: Path
) -> None:
    install(tmp_path / "catalog", "styles", {}, {"output-styles/terse.md": TERSE, "output-styles/chatty.md": "Be chatty."})
    steps: list[dict[str, Any]] = [{"text": "plain"}, {"text": "terse"}, {"text": "plain again"}]
    async with FakeModelServer(steps) as server:
        write(
            roder_home / "config.toml",
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n',
        )
        env = {**os.environ, "LOCAL_API_KEY": "sk-local-test-0123456789", "PYTHONUNBUFFERED": "1"}
        peer = await PipePeer.start(workspace, env, "--provider", "local", "--model", "fake-model")
        try:
            await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
            thread = (await peer.call("thread/start", {"cwd": str(workspace)}))["thread"]
            listed = await peer.call("commands/run", {"threadId": thread["id"], "name": "output-style"})
            assert "* default" in listed["message"] and "styles:chatty" in listed["message"]
            assert "styles:terse  short answers, no preamble" in listed["message"]
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "one"})
            await peer.next_notification("turn/completed", threadId=thread["id"])
            chosen = await peer.call("commands/run", {"threadId": thread["id"], "name": "output-style", "arguments": "terse"})
            assert chosen["message"] == "output style: styles:terse"
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "two"})
            await peer.next_notification("turn/completed", threadId=thread["id"])
            unknown = await peer.request("commands/run", {"threadId": thread["id"], "name": "output-style", "arguments": "loud"})
            assert "'loud' is not an output style; styles: styles:chatty, styles:terse; or default" in unknown["error"]["message"]
            await peer.call("commands/run", {"threadId": thread["id"], "name": "output-style", "arguments": "default"})
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "three"})
            await peer.next_notification("turn/completed", threadId=thread["id"])
        finally:
            code, stderr = await peer.close()
    assert code == 0, stderr
    systems = [json.dumps([m for m in c.json["messages"] if m["role"] == "system"]) for c in server.calls]
    assert "Never restate the question" not in systems[0]
    assert "Output style styles:terse" in systems[1] and "Never restate the question" in systems[1]
    assert "Never restate the question" not in systems[2]


async def wait_for_output(runtime: Runtime, text: str) -> None:
    """Until a task of the runtime has printed ``text`` (seen through the task table)."""
    changed = asyncio.Event()
    remove = runtime.tasks.subscribe(lambda _info: changed.set())
    try:
        while not any(text in runtime.tasks.output(t.id).text for t in runtime.tasks.list()):
            await changed.wait()
            changed.clear()
    finally:
        remove()


async def test_monitors_run_in_the_background_and_their_output_reaches_the_next_turn(
    tmp_path: Path, workspace: Path, roder_home: Path
) -> None:
    monitors = [
        {"name": "ticker", "command": "echo tick-$((20+1)); echo tick-22; exec sleep 600", "description": "a ticker"},
        {"name": "deploys", "command": "echo deploy-finished; exec sleep 600", "when": "on-skill-invoke:deploy"},
    ]
    skill = "---\nname: deploy\ndescription: deploy things\n---\nDeploy."
    files = {"monitors/monitors.json": json.dumps(monitors), "skills/deploy/SKILL.md": skill}
    install(tmp_path / "catalog", "watcher", {}, files)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("skill", name="watcher:deploy")]},
        {"text": "loaded"},
        {"text": "I see the monitors"},
    ]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "deploy")
            tasks = runtime.tasks.list()
            assert len(tasks) == 2 and all(t.status == "running" for t in tasks), tasks
            await wait_for_output(runtime, "tick-22")
            await wait_for_output(runtime, "deploy-finished")
            await runtime.run_turn(thread.id, "anything new?")
        finally:
            await runtime.close()
    first = json.dumps(server.calls[0].json["messages"])
    assert "tick-21" not in first  # the first turn starts the monitors; their output comes later
    later = json.dumps(server.calls[2].json["messages"])
    assert "Monitor watcher:ticker (a ticker) printed since the last turn:\\ntick-21\\ntick-22" in later, later
    assert "Monitor watcher:deploys printed since the last turn:\\ndeploy-finished" in later
    assert all(t.status == "cancelled" for t in runtime.tasks.list())  # closing the runtime stops them
