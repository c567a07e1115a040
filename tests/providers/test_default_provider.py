"""Which provider a run without --provider uses: config, then a key, then a local server, then mock."""

from __future__ import annotations

import socket
from pathlib import Path

from roder_core.kernel.distribution import build_distribution, make_host
from roder_core.providers.selection import choose_default_provider
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.settings.config import RoderConfig
from roder_core.testing.fake_server import ThreadedFakeServer


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(workspace: Path, home: Path, config: str = "", **env: str):
    (home / "config.toml").write_text(config)
    return start_runtime(StartSettings(cwd=workspace, interactive=False, trust=False, env={"RODER_HOME": str(home), **env}))


def no_ollama(port: int | None = None) -> str:
    return f'[providers.ollama]\nbase_url = "http://127.0.0.1:{port or closed_port()}/v1"\n'


def test_config_default_wins(workspace: Path, roder_home: Path) -> None:
    started = start(workspace, roder_home, 'provider = "anthropic"\nmodel = "claude-haiku-4-5"\n', OPENAI_API_KEY="sk-a")
    assert (started.runtime.provider, started.runtime.model) == ("anthropic", "claude-haiku-4-5")
    assert not started.fell_back_to_mock


def test_first_builtin_with_a_key(workspace: Path, roder_home: Path) -> None:
    assert start(workspace, roder_home, no_ollama(), ANTHROPIC_API_KEY="sk-ant-x").runtime.provider == "anthropic"
    both = start(workspace, roder_home, no_ollama(), ANTHROPIC_API_KEY="sk-ant-x", OPENAI_API_KEY="sk-o").runtime
    assert (both.provider, both.model) == ("openai", "gpt-5.4")
    assert start(workspace, roder_home, no_ollama(), OPENROUTER_API_KEY="sk-or-x").runtime.provider == "openrouter"


def test_reachable_local_ollama_when_no_key(workspace: Path, roder_home: Path) -> None:
    with ThreadedFakeServer(models=("qwen2.5-coder:7b", "llama3.2")) as server:
        started = start(workspace, roder_home, no_ollama(server.port))
    assert (started.runtime.provider, started.runtime.model) == ("ollama", "qwen2.5-coder:7b")
    assert not started.fell_back_to_mock


def test_mock_with_hint_when_nothing_is_available(workspace: Path, roder_home: Path) -> None:
    started = start(workspace, roder_home, no_ollama())
    assert started.runtime.provider == "mock"
    assert started.fell_back_to_mock


def test_local_server_is_not_probed_when_a_key_decides(workspace: Path, roder_home: Path) -> None:
    host = make_host(workspace, env={"RODER_HOME": str(roder_home), "OPENAI_API_KEY": "sk-x"}, trust=False)
    engines = build_distribution(host).registry.inference_engines

    def probe(url: str) -> list[str] | None:
        raise AssertionError(f"probed {url}")

    choice = choose_default_provider(engines, RoderConfig(), probe=probe)
    assert choice.provider == "openai"
    assert "OPENAI_API_KEY" in choice.reason


def test_offline_profile_keeps_local_providers_only(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text(no_ollama())
    host = make_host(workspace, env={"RODER_HOME": str(roder_home), "OPENAI_API_KEY": "sk-x"}, trust=False, profile="offline")
    dist = build_distribution(host)
    engines = {e.id() for e in dist.registry.inference_engines}
    assert "ollama" in engines
    assert "openai" not in engines
    assert "anthropic" not in engines
    assert any(s.source == "roder-ext-provider-openai" and "offline" in s.reason for s in dist.skipped)
