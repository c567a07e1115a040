"""The files under ``<data dir>/plugins/`` that record what the user added and installed.

::

    <data dir>/plugins/
      known_marketplaces.json   {name: {source, installLocation, lastUpdated, official?, catalogOnly?}}
      marketplaces/<name>/      the clone or copy of a catalog (a local folder is used in place)
      data/<id>/                per-plugin data that survives updates (CLAUDE_PLUGIN_DATA)
      installed_plugins.json    {"version": 2, "plugins": {"name@mkt": [record]}}
      options.json              non-sensitive userConfig values by plugin id (sensitive ones are
                                in credentials.json, see roder_core.plugins.options)
      accepted_commands.json    command sources the user accepted, by plugin id
    <cache dir>/plugins/
      <mkt>/<plugin>/<version>/ installed copies (CLAUDE_PLUGIN_ROOT)

Installed copies live in the cache dir because the command sandbox hides the data dir (it holds
threads and credentials) while a skill's scripts must be readable by the commands that run them.

The record format is Claude Code's (version 2) with Roder's ``enabled`` flag, the catalog
entry's component keys (a non-strict entry is the plugin's only definition) and its source.
Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.brokers.data_paths import child
from roder_core.settings.paths import RoderPaths


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, ValueError):
        return default


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2, ensure_ascii=False)
        out.write("\n")
    os.replace(tmp, path)


@dataclass(frozen=True)
class PluginDirs:
    """Where plugin state lives in Roder's data dir."""

    root: Path
    #: Where installed copies live (readable inside the command sandbox).
    code: Path

    @classmethod
    def of(cls, paths: RoderPaths) -> PluginDirs:
        return cls(paths.data_dir / "plugins", paths.cache_dir / "plugins")

    @property
    def staging(self) -> Path:
        return self.code / ".staging"

    @property
    def known_file(self) -> Path:
        return self.root / "known_marketplaces.json"

    @property
    def installed_file(self) -> Path:
        return self.root / "installed_plugins.json"

    @property
    def accepted_file(self) -> Path:
        return self.root / "accepted_commands.json"

    def marketplace_dir(self, name: str) -> Path:
        return child(self.root / "marketplaces", name, what="marketplace name")

    def cache_dir(self, marketplace: str, plugin: str, version: str) -> Path:
        """Where one version of a plugin is installed; every part comes from a catalog or a
        manifest, so each is checked as one plain name (``brokers.data_paths``)."""
        return child(self.code, marketplace, plugin, version, what="plugin marketplace, name or version")

    def data_dir(self, identifier: str) -> Path:
        from roder_core.plugins.manifest import data_id

        return child(self.root / "data", data_id(identifier), what="plugin id")


@dataclass
class KnownMarketplace:
    name: str
    source: dict[str, Any]
    install_location: str
    last_updated: str
    official: bool = False
    #: Only a marketplace.json was fetched (a URL): relative plugin sources cannot install.
    catalog_only: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "installLocation": self.install_location, "lastUpdated": self.last_updated}
        if self.official:
            data["official"] = True
        if self.catalog_only:
            data["catalogOnly"] = True
        return data

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> KnownMarketplace:
        return cls(
            name=name,
            source=dict(data.get("source") or {}),
            install_location=str(data.get("installLocation") or ""),
            last_updated=str(data.get("lastUpdated") or ""),
            official=bool(data.get("official", False)),
            catalog_only=bool(data.get("catalogOnly", False)),
        )


@dataclass
class InstallRecord:
    id: str
    install_path: str
    version: str
    installed_at: str
    last_updated: str
    enabled: bool = True
    scope: str = "user"
    git_commit_sha: str | None = None
    source: dict[str, Any] = field(default_factory=dict)
    #: The catalog entry's ``strict`` flag and component keys, as installed.
    entry: dict[str, Any] = field(default_factory=dict)
    #: Ids of the plugins this one depends on (``plugins.dependencies``), installed with it.
    dependencies: list[str] = field(default_factory=list)
    #: Installed only as another plugin's dependency (``uninstall --prune`` removes it when unused).
    auto_installed: bool = False
    #: Install steps that failed without blocking the plugin (its node dependencies), one line each.
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        from roder_core.plugins.manifest import split_id

        return split_id(self.id)[0]

    @property
    def marketplace(self) -> str:
        from roder_core.plugins.manifest import split_id

        return split_id(self.id)[1] or ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scope": self.scope,
            "installPath": self.install_path,
            "version": self.version,
            "installedAt": self.installed_at,
            "lastUpdated": self.last_updated,
            "enabled": self.enabled,
        }
        if self.git_commit_sha:
            data["gitCommitSha"] = self.git_commit_sha
        if self.source:
            data["source"] = self.source
        if self.entry:
            data["entry"] = self.entry
        if self.dependencies:
            data["dependencies"] = self.dependencies
        if self.auto_installed:
            data["autoInstalled"] = True
        if self.notes:
            data["notes"] = self.notes
        return data

    @classmethod
    def from_json(cls, identifier: str, data: dict[str, Any]) -> InstallRecord:
        return cls(
            id=identifier,
            install_path=str(data.get("installPath") or ""),
            version=str(data.get("version") or "unknown"),
            installed_at=str(data.get("installedAt") or ""),
            last_updated=str(data.get("lastUpdated") or ""),
            enabled=bool(data.get("enabled", True)),
            scope=str(data.get("scope") or "user"),
            git_commit_sha=data.get("gitCommitSha"),
            source=dict(data.get("source") or {}),
            entry=dict(data.get("entry") or {}),
            dependencies=[str(d) for d in data.get("dependencies") or [] if isinstance(d, str)],
            auto_installed=bool(data.get("autoInstalled", False)),
            notes=[str(n) for n in data.get("notes") or [] if isinstance(n, str)],
        )


def read_known(dirs: PluginDirs) -> dict[str, KnownMarketplace]:
    data = read_json(dirs.known_file, {})
    if not isinstance(data, dict):
        return {}
    return {name: KnownMarketplace.from_json(name, raw) for name, raw in data.items() if isinstance(raw, dict)}


def write_known(dirs: PluginDirs, known: dict[str, KnownMarketplace]) -> None:
    write_json(dirs.known_file, {name: m.to_json() for name, m in sorted(known.items())})


def read_installed(dirs: PluginDirs) -> dict[str, InstallRecord]:
    """One record per plugin id (Roder installs at user scope; other scopes' records are kept
    in the file by Claude Code, and the first one is read)."""
    data = read_json(dirs.installed_file, {})
    plugins = data.get("plugins") if isinstance(data, dict) else None
    records: dict[str, InstallRecord] = {}
    for identifier, rows in (plugins or {}).items():
        rows = rows if isinstance(rows, list) else [rows]
        for raw in rows:
            if isinstance(raw, dict):
                records[identifier] = InstallRecord.from_json(identifier, raw)
                break
    return records


def write_installed(dirs: PluginDirs, records: dict[str, InstallRecord]) -> None:
    write_json(dirs.installed_file, {"version": 2, "plugins": {k: [r.to_json()] for k, r in sorted(records.items())}})
