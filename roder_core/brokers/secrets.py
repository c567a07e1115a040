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
from roder_core.brokers.redaction import StreamRedactor, byte_formats, text_formats

if TYPE_CHECKING:
    from roder_core.settings.config import RoderConfig

#: A variable whose name contains one of these words is treated as a secret.
SECRET_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
#: Secrets whose names do not say so, plus the provider keys Roder itself uses.
KNOWN_SECRET_NAMES = frozenset(
    {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "MISTRAL_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "DATABASE_URL",
        "PGPASS",
        "MYSQL_PWD",
        "AWS_SESSION_TOKEN",
    }
)
#: Values shorter than this are not redacted (too likely to occur by chance).
MIN_SECRET_LENGTH = 8
#: What may cut an encoded secret in output wrapped into lines.
_LINE_BREAK = "(?:\r?\n)?"


def provider_key_names(config: RoderConfig) -> list[str]:
    """Environment variables configured providers read their keys from (secrets by definition)."""
    return [p.api_key_env for p in config.providers.values() if p.api_key_env]


def runtime_redactor(env: Mapping[str, str], config: RoderConfig) -> SecretRedactor:
    """The redactor of a run: secret environment variables plus every stored provider key, OAuth
    sign-in token and sensitive plugin option (those never enter Roder's environment, so only this keeps them out
    of transcripts and logs)."""
    from roder_core.settings.credentials import CredentialsError, CredentialStore, redaction_label

    redactor = SecretRedactor.from_env(env, provider_key_names(config))
    store = CredentialStore.for_env(env)
    try:
        stored = store.keys()
        options = store.all_plugin_options()
        logins = store.all_oauth()
    except CredentialsError:
        stored, options, logins = {}, {}, {}  # unreadable: no engine can use its keys either, and says so
    for provider, key in stored.items():
        redactor.add(redaction_label(provider), key)
    for name, record in logins.items():  # OAuth sign-ins (roder_core.auth.logins)
        for field in ("access_token", "refresh_token"):
            if isinstance(record.get(field), str) and record[field]:
                redactor.add(f"{name} sign-in {field.replace('_', ' ')}", record[field])
    for plugin, values in options.items():  # sensitive plugin options (roder_core.plugins.options)
        for key, value in values.items():
            redactor.add(f"{plugin} option {key}", value)
    return redactor


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    upper = name.upper()
    return upper in KNOWN_SECRET_NAMES or name in set(extra) or any(w in upper for w in SECRET_NAME_WORDS)


def scrubbed_env(
    env: Mapping[str, str],
    known: SecretRedactor,
    passed: Iterable[str] = (),
    extra_secret_names: Iterable[str] = (),
) -> tuple[dict[str, str], list[str]]:
    """The environment for a child process, and the names dropped from it: the one scrub every
    process Roder starts goes through (commands, process extensions, hooks, language servers).

    A variable is dropped when its name says it is a secret, when ``known`` (the run's
    redactor: secret variables, configured providers' keys, the app server's token, stored
    keys) learnt it under that name, or when its value holds a value ``known`` holds, whatever
    the variable is called; ``passed`` names are kept (granted on purpose).
    """
    keep = set(passed)
    extra = {*extra_secret_names, *known.names}
    values = [v for v in known.values(exclude=keep) if len(v) >= MIN_SECRET_LENGTH]
    child: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in env.items():
        holds_secret = any(v in value for v in values)
        if not holds_secret and (name in keep or not is_secret_name(name, extra)):
            child[name] = value
        else:
            dropped.append(name)
    return child, sorted(dropped)


def encoded_forms(value: str) -> list[str]:
    """How a secret's value also shows up in output: base64 (standard and URL-safe, at each of
    the three alignments it can have inside longer data, without the edge characters that depend
    on its neighbours), percent-encoded (a URL, a form body) and hex. A command that prints
    ``base64 .env`` or ``xxd -p`` of a key file shows the key to the model in one of these."""
    import base64
    from urllib.parse import quote

    data = value.encode("utf-8")
    forms: list[str] = []
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + data).decode("ascii")
        start = -(-8 * pad // 6)  # the first character made of the value's bits only
        end = 8 * (pad + len(data)) // 6  # the last one
        middle = encoded[start:end]
        forms += [middle, middle.replace("+", "-").replace("/", "_")]
    forms += [quote(value, safe=""), data.hex(), data.hex().upper()]
    return [form for form in dict.fromkeys(forms) if len(form) >= MIN_SECRET_LENGTH and form != value]


class SecretRedactor:
    """Replaces known secret values with ``[redacted:NAME]`` and known token formats with
    ``[redacted]``. Callable, so it can be passed wherever a ``str -> str`` is expected; its
    streams (``stream``, ``byte_stream``) apply the same rules to text arriving in chunks. A
    value is also replaced in its encoded forms (``encoded_forms``: base64, percent-encoding,
    hex), with the same marker."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._values: list[tuple[str, str]] = []
        self._text_pairs: tuple[tuple[str, str], ...] = ()
        self._wrapped: list[tuple[re.Pattern[str], str, str]] = []
        self._byte_wrapped: list[tuple[re.Pattern[bytes], bytes, bytes]] = []
        self._byte_pairs: tuple[tuple[bytes, bytes], ...] = ()
        for name, value in (secrets or {}).items():
            self.add(name, value)

    @classmethod
    def from_env(cls, env: Mapping[str, str], extra_secret_names: Iterable[str] = ()) -> SecretRedactor:
        extra = set(extra_secret_names)
        return cls({name: value for name, value in env.items() if is_secret_name(name, extra)})

    def add(self, name: str, value: str) -> None:
        """Learn a value; streams already open catch it from their next chunk on."""
        value = value.strip()
        if len(value) < MIN_SECRET_LENGTH or any(v == value for _, v in self._values):
            return
        self._values.append((name, value))
        self._values.sort(key=lambda pair: len(pair[1]), reverse=True)
        pairs: dict[str, str] = {}
        wrapped: dict[str, str] = {}
        for n, v in self._values:
            pairs.setdefault(v, f"[redacted:{n}]")
            for form in encoded_forms(v):
                pairs.setdefault(form, f"[redacted:{n}]")
                wrapped.setdefault(form, n)
        self._text_pairs = tuple(sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True))
        # an encoded form cut by line breaks (``base64`` wraps at 76 columns, ``xxd -p`` at 60)
        self._wrapped = [
            (re.compile(_LINE_BREAK.join(re.escape(c) for c in form)), f"[redacted:{n}]", form)
            for form, n in sorted(wrapped.items(), key=lambda pair: len(pair[0]), reverse=True)
        ]
        self._byte_wrapped = [
            (re.compile(pattern.pattern.encode()), replacement.encode(), form.encode())
            for pattern, replacement, form in self._wrapped
        ]
        self._byte_pairs = tuple((v.encode(), r.encode()) for v, r in self._text_pairs)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._values]

    def values(self, exclude: Iterable[str] = ()) -> list[str]:
        """The secret values themselves, but those learnt under the names in ``exclude`` (for
        scrubbing environments by value while keeping secrets passed on purpose)."""
        skip = set(exclude)
        return [value for name, value in self._values if name not in skip]

    def stream(self) -> StreamRedactor[str]:
        """A redactor for text cut into arbitrary chunks (model deltas, live tool output)."""
        return StreamRedactor(lambda: self._text_pairs, text_formats(), lambda: self._wrapped)

    def byte_stream(self) -> StreamRedactor[bytes]:
        """A redactor for bytes cut into arbitrary chunks (a command's raw output)."""
        return StreamRedactor(lambda: self._byte_pairs, byte_formats(), lambda: self._byte_wrapped)

    def releasable(self, text: str) -> str:
        """The part of a text still growing that can be shown now, redacted: its end is left out
        while it could be the beginning of a secret (a snapshot of a streaming message)."""
        return self.stream().feed(text)

    def redact(self, text: str) -> str:
        if not text or len(text) < MIN_SECRET_LENGTH:
            return text
        for value, replacement in self._text_pairs:
            if value in text:
                text = text.replace(value, replacement)
        if "\n" in text:
            for pattern, replacement, _form in self._wrapped:
                text = pattern.sub(replacement, text)
        return text_formats().sub(text)

    __call__ = redact


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
