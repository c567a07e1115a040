"""Where Roder keeps its files.

``RODER_HOME`` overrides every location (tests always set it): config in ``$RODER_HOME``, data in
``$RODER_HOME/data``, cache in ``$RODER_HOME/cache``. Otherwise the platformdirs locations.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

#: Less free room than this where Roder keeps its files is a full disk: a thread's first lines,
#: the thread index and the caches need about that much before the first answer.
MIN_FREE_BYTES = 64 * 1024


def _full(folder: Path) -> str | None:
    """Why ``folder``'s file system has no room for Roder's files, or None."""
    try:
        room = os.statvfs(folder)
    except OSError:
        return None  # nothing known: writing will say
    if room.f_bavail * room.f_frsize < MIN_FREE_BYTES:
        return f"no space left on its device ({room.f_bavail * room.f_frsize // 1024} KiB free)"
    if room.f_files and not room.f_favail:  # (some file systems report no inode counts at all)
        return "no file can be created on its device (no free inodes)"
    return None


class RoderPaths(NamedTuple):
    """The three folders (immutable; ``_replace`` gives a copy with one changed). A named tuple,
    not a dataclass: commands that need no runtime (``sessions list``) import this module, and
    ``dataclasses`` with the ``inspect`` it pulls was a tenth of their start-up."""

    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def threads_dir(self) -> Path:
        return self.data_dir / "threads"

    @property
    def media_dir(self) -> Path:
        """Images and other media of threads: ``media/<thread id>/<sha256>.<ext>``."""
        return self.data_dir / "media"

    @property
    def trust_file(self) -> Path:
        return self.data_dir / "trusted-folders.json"

    @property
    def audit_file(self) -> Path:
        return self.data_dir / "audit.jsonl"

    @property
    def themes_dir(self) -> Path:
        return self.config_dir / "themes"

    @property
    def spill_dir(self) -> Path:
        """Command output too long for a result, one folder per thread (``own_folders``)."""
        return self.cache_dir / "tool-output"

    @property
    def task_logs_dir(self) -> Path:
        """Background tasks' output, one folder per thread (``own_folders``)."""
        return self.cache_dir / "tasks"

    def unusable_reason(self) -> str | None:
        """Why Roder cannot keep its files in these folders (one line), or None when it can.

        Each folder is created if missing and must be writable. Checked once when a command
        starts, so a read-only home or a ``RODER_HOME`` that names a file fails before a model is
        called, instead of losing the thread (or printing a traceback) once the turn is written."""
        origin = " (RODER_HOME)" if os.environ.get("RODER_HOME") else ""
        for label, folder in (("config", self.config_dir), ("data", self.data_dir), ("cache", self.cache_dir)):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                return f"cannot keep Roder's {label} files in {folder}{origin}: it is a file, not a folder"
            except OSError as exc:
                return f"cannot keep Roder's {label} files in {folder}{origin}: {exc.strerror or exc}"
            if not os.access(folder, os.W_OK | os.X_OK):
                return f"cannot keep Roder's {label} files in {folder}{origin}: the folder is not writable"
            if (full := _full(folder)) is not None:
                return f"cannot keep Roder's {label} files in {folder}{origin}: {full}"
        return None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RoderPaths:
        env = dict(os.environ) if env is None else env
        home = env.get("RODER_HOME")
        if home:
            root = Path(home).expanduser().resolve()
            return cls(config_dir=root, data_dir=root / "data", cache_dir=root / "cache")
        import platformdirs  # imported lazily: only needed without RODER_HOME

        return cls(
            config_dir=Path(platformdirs.user_config_dir("roder")),
            data_dir=Path(platformdirs.user_data_dir("roder")),
            cache_dir=Path(platformdirs.user_cache_dir("roder")),
        )


def create_private(path: Path) -> None:
    """Create ``path`` (and its folder) readable by the user only, if it does not exist yet.

    Threads, memories and indexes hold prompts and code; SQLite gives its journal files the
    permissions of the database file, so creating that file first keeps them private too.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
