"""Where this user's background host lives, and what a one-shot run compares to use it.

Kept apart from the host's server (``roder_core.server.unix``) so that a client looking for a
host imports nothing of the runtime or the dispatcher.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from roder_core.errors import RoderError

log = logging.getLogger(__name__)

SOCKET_NAME = "host.sock"
PID_NAME = "host.json"
LOG_NAME = "host.log"


class HostDirError(RoderError):
    """The host's private directory is missing, foreign or open to other users."""


class HostPaths(NamedTuple):
    """Where this user's host keeps its socket, its record and its log. (A named tuple, not a
    dataclass: a one-shot run looks for its host before anything else imports ``dataclasses``.)"""

    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / SOCKET_NAME

    @property
    def record(self) -> Path:
        return self.directory / PID_NAME

    @property
    def log(self) -> Path:
        return self.directory / LOG_NAME

    @classmethod
    def for_data_dir(cls, data_dir: Path, env: Mapping[str, str] | None = None) -> HostPaths:
        """One host per user and data folder (``RODER_HOME``), in a short path: a socket's path
        must fit 108 bytes. ``$XDG_RUNTIME_DIR`` (private to the user by design) when it is set,
        else the temp folder with the user id in the name."""
        env = os.environ if env is None else env
        digest = hashlib.sha256(str(data_dir.expanduser().resolve()).encode("utf-8")).hexdigest()[:12]
        runtime_dir = env.get("XDG_RUNTIME_DIR", "")
        if runtime_dir and Path(runtime_dir).is_dir():
            return cls(Path(runtime_dir) / f"roder-{digest}")
        import tempfile

        return cls(Path(tempfile.gettempdir()) / f"roder-{os.getuid()}-{digest}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HostPaths:
        from roder_core.settings.paths import RoderPaths

        env = dict(os.environ if env is None else env)
        return cls.for_data_dir(RoderPaths.from_env(env).data_dir, env)

    def ensure_private(self) -> None:
        """Create the directory 0700, or check an existing one is ours and closed to others."""
        with contextlib.suppress(FileExistsError):
            self.directory.mkdir(mode=0o700)
        self.check_private()

    def check_private(self) -> None:
        try:
            info = os.lstat(self.directory)
        except FileNotFoundError:
            raise HostDirError(f"{self.directory} does not exist") from None
        if not stat.S_ISDIR(info.st_mode):
            raise HostDirError(f"{self.directory} is not a directory (a symlink?); remove it and start the host again")
        if info.st_uid != os.getuid():
            raise HostDirError(f"{self.directory} belongs to another user (uid {info.st_uid}); refusing to use it")
        if info.st_mode & 0o077:
            raise HostDirError(
                f"{self.directory} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
                "refusing to use it: `chmod 700` it or remove it"
            )

    def running_socket(self) -> Path | None:
        """The socket of a running host to connect to; None (after one ``stat``) when there is
        none, or when its folder is not private (then nobody should talk to it: said once)."""
        if not self.socket.exists():
            return None
        try:
            self.check_private()
        except HostDirError as exc:
            log.warning("ignoring the host socket: %s", exc)
            return None
        return self.socket

    def read_record(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


#: Config keys that change only how the app looks, never what a run does.
_LOOKS = frozenset({"theme", "keys"})
#: Environment variables that shape a run (providers' keys and endpoints, Roder's own settings):
#: a one-shot run uses a host only when it would see the same ones.
_SHAPING_PARTS = ("_API_KEY", "_BASE_URL", "_TOKEN", "_SECRET")


def environment_digest(env: Mapping[str, str]) -> str:
    """A digest of the variables that change what a run does, so a one-shot run in a shell
    with another key or endpoint does not silently use the host's (which has its own)."""
    shaping = sorted(
        (name, value) for name, value in env.items() if name.startswith("RODER_") or any(p in name for p in _SHAPING_PARTS)
    )
    return hashlib.sha256(json.dumps(shaping).encode("utf-8")).hexdigest()


def config_stamp(config_file: Path, cwd: Path, trusted: bool) -> str:
    """What the config files a run reads say, apart from the app's looks (theme, keys): a host
    started before a change that matters is stale, one started before a theme change is not."""
    import tomllib

    files = [config_file, *([cwd / ".roder" / "config.toml"] if trusted else [])]
    parts = []
    for path in files:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as exc:  # unreadable or broken: a run would say so; never equal
            data = {"unreadable": f"{path}: {exc}"}
        meaningful = {k: v for k, v in data.items() if k not in _LOOKS}
        parts.append(json.dumps(meaningful, sort_keys=True, default=str))
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()
