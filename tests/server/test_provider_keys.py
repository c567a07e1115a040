"""providers/configure with an API key (seed 004): the key goes to the private credentials file,
the running engine uses it at once (sent in the dialect's header to the loopback model server),
and it never reaches config.toml, transcripts, the audit log, any other file or stderr."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, RpcError
from roder_core.server.protocol import (
    PROVIDERS_LIST,
    THREAD_READ,
    THREAD_START,
    TURN_START,
    ThreadReadParams,
    ThreadStartParams,
    TurnStartParams,
)
from roder_core.testing.fake_server import FakeModelServer
from tests.server.support import PipePeer

#: Not shaped like any well-known token, so only the stored-key redaction can catch it.
KEY = "rk-stored-DONOTLEAK-5f1c9a7e3b2d4c6e"
#: provider -> (header the dialect sends the key in, its expected value)
HEADERS = {
    "openrouter": ("authorization", f"Bearer {KEY}"),
    "anthropic": ("x-api-key", KEY),
    "openai": ("authorization", f"Bearer {KEY}"),
}


def point_at(home: Path, provider: str, base_url: str) -> None:
    (home / "config.toml").write_text(f'[providers.{provider}]\nbase_url = "{base_url}"\n', encoding="utf-8")


def echoing_steps() -> list[dict[str, Any]]:
    """A reply that repeats the key, as a model might: the transcript must not keep it."""
    return [{"text": f"You told me your key is {KEY}, keep it safe."}]


def assert_no_leak(home: Path) -> None:
    """The key is in the credentials file, with mode 0600, and in no other file under RODER_HOME."""
    credentials = home / "data" / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert json.loads(credentials.read_text())["keys"]
    checked = 0
    for path in home.rglob("*"):
        if path.is_file() and path != credentials:
            checked += 1
            assert KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
    assert checked >= 3  # config.toml, the thread file, the audit log at least


def thread_text(home: Path) -> str:
    return "".join(p.read_text() for p in (home / "data" / "threads").rglob("*.jsonl"))


async def wait_completed(events: Any, thread_id: str) -> Any:
    async def find() -> Any:
        async for event in events:
            if event.method == "turn/completed" and event.thread_id == thread_id:
                return event.turn
        raise AssertionError("stream ended")

    async with asyncio.timeout(30):
        return await find()


@pytest.mark.parametrize("provider", sorted(HEADERS))
async def test_configure_key_in_process_then_turn_sends_it(provider: str, roder_home: Path, workspace: Path) -> None:
    async with FakeModelServer(echoing_steps()) as server:
        point_at(roder_home, provider, server.base_url)
        client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", trust=False, env=dict(os.environ)))
        async with client:
            before = {p.id: p for p in (await client.call(PROVIDERS_LIST)).providers}[provider]
            assert before.auth_configured is False
            assert before.auth_source is None
            result = await client.request("providers/configure", {"provider": provider, "apiKey": KEY})
            assert result.wire() == {
                "provider": provider,
                "persisted": True,
                "restartRequired": False,
                "keyStored": True,
                "keyRemoved": False,
                "authSource": "stored",
                "warnings": [],
            }
            listing = await client.call(PROVIDERS_LIST)
            after = {p.id: p for p in listing.providers}[provider]
            assert after.auth_configured is True
            assert after.auth_source == "stored"
            assert KEY not in json.dumps(listing.wire())
            events = client.subscribe()
            thread = (await client.call(THREAD_START, ThreadStartParams(model_provider=provider, model="any-model"))).thread
            await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hello"))
            turn = await wait_completed(events, thread.id)
            assert turn.status == "completed", turn.error
            header, value = HEADERS[provider]
            assert server.calls[0].headers[header] == value
            read = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
            reply = read.turns[0].items[-1].text
            assert KEY not in reply
            assert f"[redacted:{provider} key]" in reply
    assert "[redacted:" in thread_text(roder_home)
    assert KEY not in (roder_home / "config.toml").read_text()
    assert_no_leak(roder_home)


async def test_env_key_wins_and_empty_key_logs_out(roder_home: Path, workspace: Path) -> None:
    env = {**os.environ, "OPENROUTER_API_KEY": "env-key-0123456789"}
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", trust=False, env=env))
    async with client:
        result = await client.request("providers/configure", {"provider": "openrouter", "api_key": KEY})
        assert result.key_stored
        assert result.auth_source == "env"
        assert result.warnings == [
            "OPENROUTER_API_KEY is set in the server's environment and takes precedence over the stored key"
        ]
        removed = await client.request("providers/configure", {"provider": "openrouter", "apiKey": ""})
        assert not removed.key_stored
        assert removed.key_removed
        assert removed.auth_source == "env"
        again = await client.request("providers/configure", {"provider": "openrouter", "apiKey": ""})
        assert not again.key_removed  # nothing was stored any more
        for bad, why in (
            ({"provider": "nowhere", "apiKey": KEY}, "unknown provider"),
            ({"provider": "mock", "apiKey": KEY}, "mock"),
            ({"provider": "openrouter", "apiKey": "a\nb", "defaultModel": "m"}, "control characters"),
            ({"provider": "openrouter", "apiKey": 12345678}, "apiKey"),
        ):
            with pytest.raises(RpcError) as raised:
                await client.request("providers/configure", bad)
            assert raised.value.code == INVALID_PARAMS and why in raised.value.message, raised.value.message
    stored = json.loads((roder_home / "data" / "credentials.json").read_text())
    assert stored == {"version": 1, "keys": {}}
    assert not (roder_home / "config.toml").exists()  # a refused key left the settings unwritten too
    audit = (roder_home / "data" / "audit.jsonl").read_text()
    assert "provider.key_stored" in audit
    assert "provider.key_removed" in audit
    assert KEY not in audit


async def test_without_persistence_the_key_is_refused(roder_home: Path, workspace: Path) -> None:
    client = LocalAppClient.start(
        StartSettings(cwd=workspace, provider="mock", trust=False, env=dict(os.environ)), persist_config=False
    )
    async with client:
        with pytest.raises(RpcError) as raised:
            await client.request("providers/configure", {"provider": "openrouter", "apiKey": KEY})
    assert raised.value.code == INVALID_PARAMS
    assert "persist" in raised.value.message
    assert not (roder_home / "data" / "credentials.json").exists()


@pytest.mark.e2e
async def test_configure_key_over_stdio_then_turn_and_restart(roder_home: Path, workspace: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    async with FakeModelServer([*echoing_steps(), {"text": "second server"}]) as server:
        point_at(roder_home, "openrouter", server.base_url)
        peer = await PipePeer.start(workspace, env)
        try:
            await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
            configured = await peer.call("providers/configure", {"provider": "openrouter", "api_key": KEY})
            assert configured["keyStored"]
            assert configured["authSource"] == "stored"
            thread = (await peer.call("thread/start", {"modelProvider": "openrouter", "model": "m"}))["thread"]
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "hello"})
            done = await peer.next_notification("turn/completed", threadId=thread["id"])
            assert done["turn"]["status"] == "completed", done["turn"]
            # Finished items are redacted as a whole (live deltas carry only pieces of the reply).
            finished = [m for m in peer.seen if m["method"] in ("item/completed", "turn/completed")]
            assert finished
            assert all(KEY not in json.dumps(m) for m in finished)
            read = await peer.call("thread/read", {"threadId": thread["id"], "includeTurns": True})
            assert KEY not in json.dumps(read)
            assert "[redacted:openrouter key]" in json.dumps(read)
        finally:
            code, stderr = await peer.close()
        assert code == 0 and KEY not in stderr, stderr
        assert server.calls[0].headers["authorization"] == f"Bearer {KEY}"

        # A new server reads the stored key at start-up: listed as configured, used for turns.
        peer = await PipePeer.start(workspace, env)
        try:
            rows = {p["id"]: p for p in (await peer.call("providers/list"))["providers"]}
            assert rows["openrouter"]["authConfigured"]
            assert rows["openrouter"]["authSource"] == "stored"
            thread = (await peer.call("thread/start", {"modelProvider": "openrouter", "model": "m"}))["thread"]
            await peer.call("turn/start", {"threadId": thread["id"], "prompt": "again"})
            done = await peer.next_notification("turn/completed", threadId=thread["id"])
            assert done["turn"]["status"] == "completed", done["turn"]
        finally:
            code, stderr = await peer.close()
        assert code == 0 and KEY not in stderr, stderr
        assert server.calls[1].headers["authorization"] == f"Bearer {KEY}"
    assert_no_leak(roder_home)
