"""Roder's home folders and config.toml as the app reads them before the runtime starts (the
first frame must not wait for the runtime's import), and the checked-out git branch for the
status bar."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any


def roder_home_paths() -> tuple[Path, Path, Path]:
    """(config dir, data dir, themes dir) without importing the runtime (first-frame speed)."""
    home = os.environ.get("RODER_HOME")
    if home:
        root = Path(home).expanduser()
        return root, root / "data", root / "themes"
    from roder_core.settings.paths import RoderPaths

    paths = RoderPaths.from_env()
    return paths.config_dir, paths.data_dir, paths.themes_dir


def configured(config_dir: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((config_dir / "config.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}  # the runtime reports a broken config with a precise message when it starts


def git_branch(cwd: Path) -> str | None:
    """The checked-out branch, read from .git/HEAD (no subprocess)."""
    for folder in (cwd, *cwd.parents):
        head = folder / ".git" / "HEAD"
        if head.is_file():
            from roder_core.brokers.project_reader import ProjectReader

            try:  # through the project reader: a HEAD linked out of the repository is not read
                ref = ProjectReader(folder).read_text(head, max_bytes=4096, errors="replace").strip()
            except OSError:
                return None
            return ref.removeprefix("ref: refs/heads/") if ref.startswith("ref: ") else ref[:8]
    return None
