"""Project trust: a folder's own config, hooks and extensions load only once the user trusts it.

Decisions are stored per canonical (symlink-resolved) path in the user data dir, never in the
project itself, so a repository cannot trust itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from roder_core.settings.paths import RoderPaths

#: What a folder may bring that only loads once it is trusted (shown in the trust prompt).
PROJECT_ITEMS: tuple[str, ...] = (
    ".roder/config.toml",
    ".roder/extensions",
    ".roder/skills",
    ".roder/commands",
    ".roder/agents",
    ".roder/workflows",
    ".mcp.json",
    ".agents/skills",
    ".claude/skills",
    ".claude/commands",
    ".claude/agents",
)


def project_items(folder: Path) -> list[str]:
    """The project-supplied items present in ``folder`` (relative paths, in PROJECT_ITEMS order)."""
    root = Path(folder)
    return [item for item in PROJECT_ITEMS if (root / item).exists()]


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
        """A folder is trusted when it or one of its parents was trusted explicitly (the nearest
        decision wins, so an untrusted subfolder of a trusted tree stays untrusted)."""
        found = self.effective_decision(folder)
        return found is not None and found[0]

    def effective_decision(self, folder: Path) -> tuple[bool, str] | None:
        """The decision that applies to ``folder`` (its own or a parent's) and the path it was
        recorded for; None when the user was never asked about it or any parent."""
        data = self._load()
        path = Path(self.canonical(folder))
        for candidate in (path, *path.parents):
            verdict = data.get(str(candidate))
            if verdict is not None:
                return verdict, str(candidate)
        return None

    def needs_prompt(self, folder: Path) -> bool:
        """True when a client should ask "trust this folder?": it has project items and no
        decision covers it yet. Headless clients never ask; they run untrusted unless --trust."""
        return self.effective_decision(folder) is None and bool(project_items(folder))

    def trusted_folders(self) -> dict[str, bool]:
        return dict(sorted(self._load().items()))

    def set(self, folder: Path, trusted: bool) -> None:
        data = self._load()
        data[self.canonical(folder)] = trusted
        self._save(data)

    def forget(self, folder: Path) -> None:
        data = self._load()
        data.pop(self.canonical(folder), None)
        self._save(data)
