"""Stored provider API keys: ``credentials.json`` in the user's data dir, private to the user.

``roder providers login`` and the app server's ``providers/configure`` put keys here so a user
need not export an environment variable; engines read a provider's key from its environment
variable first and from this file second (see ``roder_core.providers.engine``). The file lives
in the user data dir, never in config.toml (which people share and commit) nor in a project
folder. It is written atomically (a private temp file renamed over it, mode 0600) under an
exclusive lock, so two logins at once lose neither key and a crash leaves the old file whole.

Format: ``{"version": 1, "keys": {"openrouter": "sk-or-..."}, "pluginOptions": {"name@mkt": {"KEY":
"value"}}, "oauth": {"codex": {...}}}``: keys by provider id, the sensitive ``userConfig`` values
of installed plugins (``roder_core.plugins.options``) by plugin id, and OAuth sign-ins by login
name (``roder_core.auth.logins``: tokens, expiry, and the endpoints needed to refresh and revoke).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from roder_core.settings.config import ConfigError
from roder_core.settings.paths import RoderPaths

FILE_NAME = "credentials.json"
FORMAT_VERSION = 1
#: Provider ids are config table names; anything else cannot name a provider.
PROVIDER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
MAX_KEY_LENGTH = 4096


class CredentialsError(ConfigError):
    """The credentials file is unreadable, or a key or provider id is not acceptable."""


def credentials_file(env: Mapping[str, str] | None = None) -> Path:
    """Where keys are stored: always the user's data dir, even for runs that keep their own data
    elsewhere (batch rollouts still need the user's keys)."""
    return RoderPaths.from_env(dict(env) if env is not None else None).data_dir / FILE_NAME


def redaction_label(provider: str) -> str:
    """How a stored key shows once redacted: ``[redacted:openrouter key]``."""
    return f"{provider} key"


def check_key(provider: str, key: str) -> str:
    """The key without surrounding whitespace; refuses values that cannot be an API key.

    Messages never quote the key: an error may be shown or logged.
    """
    if not PROVIDER_ID.match(provider):
        raise CredentialsError(f"{provider!r} is not a provider id (letters, digits, '-', '_', '.')")
    value = key.strip()
    if not value:
        raise CredentialsError(f"the key for {provider} is empty")
    if len(value) > MAX_KEY_LENGTH:
        raise CredentialsError(f"the key for {provider} is longer than {MAX_KEY_LENGTH} characters")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise CredentialsError(f"the key for {provider} contains spaces or control characters")
    return value


class CredentialStore:
    """Read and change the stored keys. Every call sees the file as it is now (another process
    may have logged in or refreshed a token): the content last read is kept only while the
    file is the same one, unchanged (its device, inode, size, modification and change times),
    and dropped when this store writes it. A sign-in's token is read for every HTTP request to
    an MCP server; that costs one ``stat``, not a read and a parse. (Roder's writers replace the
    file; only a rewrite in place to the same size within one tick of the file system's clock
    would go unseen.)"""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cached: tuple[tuple[int, ...], dict[str, Any]] | None = None

    @classmethod
    def for_env(cls, env: Mapping[str, str] | None = None) -> CredentialStore:
        return cls(credentials_file(env))

    def _data(self) -> dict[str, Any]:
        """The file's content (a copy the caller may change), read again when the file changed."""
        try:
            stamp = _stamp(os.stat(self.path))
        except FileNotFoundError:
            self._cached = None
            return {}
        except OSError as exc:
            raise CredentialsError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if self._cached is None or self._cached[0] != stamp:
            self._cached = self._read()
        return copy.deepcopy(self._cached[1])

    def _read(self) -> tuple[tuple[int, ...], dict[str, Any]]:
        """The file's content with the stamp of the very file it was read from (the file is
        replaced, never rewritten in place, so the stamp and the content belong together)."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                stamp = _stamp(os.fstat(handle.fileno()))
                text = handle.read()
        except FileNotFoundError:
            return (), {}
        except OSError as exc:
            raise CredentialsError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except ValueError:
            raise CredentialsError(f"{self.path} is not valid JSON; fix it or remove it and log in again") from None
        if not isinstance(data, dict):
            raise CredentialsError(f'{self.path} has no "keys" object of provider -> key strings')
        return stamp, data

    def keys(self) -> dict[str, str]:
        """provider id -> key; empty when nothing is stored."""
        data = self._data()
        if not data:
            return {}
        keys = data.get("keys")
        if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
            raise CredentialsError(f'{self.path} has no "keys" object of provider -> key strings')
        return {str(name): value for name, value in keys.items()}

    def all_plugin_options(self) -> dict[str, dict[str, str]]:
        """plugin id -> its sensitive option values (text)."""
        raw = self._data().get("pluginOptions")
        if not isinstance(raw, dict):
            return {}
        return {
            str(plugin): {str(k): v for k, v in values.items() if isinstance(v, str)}
            for plugin, values in raw.items()
            if isinstance(values, dict)
        }

    def plugin_options(self, plugin: str) -> dict[str, str]:
        return self.all_plugin_options().get(plugin, {})

    def set_plugin_options(self, plugin: str, values: Mapping[str, str]) -> None:
        """Replace ``plugin``'s sensitive option values (an empty mapping forgets them)."""
        with self._locked():
            options = self.all_plugin_options()
            if not values and plugin not in options:
                return
            if values:
                options[plugin] = dict(values)
            else:
                options.pop(plugin, None)
            self._write(self.keys(), options, self.all_oauth())

    def get(self, provider: str) -> str:
        return self.keys().get(provider, "")

    def all_oauth(self) -> dict[str, dict[str, Any]]:
        """login name -> its stored sign-in record (tokens and the endpoints to refresh them)."""
        raw = self._data().get("oauth")
        if not isinstance(raw, dict):
            return {}
        return {str(name): dict(record) for name, record in raw.items() if isinstance(record, dict)}

    def oauth(self, name: str) -> dict[str, Any] | None:
        return self.all_oauth().get(name)

    def set_oauth(self, name: str, record: Mapping[str, Any] | None) -> bool:
        """Store (or, given None, forget) a sign-in; False when there was nothing to forget."""
        with self._locked():
            logins = self.all_oauth()
            if record is None:
                if logins.pop(name, None) is None:
                    return False
            else:
                logins[name] = dict(record)
            self._write(self.keys(), self.all_plugin_options(), logins)
        return True

    @contextlib.contextmanager
    def refresh_lock(self, name: str) -> Iterator[None]:
        """Held while a sign-in is refreshed, so two processes never spend one refresh token
        (servers that rotate them would end the second's grant)."""
        import fcntl

        self._ensure_folder()
        fd = os.open(self.path.with_name(f"{FILE_NAME}.{name}.refresh.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def set(self, provider: str, key: str) -> None:
        value = check_key(provider, key)
        with self._locked():
            keys = self.keys()
            keys[provider] = value
            self._write(keys, self.all_plugin_options(), self.all_oauth())

    def remove(self, provider: str) -> bool:
        """Forget ``provider``'s key; False when none was stored."""
        with self._locked():
            keys = self.keys()
            if keys.pop(provider, None) is None:
                return False
            self._write(keys, self.all_plugin_options(), self.all_oauth())
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock for read-modify-write (a sidecar file: the data file is replaced)."""
        import fcntl

        self._ensure_folder()
        fd = os.open(self.path.with_name(FILE_NAME + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _ensure_folder(self) -> None:
        folder = self.path.parent
        if not folder.is_dir():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _write(self, keys: dict[str, str], plugin_options: dict[str, dict[str, str]], oauth: dict[str, dict[str, Any]]) -> None:
        content: dict[str, Any] = {"version": FORMAT_VERSION, "keys": dict(sorted(keys.items()))}
        if plugin_options:
            content["pluginOptions"] = dict(sorted(plugin_options.items()))
        if oauth:
            content["oauth"] = dict(sorted(oauth.items()))
        data = json.dumps(content, indent=2) + "\n"
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)  # a temp file left by a crash may have other bits
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            self._cached = None
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise CredentialsError(f"cannot write {self.path}: {exc.strerror or exc}") from None


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    """What tells one version of the credentials file from another."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
