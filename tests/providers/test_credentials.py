"""The credentials store and how keys are resolved: environment variable first, stored key
second, in the one place every engine resolves keys; stored keys count as configured for
listing and default selection, and join the redactor of a run."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from roder_core.brokers.secrets import runtime_redactor
from roder_core.errors import InferenceError
from roder_core.kernel.distribution import build_distribution, make_host
from roder_core.providers.selection import choose_default_provider
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.settings.config import RoderConfig
from roder_core.settings.credentials import CredentialsError, CredentialStore
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import KEY_ENV, collect, make_engine, make_request

KEY = "rk-stored-DONOTLEAK-0a1b2c3d4e5f6789"


def store() -> CredentialStore:
    return CredentialStore.for_env()


def test_store_is_private_atomic_and_keyed_by_provider(roder_home: Path) -> None:
    credentials = store()
    assert credentials.path == roder_home / "data" / "credentials.json"
    assert credentials.keys() == {}
    credentials.set("openrouter", f"  {KEY}\n")  # pasted with whitespace around it
    credentials.set("anthropic", "other-key-123456")
    assert credentials.keys() == {"anthropic": "other-key-123456", "openrouter": KEY}
    assert stat.S_IMODE(credentials.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(credentials.path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in credentials.path.parent.iterdir()) == ["credentials.json", "credentials.json.lock"]
    assert credentials.remove("openrouter")
    assert not credentials.remove("openrouter")
    assert credentials.keys() == {"anthropic": "other-key-123456"}


def test_bad_keys_are_refused_without_quoting_them(roder_home: Path) -> None:
    for bad in ("", "   ", "two words here", "line\nbreak", "x" * 5000):
        with pytest.raises(CredentialsError) as raised:
            store().set("openrouter", bad)
        assert bad.strip() == "" or bad not in str(raised.value)
    with pytest.raises(CredentialsError, match="not a provider id"):
        store().set("../evil", KEY)
    assert not store().path.exists()


def test_a_corrupt_file_is_reported_and_never_overwritten(roder_home: Path) -> None:
    credentials = store()
    credentials.path.parent.mkdir(parents=True)
    credentials.path.write_text('{"keys": {"openrouter": "half')
    with pytest.raises(CredentialsError, match="not valid JSON"):
        credentials.keys()
    with pytest.raises(CredentialsError):
        credentials.set("anthropic", KEY)
    assert credentials.path.read_text() == '{"keys": {"openrouter": "half'


def test_every_change_of_the_file_is_seen_and_what_is_returned_is_a_copy(roder_home: Path) -> None:
    """The parsed file is kept between calls, never past a change: this store's own writes,
    another store's (another process) replacing it, and a hand edit in place."""
    mine, theirs = store(), store()
    mine.set("a", "key-one")
    assert mine.get("a") == "key-one"
    theirs.set("a", "key-two")
    assert mine.get("a") == "key-two"
    mine.set_oauth("login", {"access_token": "at-1", "scopes": ["x"]})
    mine.oauth("login")["scopes"].append("changed by a caller")  # type: ignore[index]
    assert mine.oauth("login") == {"access_token": "at-1", "scopes": ["x"]}
    text = mine.path.read_text()
    with open(mine.path, "r+", encoding="utf-8") as handle:  # an editor writing in place
        handle.write(text.replace("key-two", "key-three"))
    assert mine.get("a") == "key-three"
    mine.path.unlink()
    assert mine.keys() == {}


def test_concurrent_logins_lose_no_key(roder_home: Path) -> None:
    threads = [threading.Thread(target=store().set, args=(f"p{i}", f"key-number-{i:04d}")) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store().keys() == {f"p{i}": f"key-number-{i:04d}" for i in range(12)}


def test_environment_first_then_store_then_nothing(roder_home: Path) -> None:
    store().set("fake", KEY)
    with_env = make_engine("chat-completions", "http://127.0.0.1:9/v1", api_key="env-key-0123456789", credentials=store())
    assert (with_env.key.reveal(), with_env.metadata().auth_source) == ("env-key-0123456789", "env")
    stored = make_engine("chat-completions", "http://127.0.0.1:9/v1", api_key_env=KEY_ENV, credentials=store())
    meta = stored.metadata()
    assert (stored.key.reveal(), meta.auth_source, meta.auth_configured) == (KEY, "stored", True)
    assert KEY not in repr(stored.key)
    assert KEY not in repr(meta)
    store().remove("fake")
    stored.reload_key()
    # A table of the user's own: its api_key_env is optional, so no key means "send none".
    assert not stored.key
    assert stored.metadata().auth_type == "none"
    assert stored.metadata().auth_configured is True


@pytest.mark.parametrize("dialect", ["chat-completions", "anthropic-messages", "responses"])
async def test_stored_key_reaches_the_wire_and_is_scrubbed_from_errors(roder_home: Path, dialect: str) -> None:
    store().set("fake", KEY)
    steps = [{"text": "hi"}, {"status": 401, "error": {"message": f"bad key {KEY}"}}]
    async with FakeModelServer(steps) as server:
        engine = make_engine(dialect, server.base_url, api_key_env=KEY_ENV, credentials=store())
        await collect(engine, make_request())
        header = "x-api-key" if dialect == "anthropic-messages" else "authorization"
        assert server.calls[0].headers[header].endswith(KEY)
        with pytest.raises(InferenceError) as raised:
            await collect(engine, make_request())
        await engine.aclose()
    assert raised.value.kind == "auth"
    assert KEY not in str(raised.value)
    assert "roder providers login fake" in str(raised.value)


def test_stored_key_counts_for_listing_and_default_selection(roder_home: Path, workspace: Path) -> None:
    started = start_runtime(StartSettings(cwd=workspace, trust=False, interactive=False, env=dict(os.environ)))
    assert started.runtime.provider == "mock"
    store().set("anthropic", KEY)
    host = make_host(workspace, trust=False, interactive=False)
    engines = build_distribution(host).registry.inference_engines
    choice = choose_default_provider(engines, RoderConfig(), probe=lambda url: None)
    assert choice.provider == "anthropic"
    assert "stored" in choice.reason
    started = start_runtime(StartSettings(cwd=workspace, trust=False, interactive=False, env=dict(os.environ)))
    assert started.runtime.provider == "anthropic"
    assert not started.fell_back_to_mock


async def test_stored_keys_join_the_redactor_and_never_reach_child_processes(roder_home: Path, workspace: Path) -> None:
    store().set("openrouter", KEY)
    assert runtime_redactor(dict(os.environ), RoderConfig())(f"x {KEY} y") == "x [redacted:openrouter key] y"
    (workspace / "leak.txt").write_text(f"token={KEY}\n")
    started = start_runtime(StartSettings(cwd=workspace, provider="mock", trust=False, interactive=False, env=dict(os.environ)))
    runtime = started.runtime
    try:
        process = runtime.brokers_for(workspace, "test", frozenset({"process.spawn.shell", "fs.read.workspace"})).process
        result = await process.run("env; cat leak.txt", timeout=30)
    finally:
        await runtime.close()
    assert result.exit_code == 0
    assert "token=[redacted:openrouter key]" in result.output
    assert KEY not in result.output


async def test_a_table_without_a_key_variable_uses_its_stored_key(roder_home: Path) -> None:
    async with FakeModelServer([{"text": "hi"}, {"text": "hi"}]) as server:
        keyless = make_engine("chat-completions", server.base_url, credentials=store())
        assert keyless.metadata().auth_type == "none"
        await collect(keyless, make_request())
        assert "authorization" not in server.calls[0].headers
        store().set("fake", KEY)
        keyless.reload_key()
        meta = keyless.metadata()
        assert (meta.auth_type, meta.auth_configured, meta.auth_source) == ("api_key", True, "stored")
        await collect(keyless, make_request())
        await keyless.aclose()
    assert server.calls[1].headers["authorization"] == f"Bearer {KEY}"
