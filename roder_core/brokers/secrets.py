"""Secrets: which environment variables are secret, scrubbing them from child processes and
redacting their values (and well-known token formats) from anything stored or shown.

A secret reaches a child process or a tool only when granted by name: a ``secret.read.NAME``
capability of the calling extension, or ``[secrets] pass_env = ["NAME"]`` in config.toml.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from roder_core.brokers import BrokerDenied

if TYPE_CHECKING:
    from roder_core.config import RoderConfig

#: A variable whose name contains one of these words is treated as a secret.
SECRET_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
#: Secrets whose names do not say so, plus the provider keys Roder itself uses.
KNOWN_SECRET_NAMES = frozenset({
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DATABASE_URL", "PGPASS", "MYSQL_PWD", "AWS_SESSION_TOKEN",
})
#: Values shorter than this are not redacted (too likely to occur by chance).
MIN_SECRET_LENGTH = 8

#: Token formats recognised even when Roder does not know the value (files, command output).
TOKEN_PATTERNS = re.compile(
    "|".join(
        (
            r"sk-ant-[A-Za-z0-9_\-]{20,}",
            r"sk-(?:proj-|or-v1-)?[A-Za-z0-9_\-]{32,}",
            r"gh[pousr]_[A-Za-z0-9]{36,}",
            r"github_pat_[A-Za-z0-9_]{40,}",
            r"AKIA[0-9A-Z]{16}",
            r"xox[abprs]-[A-Za-z0-9\-]{10,}",
            r"AIza[0-9A-Za-z_\-]{35}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        )
    )
)


def provider_key_names(config: RoderConfig) -> list[str]:
    """Environment variables configured providers read their keys from (secrets by definition)."""
    return [p.api_key_env for p in config.providers.values() if p.api_key_env]


def runtime_redactor(env: Mapping[str, str], config: RoderConfig) -> SecretRedactor:
    """The redactor of a run: secret environment variables plus every stored provider key
    (those never enter an environment, so only this keeps them out of transcripts and logs)."""
    from roder_core.credentials import CredentialsError, CredentialStore, redaction_label

    redactor = SecretRedactor.from_env(env, provider_key_names(config))
    try:
        stored = CredentialStore.for_env(env).keys()
    except CredentialsError:
        stored = {}  # unreadable: no engine can use its keys either, and says so
    for provider, key in stored.items():
        redactor.add(redaction_label(provider), key)
    return redactor


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    upper = name.upper()
    return upper in KNOWN_SECRET_NAMES or name in set(extra) or any(w in upper for w in SECRET_NAME_WORDS)


def scrubbed_env(
    env: Mapping[str, str], passed: Iterable[str] = (), extra_secret_names: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """The environment for a child process, and the names dropped from it."""
    keep = set(passed)
    extra = set(extra_secret_names)
    child: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in env.items():
        if name in keep or not is_secret_name(name, extra):
            child[name] = value
        else:
            dropped.append(name)
    return child, sorted(dropped)


class SecretRedactor:
    """Replaces known secret values with ``[redacted:NAME]`` and known token formats with
    ``[redacted]``. Callable, so it can be passed wherever a ``str -> str`` is expected."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._values: list[tuple[str, str]] = []
        for name, value in (secrets or {}).items():
            self.add(name, value)

    @classmethod
    def from_env(cls, env: Mapping[str, str], extra_secret_names: Iterable[str] = ()) -> SecretRedactor:
        extra = set(extra_secret_names)
        return cls({name: value for name, value in env.items() if is_secret_name(name, extra)})

    def add(self, name: str, value: str) -> None:
        value = value.strip()
        if len(value) < MIN_SECRET_LENGTH or any(v == value for _, v in self._values):
            return
        self._values.append((name, value))
        self._values.sort(key=lambda pair: len(pair[1]), reverse=True)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._values]

    def stream(self) -> StreamRedactor:
        """A redactor for a byte stream cut into arbitrary chunks (command output)."""
        return StreamRedactor([(v.encode(), f"[redacted:{n}]".encode()) for n, v in self._values])

    def redact(self, text: str) -> str:
        if not text or len(text) < MIN_SECRET_LENGTH:
            return text
        for name, value in self._values:
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return TOKEN_PATTERNS.sub("[redacted]", text)

    __call__ = redact


class StreamRedactor:
    """Redacts known values from chunks of bytes, holding back just enough of each chunk's end
    that a value split across two chunks is still caught."""

    def __init__(self, pairs: list[tuple[bytes, bytes]]) -> None:
        self._pairs = pairs
        self._keep = max((len(value) for value, _ in pairs), default=1) - 1
        self._carry = b""

    def feed(self, data: bytes) -> bytes:
        if not self._pairs:
            return data
        buffer = self._carry + data
        for value, replacement in self._pairs:
            buffer = buffer.replace(value, replacement)
        if len(buffer) <= self._keep:
            self._carry = buffer
            return b""
        cut = len(buffer) - self._keep
        self._carry = buffer[cut:]
        return buffer[:cut]

    def flush(self) -> bytes:
        out, self._carry = self._carry, b""
        return out


def redact_data(data: Any, redact: Callable[[str], str]) -> tuple[Any, bool]:
    """Redact every string inside JSON-like data; returns (new data, whether anything changed)."""
    if isinstance(data, str):
        clean = redact(data)
        return clean, clean != data
    if isinstance(data, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, value in data.items():
            out[key], hit = redact_data(value, redact)
            changed = changed or hit
        return (out, True) if changed else (data, False)
    if isinstance(data, list):
        items = [redact_data(value, redact) for value in data]
        if any(hit for _, hit in items):
            return [value for value, _ in items], True
        return data, False
    return data, False


class EnvSecretBroker:
    """``SecretBroker``: redaction plus named access to granted secrets."""

    def __init__(self, redactor: SecretRedactor, env: Mapping[str, str], capabilities: frozenset[str]) -> None:
        self._redactor = redactor
        self._env = env
        self._granted = {c.removeprefix("secret.read.") for c in capabilities if c.startswith("secret.read.")}

    def redact(self, text: str) -> str:
        return self._redactor.redact(text)

    def get(self, name: str) -> str:
        if name not in self._granted:
            raise BrokerDenied(f"secret {name!r} was not granted (capability secret.read.{name})")
        try:
            return self._env[name]
        except KeyError:
            raise BrokerDenied(f"secret {name!r} is not set in the environment") from None
