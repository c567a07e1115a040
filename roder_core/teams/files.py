"""Teams on disk: one JSON file per team in the data dir, replaced atomically at every change.

A crash (even SIGKILL) leaves either the previous or the new version of a team's file, never a
torn one: the new text goes to a private temporary file, is flushed to disk, then renamed over
the old one. The member threads themselves are ordinary stored threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from roder_core.brokers.data_paths import component
from roder_core.teams.model import Team, TeamError

log = logging.getLogger(__name__)


class TeamFiles:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, team_id: str) -> Path:
        if not team_id.replace("_", "").replace("-", "").isalnum():
            raise TeamError(f"invalid team id {team_id!r}")
        return self.folder / (component(team_id, "team id") + ".json")

    def save(self, team: Team) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = team.model_dump_json(by_alias=True, exclude_none=True, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{team.team_id}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self._path(team.team_id))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def load(self, team_id: str) -> Team:
        path = self._path(team_id)
        try:
            return Team.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TeamError(f"no team {team_id!r}") from None
        except (OSError, ValidationError) as exc:
            raise TeamError(f"team {team_id} cannot be read from {path}: {exc}") from None

    def load_all(self) -> list[Team]:
        """Every readable team, newest first (an unreadable file is skipped with a warning)."""
        teams = []
        for path in self.folder.glob("team_*.json") if self.folder.is_dir() else []:
            try:
                teams.append(Team.model_validate_json(path.read_text(encoding="utf-8")))
            except (OSError, ValidationError) as exc:
                log.warning("skipping unreadable team file %s: %s", path, exc)
        return sorted(teams, key=lambda t: t.created_at, reverse=True)
