"""Child environments and redaction for batch rollouts: built from an allowlist, redacted by value.

A name-based filter (drop ``*_KEY``, ``*_TOKEN``...) lets ``GITHUB_PAT``, ``SENTRY_DSN`` or
``MY_SERVICE_PASS`` through. So setup commands, score commands and the agent's shell get only the
variables named in ``ALLOWED_NAMES`` (plus ``LC_*``) from the operator's environment, then what
the task itself declares in ``env``, minus secret-looking names there (a task's API key is for the
runtime, not for its scripts).

What the rollout writes (the diff, logs, predictions) is redacted by value: the values of every
secret-named variable and of every variable the allowlist dropped that looks like a credential,
plus the token formats Roder knows (``sk-...``, ``ghp_...``, private key blocks...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from roder_core.brokers.secrets import SecretRedactor, is_secret_name

#: What a build or a test suite needs to find its tools, and nothing that grants access.
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "TMPDIR",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "JAVA_HOME",
        "GOPATH",
        "GOROOT",
        "GOFLAGS",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "NODE_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "SOURCE_DATE_EPOCH",
    }
)
ALLOWED_PREFIXES = ("LC_",)
#: A dropped value this long, without spaces and mixing letters and digits, is treated as a
#: credential and redacted wherever it appears.
_CREDENTIAL_LIKE = re.compile(r"(?=.*[A-Za-z])(?=.*\d)\S{16,}")


def is_allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def child_environment(environ: Mapping[str, str], declared: Mapping[str, str]) -> dict[str, str]:
    """The environment of a rollout's setup, score and agent commands."""
    env = {name: value for name, value in environ.items() if is_allowed(name) and not is_secret_name(name)}
    env.update({name: value for name, value in declared.items() if not is_secret_name(name)})
    return env


def _looks_like_credential(value: str) -> bool:
    if value.startswith(("/", "./", "~")):
        return False  # a path, not a secret
    return _CREDENTIAL_LIKE.fullmatch(value) is not None or ("://" in value and "@" in value)


def value_redactor(
    environ: Mapping[str, str], declared: Mapping[str, str] | None = None, score_only: Mapping[str, str] | None = None
) -> SecretRedactor:
    """Redacts the secret values of the worker's environment (secret-named, or dropped by the
    allowlist and credential-like), the secret-named values of the task's ``env`` and every
    value of its ``score_env`` (the verifier's, whatever its name)."""
    redactor = SecretRedactor()
    for name, value in (score_only or {}).items():
        redactor.add(name, value)
    for name, value in environ.items():
        if is_secret_name(name) or (not is_allowed(name) and _looks_like_credential(value)):
            redactor.add(name, value)
    for name, value in (declared or {}).items():
        if is_secret_name(name):
            redactor.add(name, value)
    return redactor
