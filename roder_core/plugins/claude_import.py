"""``plugins/preview_import_claude`` and ``plugins/import_claude`` (``roder plugin import-claude``):
the plugins a user already has in Claude Code, in Roder.

Reads (never writes) ``~/.claude/plugins/installed_plugins.json`` (version 1 or 2),
``~/.claude/plugins/known_marketplaces.json`` and ``enabledPlugins`` of ``~/.claude/settings.json``.
``plan`` says what would happen (with a consent token naming exactly that); ``apply`` copies
each enabled plugin's installed folder into Roder's cache (no network: Claude Code already
fetched it), records it enabled, and adds the catalogs Claude Code has cloned, so search and
updates work from Roder too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.plugins.layout import resolve_layout
from roder_core.plugins.manifest import OFFICIAL_MARKETPLACE, RESERVED_MARKETPLACES, load_manifest, split_id
from roder_core.plugins.records import read_json
from roder_core.plugins.store import PluginError, PluginStore


def claude_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    configured = env.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


@dataclass
class ImportItem:
    id: str
    folder: Path
    version: str
    runs_code: list[str] = field(default_factory=list)
    #: Why it will not be imported (missing files, already installed, disabled in Claude Code).
    skip: str = ""


@dataclass
class ImportPlan:
    root: Path
    marketplaces: dict[str, Path] = field(default_factory=dict)
    plugins: list[ImportItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The plan as ``plugins/preview_import_claude`` answers it (camelCase), with its consent."""
        shown: dict[str, Any] = {
            "claudeDir": str(self.root),
            "marketplaces": [{"name": name, "location": str(location)} for name, location in self.marketplaces.items()],
            "plugins": [
                {"id": item.id, "version": item.version, "runsCode": item.runs_code, "skip": item.skip} for item in self.plugins
            ],
            "problems": self.problems,
        }
        return {**shown, "consent": _consent(shown)}

    def consent(self) -> str:
        return str(self.to_json()["consent"])


def _consent(shown: Mapping[str, Any]) -> str:
    """A token naming exactly what a preview showed: importing needs it, so a client imports
    only what it showed (a plan that changed since, such as a plugin that now runs more, needs
    a new look)."""
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:24]


def _records(plugins_dir: Path) -> dict[str, dict[str, Any]]:
    data = read_json(plugins_dir / "installed_plugins.json", {})
    rows = data.get("plugins") if isinstance(data, dict) else None
    found: dict[str, dict[str, Any]] = {}
    for identifier, value in (rows or {}).items():
        records = value if isinstance(value, list) else [value]  # version 1 keeps one object per id
        user = [r for r in records if isinstance(r, dict) and r.get("scope", "user") == "user"]
        chosen = user or [r for r in records if isinstance(r, dict)]
        if chosen:
            found[str(identifier)] = chosen[0]
    return found


def plan(store: PluginStore, root: Path) -> ImportPlan:
    result = ImportPlan(root)
    plugins_dir = root / "plugins"
    settings = read_json(root / "settings.json", {})
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    enabled = enabled if isinstance(enabled, dict) else {}
    known = read_json(plugins_dir / "known_marketplaces.json", {})
    for name, info in (known if isinstance(known, dict) else {}).items():
        location = Path(str(info.get("installLocation") or "")) if isinstance(info, dict) else None
        if location is not None and location.is_dir() and name not in store.known():
            result.marketplaces[str(name)] = location
    installed = store.installed()
    for identifier, record in sorted(_records(plugins_dir).items()):
        folder = Path(str(record.get("installPath") or ""))
        item = ImportItem(identifier, folder, str(record.get("version") or "unknown"))
        result.plugins.append(item)
        if enabled.get(identifier) is False or (identifier not in enabled and enabled):
            item.skip = "not enabled in Claude Code"
        elif identifier in installed:
            item.skip = "already installed in Roder"
        elif not folder.is_dir():
            item.skip = f"its files are missing ({folder})"
        else:
            name = split_id(identifier)[0]
            item.runs_code = resolve_layout(folder, name, load_manifest(folder)).runs_code()
    for identifier, on in enabled.items():
        if on and identifier not in {p.id for p in result.plugins}:
            result.problems.append(f"{identifier} is enabled in Claude Code but has no install record; skipped")
    return result


def apply(store: PluginStore, import_plan: ImportPlan) -> tuple[list[str], list[str]]:
    """Carry out a plan; returns (imported plugin ids, problem lines)."""
    problems = list(import_plan.problems)
    for name, location in import_plan.marketplaces.items():
        try:
            if name == OFFICIAL_MARKETPLACE:
                store.install_default(location)
            elif name not in RESERVED_MARKETPLACES:
                store.add_marketplace(str(location))
        except PluginError as exc:
            problems.append(f"marketplace {name}: {exc}")
    imported = []
    for item in import_plan.plugins:
        if item.skip:
            continue
        try:
            store.import_folder(item.id, item.folder, item.version)
        except (PluginError, OSError) as exc:
            problems.append(f"{item.id}: {exc}")
            continue
        imported.append(item.id)
    return imported, problems
