"""The provider catalog: built-in providers plus every ``[providers.NAME]`` table of config.toml.

A provider is a named endpoint speaking one wire dialect. Differences between OpenAI-compatible
servers (which role carries the system prompt, the max-tokens field name, how reasoning effort is
sent, whether usage can be requested in the stream) are ``Quirks``: data chosen by dialect, then
by the endpoint's host, then by the built-in, then by the user's table, never branches in the
engines. ``resolve_providers`` is pure: config + environment in, specs out; API key *values* are
read later, by the engine, and never stored in a spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from roder_core.brokers.addresses import is_loopback_url
from roder_core.settings.config import ConfigError, RoderConfig, did_you_mean, nearest

Dialect = Literal["responses", "chat-completions", "anthropic-messages"]
DIALECTS: tuple[str, ...] = ("responses", "chat-completions", "anthropic-messages")
ReasoningFormat = Literal["none", "reasoning_effort", "openrouter"]


@dataclass(frozen=True)
class Quirks:
    """How one endpoint differs from the dialect's reference behaviour (chat-completions mostly)."""

    #: Role that carries the system prompt: OpenAI's reasoning models want "developer".
    system_role: Literal["system", "developer"] = "system"
    #: Name of the output limit field: OpenAI deprecated max_tokens for max_completion_tokens.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    #: How reasoning effort is sent: a top-level reasoning_effort, OpenRouter's reasoning object,
    #: or not at all (servers that reject unknown fields).
    reasoning_format: ReasoningFormat = "none"
    #: Whether to send stream_options.include_usage (usage in the last chunk).
    stream_usage: bool = True
    #: Send a tool-call turn's reasoning back as ``reasoning_content`` (DeepSeek and Kimi in
    #: thinking mode require it; strict servers reject the unknown field).
    reasoning_replay: bool = False
    #: Mark prompt-cache breakpoints (``cache_control``) for Claude models, which cache only
    #: where asked (OpenRouter passes them on to Anthropic).
    cache_control: bool = False


QUIRK_FIELDS = frozenset(Quirks.__dataclass_fields__)

#: Known hosts of OpenAI-compatible APIs and how they differ.
HOST_QUIRKS: dict[str, dict[str, Any]] = {
    "api.openai.com": {
        "system_role": "developer",
        "max_tokens_field": "max_completion_tokens",
        "reasoning_format": "reasoning_effort",
    },
    "openrouter.ai": {"reasoning_format": "openrouter", "cache_control": True},
    "api.groq.com": {"max_tokens_field": "max_completion_tokens", "reasoning_format": "reasoning_effort"},
    "api.deepseek.com": {"reasoning_replay": True},
    "api.moonshot.ai": {"reasoning_replay": True},
    "api.moonshot.cn": {"reasoning_replay": True},
    "generativelanguage.googleapis.com": {"reasoning_format": "reasoning_effort"},
    "api.x.ai": {"reasoning_format": "reasoning_effort"},
}


@dataclass(frozen=True)
class ProviderSpec:
    """Everything needed to build an engine for one provider (never a key value)."""

    name: str
    title: str
    dialect: str
    base_url: str
    api_key_env: str | None = None
    models: tuple[str, ...] = ()
    default_model: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    quirks: Quirks = field(default_factory=Quirks)
    reasoning_effort: str | None = None
    timeout: float = 300.0
    max_retries: int = 4
    builtin: bool = False
    #: A table of the user's own (``[providers.local]``): its ``api_key_env`` is optional, sent
    #: when the variable is set and left out when it is not (local servers often take no key).
    key_optional: bool = False
    sort_order: int = 50
    description: str = ""

    @property
    def host(self) -> str:
        return (urlsplit(self.base_url).hostname or "").lower()

    @property
    def is_loopback(self) -> bool:
        return is_loopback_url(self.base_url)

    def capabilities(self) -> list[str]:
        """Capability ids this provider's extension requests (seed 003: declare every access)."""
        caps = ["network.loopback" if self.is_loopback else f"network.api.{self.host}"]
        if self.api_key_env:
            caps.append(f"secret.read.{self.api_key_env}")
        return caps


@dataclass(frozen=True)
class _Builtin:
    spec: ProviderSpec
    #: Environment variable that overrides the base URL.
    base_url_env: str | None = None


BUILTINS: dict[str, _Builtin] = {
    b.spec.name: b
    for b in (
        _Builtin(
            ProviderSpec(
                name="openai",
                title="OpenAI",
                dialect="responses",
                base_url="https://api.openai.com/v1",
                api_key_env="OPENAI_API_KEY",
                default_model="gpt-5.4",
                builtin=True,
                sort_order=10,
                description="OpenAI Responses API",
            ),
            base_url_env="OPENAI_BASE_URL",
        ),
        _Builtin(
            ProviderSpec(
                name="anthropic",
                title="Anthropic",
                dialect="anthropic-messages",
                base_url="https://api.anthropic.com/v1",
                api_key_env="ANTHROPIC_API_KEY",
                default_model="claude-sonnet-4-6",
                builtin=True,
                sort_order=20,
                description="Anthropic Messages API",
            ),
            base_url_env="ANTHROPIC_BASE_URL",
        ),
        _Builtin(
            ProviderSpec(
                name="openrouter",
                title="OpenRouter",
                dialect="chat-completions",
                base_url="https://openrouter.ai/api/v1",
                api_key_env="OPENROUTER_API_KEY",
                default_model="anthropic/claude-sonnet-4.6",
                builtin=True,
                sort_order=30,
                description="OpenRouter (Chat Completions), hundreds of models behind one key",
            ),
        ),
        _Builtin(
            ProviderSpec(
                name="ollama",
                title="Ollama (local)",
                dialect="chat-completions",
                base_url="http://127.0.0.1:11434/v1",
                builtin=True,
                sort_order=90,
                description="Local models served by Ollama (Chat Completions), no key",
            ),
        ),
    )
}


class ProviderTable(BaseModel):
    """One ``[providers.NAME]`` table; unknown keys are errors so a typo is never ignored."""

    model_config = ConfigDict(extra="forbid")

    dialect: Dialect | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    models: list[str] | None = None
    default_model: str | None = None
    headers: dict[str, str] | None = None
    system_role: Literal["system", "developer"] | None = None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    reasoning_format: ReasoningFormat | None = None
    stream_usage: bool | None = None
    reasoning_replay: bool | None = None
    cache_control: bool | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    timeout: float | None = None
    max_retries: int | None = None
    title: str | None = None


def _table(name: str, raw: Any) -> ProviderTable:
    data = raw.model_dump(exclude_unset=True) if isinstance(raw, BaseModel) else dict(raw)
    try:
        return ProviderTable.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = "unknown key" + did_you_mean(nearest(where, ProviderTable.model_fields))
        raise ConfigError(f"config.toml [providers.{name}] {where}: {message}") from exc


def _check_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"config.toml [providers.{name}] base_url {url!r} is not an http(s) URL")
    return url.rstrip("/")


def _quirks(dialect: str, base_url: str, table: ProviderTable | None) -> Quirks:
    values: dict[str, Any] = {}
    if dialect == "chat-completions":
        values.update(HOST_QUIRKS.get((urlsplit(base_url).hostname or "").lower(), {}))
    if table is not None:
        values.update({k: v for k, v in table.model_dump(include=set(QUIRK_FIELDS)).items() if v is not None})
    return Quirks(**values)


def resolve_providers(config: RoderConfig, env: Mapping[str, str]) -> list[ProviderSpec]:
    """Built-ins (with env and table overrides) then custom tables, in sort order.

    Raises ConfigError naming the table and key when a table is wrong.
    """
    tables = {name: _table(name, raw) for name, raw in config.providers.items()}
    specs: list[ProviderSpec] = []
    for name, builtin in BUILTINS.items():
        table = tables.get(name)
        base = builtin.spec
        base_url = (builtin.base_url_env and env.get(builtin.base_url_env)) or base.base_url
        specs.append(_apply(base, table, base_url))
    for name, table in tables.items():
        if name in BUILTINS:
            continue
        if name == "mock":
            raise ConfigError("config.toml [providers.mock]: 'mock' is the built-in offline model; pick another name")
        if table.dialect is None or table.base_url is None:
            raise ConfigError(
                f"config.toml [providers.{name}] needs dialect (responses, chat-completions or anthropic-messages) and base_url"
            )
        blank = ProviderSpec(
            name=name,
            title=name,
            dialect=table.dialect,
            base_url=table.base_url,
            description=f"{table.dialect} endpoint from config.toml",
            key_optional=True,
        )
        specs.append(_apply(blank, table, table.base_url))
    return sorted(specs, key=lambda s: s.sort_order)


def _apply(base: ProviderSpec, table: ProviderTable | None, base_url: str) -> ProviderSpec:
    dialect = (table.dialect if table and table.dialect else None) or base.dialect
    url = _check_url(base.name, (table.base_url if table and table.base_url else None) or base_url)
    spec = replace(base, dialect=dialect, base_url=url, quirks=_quirks(dialect, url, table))
    if table is None:
        return spec
    updates: dict[str, Any] = {}
    for key in ("api_key_env", "default_model", "reasoning_effort", "timeout", "max_retries", "title"):
        value = getattr(table, key)
        if value is not None:
            updates[key] = value
    if table.models is not None:
        updates["models"] = tuple(table.models)
    if table.headers is not None:
        updates["headers"] = dict(table.headers)
    return replace(spec, **updates)


def _declared_dialect(name: str, raw: Any) -> str:
    """The dialect a table asks for before validation; tables without one are reported with
    chat-completions (config.py's default), so every broken table is reported exactly once."""
    data = raw.model_dump(exclude_unset=True) if isinstance(raw, BaseModel) else dict(raw)
    builtin = BUILTINS.get(name)
    return str(data.get("dialect") or (builtin.spec.dialect if builtin else "chat-completions"))


def providers_for(
    config: RoderConfig, env: Mapping[str, str], dialect: str, broken: dict[str, str] | None = None
) -> list[ProviderSpec]:
    """The providers of one dialect. Each table is validated on its own: a broken one (a
    misspelt key, a wrong value) leaves out that provider alone, named with its error in
    ``broken``, and never another (without ``broken`` the first error is raised)."""
    own = {name: raw for name, raw in config.providers.items() if _declared_dialect(name, raw) == dialect}
    good: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for name, raw in own.items():
        try:
            resolve_providers(config.model_copy(update={"providers": {name: raw}}), env)
        except ConfigError as exc:
            if broken is None:
                raise
            failed[name] = str(exc)
            continue
        good[name] = raw
    if broken is not None:
        broken.update(failed)
    scoped = config.model_copy(update={"providers": good})
    return [spec for spec in resolve_providers(scoped, env) if spec.dialect == dialect and spec.name not in failed]
