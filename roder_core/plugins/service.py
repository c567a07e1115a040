"""The plugin operations as the app server, the CLI and the TUI present them (JSON shapes of
``roder_core.server.protocol_plugins``, camelCase). Blocking: callers use a worker thread."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roder_core.brokers.project_reader import ProjectReader
from roder_core.plugins import claude_import
from roder_core.plugins.enabled import active_plugins, installed_layout, project_plugins
from roder_core.plugins.fetch import FetchSettings
from roder_core.plugins.manifest import split_id
from roder_core.plugins.records import InstallRecord, KnownMarketplace
from roder_core.plugins.store import PluginError, PluginStore, Preview
from roder_core.settings.config import ConfigError, load_config
from roder_core.settings.paths import RoderPaths

INSTALL_ALL_NOTE = (
    "Every variant is installed under its own id (name@marketplace) in its own folder. Components are "
    "namespaced by plugin name, so two variants enabled together would claim the same /name:command, "
    "agents and MCP server ids: only the first variant is enabled, the others are installed disabled. "
    "Switch with `roder plugin disable` and `roder plugin enable`."
)


def fetch_settings(paths: RoderPaths) -> FetchSettings:
    """``[plugins] github_url`` and ``allow_loopback_http`` from the user's own config.toml only:
    a project cannot redirect where plugins come from."""
    try:
        extra = load_config(paths, Path.home(), False).model_extra or {}
    except ConfigError:
        extra = {}
    raw = extra.get("plugins")
    section: dict[str, Any] = raw if isinstance(raw, dict) else {}
    github = section.get("github_url")
    return FetchSettings(
        github_url=str(github) if isinstance(github, str) and "{repo}" in github else FetchSettings.github_url,
        allow_loopback_http=bool(section.get("allow_loopback_http", False)),
    )


class PluginService:
    def __init__(self, paths: RoderPaths, cwd: Path, trusted: bool, config_extra: Mapping[str, Any] | None = None) -> None:
        self.paths = paths
        self.cwd = cwd
        self.trusted = trusted
        self.config_extra = config_extra
        self.store = PluginStore(paths, fetch_settings(paths))

    # ------------------------------------------------------------------ marketplaces

    def _market_json(self, known: KnownMarketplace) -> dict[str, Any]:
        data: dict[str, Any] = {"name": known.name, **known.to_json(), "declaredBy": "user", "added": True}
        try:
            market = self.store.marketplace(known.name)
            data.update(
                description=market.description,
                owner=market.owner,
                pluginCount=len(market.entries),
                problems=market.problems,
            )
        except PluginError as exc:
            data["problems"] = [str(exc)]
        return data

    def list_marketplaces(self) -> list[dict[str, Any]]:
        known = self.store.known()
        rows = [self._market_json(k) for k in known.values()]
        for name, source in project_plugins(self.cwd, self.trusted).marketplaces.items():
            if name not in known:
                rows.append({"name": name, "source": source, "declaredBy": "project", "added": False})
        return rows

    def add(self, source: str) -> dict[str, Any]:
        known, _ = self.store.add_marketplace(source)
        return self._market_json(known)

    def install_default(self, path: str | None) -> dict[str, Any]:
        known, _ = self.store.install_default(Path(path).expanduser() if path else None)
        return self._market_json(known)

    def remove(self, name: str) -> dict[str, Any]:
        return {"removed": name, "uninstalled": self.store.remove_marketplace(name)}

    def refresh(self, name: str | None) -> list[dict[str, Any]]:
        return [self._market_json(k) for k in self.store.refresh(name)]

    # ------------------------------------------------------------------ catalog

    def search(self, query: str, limit: int | None = None) -> dict[str, Any]:
        _, problems = self.store.catalogs()
        return {"results": self.store.search(query, limit), "problems": problems}

    def plugin(self, identifier: str) -> dict[str, Any]:
        variant = self.store.variant(identifier)
        installed = self.store.installed().get(variant.id)
        readme = ""
        source = variant.entry.source
        if not source.external:
            candidate = variant.marketplace.root / source.path / "README.md"
            reader = ProjectReader(variant.marketplace.root)
            if reader.is_file(candidate):
                with contextlib.suppress(OSError):  # refused (a link out, too large) or unreadable
                    readme = reader.read_text(candidate, errors="replace")[:20_000]
        return {"plugin": variant.to_json(installed), "entry": variant.entry.raw, "readme": readme}

    def preview(self, identifier: str) -> tuple[Preview, dict[str, Any]]:
        preview = self.store.preview(identifier)
        installed = self.store.installed().get(preview.variant.id)
        data = preview.to_json()
        data["plugin"] = preview.variant.to_json(installed)
        return preview, data

    # ------------------------------------------------------------------ installed

    def _active_ids(self) -> set[str]:
        active = active_plugins(self.paths, self.cwd, self.trusted, self.config_extra)
        return {p.id for p in active.plugins}

    def installed_json(self, record: InstallRecord, active: set[str] | None = None) -> dict[str, Any]:
        root = Path(record.install_path)
        layout = installed_layout(record, root) if root.is_dir() else None
        problems = list(layout.problems) if layout else [f"files missing: {root}; reinstall it"]
        return {
            "id": record.id,
            "name": record.name,
            "marketplace": record.marketplace,
            "version": record.version,
            "installPath": record.install_path,
            "dataDir": str(self.store.dirs.data_dir(record.id)),
            "enabled": record.enabled,
            "active": record.id in (active if active is not None else self._active_ids()),
            "installedAt": record.installed_at,
            "lastUpdated": record.last_updated,
            "gitCommitSha": record.git_commit_sha,
            "source": record.source,
            "components": layout.to_json() if layout is not None else {},
            "problems": [*problems, *record.notes],
            "options": self.store.options.plain(record.id),
            "sensitiveOptions": sorted(self.store.options.secrets.plugin_options(record.id)),
            "dependencies": record.dependencies,
            "autoInstalled": record.auto_installed,
            "missingOptions": [spec.to_json() for spec in self.store.unset_required(record.id, layout)] if layout else [],
        }

    def read(self, identifier: str) -> dict[str, Any]:
        """One installed plugin, by id or by a name only one installed variant has."""
        return self.installed_json(self.store.installed_record(identifier))

    def install(
        self, identifier: str, consent: str | None, preview: Preview | None = None, options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        record = self.store.install(identifier, consent, preview=preview, options=options)
        return self.installed_json(record)

    def configure(self, identifier: str, options: Mapping[str, Any]) -> dict[str, Any]:
        return self.installed_json(self.store.configure(identifier, options))

    def install_all(self, name: str, consents: Mapping[str, str]) -> dict[str, Any]:
        variants = self.store.variants(split_id(name)[0])
        if not variants:
            raise PluginError(f"no marketplace offers a plugin named {name!r}")
        installed, skipped = [], []
        first_enabled: str | None = None
        for variant in variants:
            try:
                record = self.store.install(variant.id, consents.get(variant.id))
            except PluginError as exc:
                skipped.append({"id": variant.id, "reason": str(exc)})
                continue
            if first_enabled is None:
                first_enabled = record.id
            else:
                record = self.store.set_enabled(record.id, False)
            installed.append(record)
        active = self._active_ids()
        return {
            "installed": [self.installed_json(r, active) for r in installed],
            "skipped": skipped,
            "note": INSTALL_ALL_NOTE,
        }

    def list_installed(self) -> dict[str, Any]:
        active = active_plugins(self.paths, self.cwd, self.trusted, self.config_extra)
        ids = {p.id for p in active.plugins}
        rows = [self.installed_json(r, ids) for r in sorted(self.store.installed().values(), key=lambda r: r.id)]
        return {"plugins": rows, "problems": active.problems}

    def set_enabled(self, identifier: str, enabled: bool) -> dict[str, Any]:
        if enabled:
            self._disable_namesakes(identifier)
        return self.installed_json(self.store.set_enabled(identifier, enabled))

    def _disable_namesakes(self, identifier: str) -> list[str]:
        """Disable the other enabled variants of the plugin's name (they would claim the same
        command, agent and server names); returns their ids."""
        record = self.store.installed_record(identifier)
        others = [o.id for o in self.store.installed().values() if o.name == record.name and o.enabled and o.id != record.id]
        for other in others:
            self.store.set_enabled(other, False)
        return others

    def enable(self, identifier: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Set the given options, then enable the plugin (and its dependencies) and disable its
        same-named variants; a required option that would stay without a value refuses, naming
        it, before anything changes. Returns the plugin and the variants disabled."""
        if options or self.store.missing_options(identifier):
            self.store.configure(identifier, options)
        switched_off = self._disable_namesakes(identifier)
        return self.installed_json(self.store.set_enabled(identifier, True)), switched_off

    # ------------------------------------------------------------------ Claude Code's plugins

    def preview_import(self, claude_dir: Path) -> dict[str, Any]:
        """What importing from Claude Code's folder would add (read only), with a consent token."""
        return claude_import.plan(self.store, claude_dir).to_json()

    def import_claude(self, claude_dir: Path, consent: str) -> dict[str, Any]:
        """Carry out the plan its preview showed; refused when the plan changed since."""
        found = claude_import.plan(self.store, claude_dir)
        if consent != found.consent():
            raise PluginError("what import-claude would do changed since its preview (or the consent is wrong); preview again")
        imported, problems = claude_import.apply(self.store, found)
        return {"imported": imported, "problems": problems}

    def uninstall(self, identifier: str, keep_data: bool, *, prune: bool = False) -> tuple[str, list[str]]:
        """Uninstall; with ``prune`` also the automatic dependencies nothing needs any more."""
        removed = self.store.uninstall(identifier, keep_data=keep_data).id
        return removed, self.store.prune() if prune else []
