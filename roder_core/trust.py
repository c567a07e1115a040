"""Project trust: a folder's own config, hooks and extensions load only once the user trusts it.

Decisions are stored per canonical (symlink-resolved) path in the user data dir, never in the
project itself, so a repository cannot trust itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from roder_core.paths import RoderPaths


class TrustStore:
    def __init__(self, paths: RoderPaths) -> None:
        self._file = paths.trust_file

    def _load(self) -> dict[str, bool]:
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {str(k): bool(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _save(self, data: dict[str, bool]) -> None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self._file)

    @staticmethod
    def canonical(folder: Path) -> str:
        return str(Path(folder).expanduser().resolve())

    def decision(self, folder: Path) -> bool | None:
        """True (trusted), False (explicitly untrusted) or None (never asked)."""
        return self._load().get(self.canonical(folder))

    def is_trusted(self, folder: Path) -> bool:
        """A folder is trusted when it or one of its parents was trusted explicitly."""
        data = self._load()
        path = Path(self.canonical(folder))
        for candidate in (path, *path.parents):
            verdict = data.get(str(candidate))
            if verdict is not None:
                return verdict
        return False

    def set(self, folder: Path, trusted: bool) -> None:
        data = self._load()
        data[self.canonical(folder)] = trusted
        self._save(data)

    def forget(self, folder: Path) -> None:
        data = self._load()
        data.pop(self.canonical(folder), None)
        self._save(data)
