"""One decision for "may this content reach the model" (``brokers.content_gate``).

``deny = ["read(.env)"]`` and the secret masks hold on every path that reveals content or names:
read (directly and through a link), grep with and without a path (ripgrep in real bubblewrap),
glob, ls, an ``@file`` of a prompt and the app server's ``fs/readFile`` / ``fs/readDirectory``.
The model is the loopback model server speaking Chat Completions; the runtime is the default
distribution. CI runs this file as root and as an unprivileged user (``.ci/run-unprivileged``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ApprovalDecision, ToolResultItem
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads.events import ApprovalRequested
from tests.brokers.helpers import marker, needs_bwrap

pytestmark = needs_bwrap


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _project(ws: Path, mark: str) -> None:
    (ws / ".env").write_text(f"DATABASE_URL=postgres://app:{mark}@db/app\n")
    (ws / "config").mkdir()
    (ws / "config" / ".env").write_text(f"DATABASE_URL=nested-{mark}\n")
    (ws / "private").mkdir()
    (ws / "private" / "token.txt").write_text(f"DATABASE_URL={mark}-masked\n")
    (ws / "secrets").mkdir()
    (ws / "secrets" / "ask.txt").write_text(f"DATABASE_URL={mark}-asked\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text('import os\nURL = os.environ["DATABASE_URL"]\n')
    (ws / "env-link").symlink_to(".env")
    os.link(ws / ".env", ws / "notes.txt")  # another name for .env, as `ln .env notes.txt` makes


def _config(server: FakeModelServer, ws: Path) -> str:
    return (
        '[providers.local]\ndialect = "chat-completions"\n'
        f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
        '[policy]\ndeny = ["read(.env)"]\nask = ["read(secrets/**)"]\n'
        f'[sandboxing]\ndeny_read = ["{ws / "private"}"]\n'
    )


async def _client(ws: Path, roder_home: Path, server: FakeModelServer, *, interactive: bool = False) -> LocalAppClient:
    (roder_home / "config.toml").write_text(_config(server, ws))
    env = {**os.environ, "LOCAL_API_KEY": "sk-local-abc12345"}
    settings = StartSettings(cwd=ws, provider="local", mode="ask", interactive=interactive, trust=False, env=env)
    return LocalAppClient.start(settings)


def _results(client: LocalAppClient, thread_id: str) -> dict[str, ToolResultItem]:
    return {i.call_id: i for i in client.runtime.thread(thread_id).items() if isinstance(i, ToolResultItem)}


@pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep")
async def test_read_rules_and_masks_hold_on_every_tool_that_reveals_content(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    _project(workspace, mark)
    calls = {
        "grep-no-path": call("grep", pattern="DATABASE_URL"),
        "grep-dot": call("grep", pattern="DATABASE_URL", path="."),
        "grep-glob": call("grep", pattern="postgres", glob="*.env*"),
        "grep-nested": call("grep", pattern="DATABASE", path="config"),
        "grep-case": call("grep", pattern="database_url", case_insensitive=True),
        "glob-all": call("glob", pattern="**/*"),
        "glob-env": call("glob", pattern=".env*"),
        "ls-root": call("ls"),
        "ls-private": call("ls", path="private"),
        "read-link": call("read", path="env-link"),
        "read-masked": call("read", path="private/token.txt"),
    }
    steps: list[dict[str, Any]] = [{"tool_calls": [dict(c, id=name) for name, c in calls.items()]}, {"text": "done"}]
    async with FakeModelServer(steps) as server:
        client = await _client(workspace, roder_home, server)
        try:
            thread = await client.runtime.start_thread()
            turn = await client.runtime.run_turn(thread.id, "find the database url")
            assert turn.status == "completed"
            found = _results(client, thread.id)
            for name in calls:
                assert mark not in found[name].text, (name, found[name].text)
            # what is allowed still works, and what was left out is said, never silent
            assert "src/app.py:2:" in found["grep-no-path"].text, found["grep-no-path"].text
            assert "left out: withheld from the model" in found["grep-no-path"].text
            assert "src/app.py" in found["glob-all"].text and ".env" not in found["glob-all"].text.split("\n\n")[0]
            assert "left out" in found["glob-env"].text
            assert "src/" in found["ls-root"].text and ".env " not in found["ls-root"].text
            assert found["read-link"].is_error and "read(.env)" in found["read-link"].text, found["read-link"].text
            assert found["read-masked"].is_error and "secret path" in found["read-masked"].text
            # nothing of it went to the model either
            assert all(mark not in c.body.decode() for c in server.calls)
        finally:
            await client.close()


async def test_at_file_and_the_app_servers_fs_methods_obey_the_same_decision(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    _project(workspace, mark)
    async with FakeModelServer([{"text": "ok"}]) as server:
        client = await _client(workspace, roder_home, server)
        try:
            thread = await client.runtime.start_thread()
            for path in (".env", "env-link", "private/token.txt"):
                with pytest.raises(RpcError) as caught:
                    await client.request("fs/readFile", {"path": str(workspace / path)})
                assert mark not in caught.value.message
                with pytest.raises(RpcError):
                    await client.request(
                        "turn/start",
                        {"threadId": thread.id, "prompt": "see", "input": [{"type": "file", "path": str(workspace / path)}]},
                    )
            big = workspace / "big.log"
            with big.open("wb") as handle:
                handle.truncate(26 * 1024 * 1024)  # sparse: larger than an @file may be
            with pytest.raises(RpcError) as caught:
                await client.request(
                    "turn/start", {"threadId": thread.id, "prompt": "see", "input": [{"type": "file", "path": str(big)}]}
                )
            assert "larger than 25 MB" in caught.value.message
            listing = await client.request("fs/readDirectory", {"path": str(workspace)})
            names = {e.name for e in listing.entries}  # type: ignore[attr-defined]
            assert "src" in names and ".env" not in names and "env-link" not in names
            with pytest.raises(RpcError) as caught:
                await client.request("fs/readDirectory", {"path": str(workspace / "private")})
            assert "secret path" in caught.value.message
            assert server.calls == []  # no turn ever started with the withheld content
        finally:
            await client.close()


async def test_an_ask_rule_withholds_from_searches_but_an_explicit_read_asks(workspace: Path, roder_home: Path) -> None:
    mark = marker()
    _project(workspace, mark)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [dict(call("grep", pattern="DATABASE_URL", path="secrets"), id="g")]},
        {"tool_calls": [dict(call("read", path="secrets/ask.txt"), id="r")]},
        {"text": "done"},
    ]
    async with FakeModelServer(steps) as server:
        client = await _client(workspace, roder_home, server, interactive=True)
        try:
            runtime = client.runtime
            thread = await runtime.start_thread()
            seen: list[ApprovalRequested] = []

            def approve(event: Any) -> None:
                if isinstance(event, ApprovalRequested):
                    seen.append(event)
                    decision = ApprovalDecision(decision="allow_once")
                    asyncio.get_running_loop().call_soon(runtime.resolve_approval, event.request.approval_id, decision)

            remove = runtime.bus.add_listener(approve)
            try:
                await runtime.run_turn(thread.id, "look")
            finally:
                remove()
            found = _results(client, thread.id)
            assert mark not in found["g"].text and "left out" in found["g"].text, found["g"].text
            assert seen, "the explicit read asked"
            assert f"{mark}-asked" in found["r"].text, found["r"].text
        finally:
            await client.close()
