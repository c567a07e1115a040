"""Provider catalog (built-ins, env overrides, [providers.NAME]), quirks and the model table."""

from __future__ import annotations

import pytest

from roder_core.providers.catalog import providers_for, resolve_providers
from roder_core.providers.model_table import builtin_profile, table_row
from roder_core.settings.config import ConfigError, RoderConfig
from tests.providers.helpers import make_engine


def specs(data: dict | None = None, env: dict | None = None) -> dict:
    return {s.name: s for s in resolve_providers(RoderConfig.model_validate(data or {}), env or {})}


def test_builtins_and_their_environment() -> None:
    found = specs(env={"OPENAI_BASE_URL": "http://127.0.0.1:9999/v1/", "ANTHROPIC_BASE_URL": "https://proxy.example/v1"})
    assert list(found) == ["openai", "anthropic", "openrouter", "ollama"]
    assert (found["openai"].dialect, found["openai"].api_key_env) == ("responses", "OPENAI_API_KEY")
    assert found["openai"].base_url == "http://127.0.0.1:9999/v1"
    assert found["anthropic"].base_url == "https://proxy.example/v1"
    assert found["openrouter"].api_key_env == "OPENROUTER_API_KEY"
    assert found["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert found["ollama"].api_key_env is None
    assert found["ollama"].capabilities() == ["network.loopback"]
    assert found["openai"].capabilities() == ["network.loopback", "secret.read.OPENAI_API_KEY"]
    assert specs()["anthropic"].capabilities() == ["network.api.api.anthropic.com", "secret.read.ANTHROPIC_API_KEY"]


def test_custom_table_as_documented_in_the_issue() -> None:
    found = specs(
        {
            "providers": {
                "local": {
                    "dialect": "chat-completions",
                    "base_url": "http://127.0.0.1:8080/v1",
                    "api_key_env": "LOCAL_API_KEY",
                    "models": ["my-model"],
                }
            }
        }
    )
    local = found["local"]
    assert (local.dialect, local.base_url, local.api_key_env, local.models) == (
        "chat-completions",
        "http://127.0.0.1:8080/v1",
        "LOCAL_API_KEY",
        ("my-model",),
    )
    assert local.quirks.system_role == "system"
    assert local.quirks.max_tokens_field == "max_tokens"


def test_quirks_come_from_the_host_and_the_table_wins() -> None:
    found = specs(
        {
            "providers": {
                "oai": {"dialect": "chat-completions", "base_url": "https://api.openai.com/v1"},
                "groq": {"dialect": "chat-completions", "base_url": "https://api.groq.com/openai/v1"},
                "odd": {
                    "dialect": "chat-completions",
                    "base_url": "https://api.openai.com/v1",
                    "system_role": "system",
                    "stream_usage": False,
                },
            }
        }
    )
    assert found["oai"].quirks.system_role == "developer"
    assert found["oai"].quirks.max_tokens_field == "max_completion_tokens"
    assert found["oai"].quirks.reasoning_format == "reasoning_effort"
    assert found["groq"].quirks.max_tokens_field == "max_completion_tokens"
    assert found["odd"].quirks.system_role == "system"
    assert found["odd"].quirks.stream_usage is False
    assert specs()["openrouter"].quirks.reasoning_format == "openrouter"


def test_builtin_can_be_redirected_by_its_table() -> None:
    found = specs({"providers": {"ollama": {"base_url": "http://127.0.0.1:5555/v1", "default_model": "qwen3"}}})
    assert found["ollama"].base_url == "http://127.0.0.1:5555/v1"
    assert found["ollama"].default_model == "qwen3"
    assert found["ollama"].dialect == "chat-completions"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"dialect": "chat-completions", "base_url": "http://x/v1", "max_tokns_field": "x"}, "max_tokns_field: unknown key"),
        ({"dialect": "chat-completions"}, "needs dialect"),
        ({"dialect": "chat-completions", "base_url": "ftp://x"}, r"not an http\(s\) URL"),
        ({"dialect": "responses", "base_url": "http://x/v1", "reasoning_effort": "huge"}, "reasoning_effort"),
    ],
)
def test_bad_tables_are_clear_errors(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        specs({"providers": {"broken": table}})


def test_a_broken_table_only_takes_down_its_own_dialect() -> None:
    config = RoderConfig.model_validate(
        {
            "providers": {
                "broken": {"dialect": "anthropic-messages", "base_url": "http://x/v1", "max_tokns": 3},
                "fine": {"dialect": "chat-completions", "base_url": "http://127.0.0.1:8080/v1"},
            }
        }
    )
    assert [s.name for s in providers_for(config, {}, "chat-completions")] == ["openrouter", "fine", "ollama"]
    assert [s.name for s in providers_for(config, {}, "responses")] == ["openai"]
    with pytest.raises(ConfigError, match=r"\[providers.broken\] max_tokns: unknown key"):
        providers_for(config, {}, "anthropic-messages")


def test_a_typo_in_one_provider_table_disables_that_provider_alone() -> None:
    config = RoderConfig.model_validate(
        {
            "providers": {
                "typo": {"dialect": "chat-completions", "base_url": "http://127.0.0.1:9/v1", "api_key_evn": "X"},
                "fine": {"dialect": "chat-completions", "base_url": "http://127.0.0.1:8080/v1"},
                "openrouter": {"default_modle": "x"},
            }
        }
    )
    broken: dict[str, str] = {}
    names = [s.name for s in providers_for(config, {}, "chat-completions", broken)]
    assert names == ["fine", "ollama"]
    assert set(broken) == {"typo", "openrouter"}
    assert "api_key_evn: unknown key; did you mean 'api_key_env'?" in broken["typo"]
    assert "did you mean 'default_model'?" in broken["openrouter"]


def test_model_table_matches_snapshots_vendor_prefixes_and_tags() -> None:
    assert table_row("claude-haiku-4-5-20251001") == "claude-haiku-4-5"
    assert table_row("anthropic/claude-sonnet-4.6") == "claude-sonnet-4-6"
    assert table_row("gpt-5.4-mini-2026-03-17") == "gpt-5.4-mini"
    assert table_row("gpt-5") == "gpt-5"
    assert table_row("gpt-5-mini") == "gpt-5-mini"
    assert table_row("qwen2.5-coder:32b") == "qwen2.5-coder"
    assert table_row("gpt-50") is None
    assert table_row("my-model") is None
    opus = builtin_profile("anthropic", "claude-opus-4-7")
    assert opus is not None
    assert opus.reasoning
    assert opus.images
    assert opus.cache_write_price == 6.25


def test_model_overrides_apply_and_are_validated() -> None:
    engine = make_engine(
        "chat-completions",
        "http://127.0.0.1:1/v1",
        models={"fake/my-model": {"context_window": 32_000, "input_price": 0.5}, "other": {"max_output_tokens": 1000}},
    )
    profile = engine.model_profile("my-model")
    assert (profile.context_window, profile.input_price, profile.provider) == (32_000, 0.5, "fake")
    assert engine.knows("my-model")
    assert not engine.knows("unknown-model")
    assert engine.model_profile("other").max_output_tokens == 1000
    bad = make_engine("chat-completions", "http://127.0.0.1:1/v1", models={"fake/m": {"context_windw": 1}})
    with pytest.raises(ConfigError, match="unknown key 'context_windw'"):
        bad.model_profile("m")
