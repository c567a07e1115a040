"""Marketplaces and installed plugins: add, refresh, search, preview, install, disable, uninstall.

Every operation is blocking file and process work (the app server runs it in a worker thread).
The network is reached only by an operation the user asked for: adding or refreshing a remote
catalog, ``install_default`` without a local folder, and previewing or installing a plugin whose
source is external. Installing anything that would run code (hooks, MCP servers, ``bin/``, a
command's ``!`` lines, a ``command`` source) needs the consent token of the preview that showed
it, so what runs is what the user saw.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.brokers.data_paths import component, remove_tree
from roder_core.errors import RoderError, UnsafePathError
from roder_core.plugins import fetch
from roder_core.plugins.dependencies import Dependency, satisfies
from roder_core.plugins.fetch import Fetched, FetchError, FetchSettings
from roder_core.plugins.layout import PluginLayout, resolve_layout
from roder_core.plugins.manifest import (
    OFFICIAL_MARKETPLACE,
    RESERVED_MARKETPLACES,
    ManifestError,
    Marketplace,
    MarketplaceEntry,
    PluginSource,
    entry_of,
    load_json,
    load_manifest,
    load_marketplace,
    parse_marketplace,
    plugin_id,
    split_id,
)
from roder_core.plugins.node_deps import node_dependencies
from roder_core.plugins.options import OptionError, OptionSpec, OptionStore, check_values
from roder_core.plugins.records import (
    InstallRecord,
    KnownMarketplace,
    PluginDirs,
    now,
    read_installed,
    read_json,
    read_known,
    write_installed,
    write_json,
    write_known,
)
from roder_core.settings.paths import RoderPaths

#: The official catalog's repository (cloned through ``[plugins] github_url``, so a mirror works).
OFFICIAL_REPO = "anthropics/claude-plugins-official"
_GIT_HOSTS = ("github.com", "gitlab.com")
#: ``owner/repo[@ref]``; a GitHub owner has no dots, so ``example.com/x`` is a URL missing its scheme.
_SHORTHAND = re.compile(r"^([A-Za-z0-9-]+/[A-Za-z0-9_.-]+)(?:@(.+))?$")


class PluginError(RoderError):
    """A marketplace or plugin operation failed; the message says what to do."""


@dataclass
class Variant:
    """One concrete plugin: ``name@marketplace`` with its version and source."""

    marketplace: Marketplace
    entry: MarketplaceEntry

    @property
    def id(self) -> str:
        return plugin_id(self.entry.name, self.marketplace.name)

    def to_json(self, installed: InstallRecord | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.entry.name,
            "marketplace": self.marketplace.name,
            "version": self.entry.version,
            "description": self.entry.description,
            "source": self.entry.source.to_json(),
            "sourceDescription": self.entry.source.describe(),
            "category": self.entry.category,
            "keywords": self.entry.keywords,
            "author": self.entry.author,
            "homepage": self.entry.homepage,
            "strict": self.entry.strict,
            "installed": installed is not None,
            "enabled": bool(installed and installed.enabled),
            "installedVersion": installed.version if installed else None,
        }


@dataclass
class Preview:
    """What installing a plugin would bring and run, before anything is installed."""

    variant: Variant
    version: str
    components_known: bool
    layout: PluginLayout | None
    runs_code: list[str]
    consent: str
    problems: list[str] = field(default_factory=list)
    staged: Fetched | None = None
    #: Plugins this one needs that are not installed yet, in install order (dependencies first);
    #: what they run is part of ``runs_code`` and of the consent.
    dependencies: list[Preview] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "plugin": self.variant.to_json(),
            "version": self.version,
            "componentsKnown": self.components_known,
            "components": self.layout.to_json() if self.layout is not None else {},
            "runsCode": self.runs_code,
            "consent": self.consent,
            "problems": self.problems,
            "dependencies": [{"id": d.variant.id, "version": d.version} for d in self.dependencies],
            "userConfig": [spec.to_json() for spec in self.layout.user_config.values()] if self.layout else [],
        }


def _suits(version: str | None, dependent: Variant, dependency: Dependency) -> bool:
    try:
        return satisfies(version, dependency.version)
    except ValueError:
        raise PluginError(f"{dependent.id}: dependency {dependency.describe()}: cannot read the version range") from None


def _consent(variant: Variant, version: str, runs_code: list[str]) -> str:
    text = json.dumps([variant.id, variant.entry.source.to_json(), version, runs_code], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class PluginStore:
    def __init__(self, paths: RoderPaths, settings: FetchSettings | None = None) -> None:
        self.paths = paths
        self.dirs = PluginDirs.of(paths)
        self.settings = settings or FetchSettings()
        self.options = OptionStore(self.dirs)

    # ------------------------------------------------------------------ marketplaces

    def known(self) -> dict[str, KnownMarketplace]:
        return read_known(self.dirs)

    def marketplace(self, name: str) -> Marketplace:
        known = self.known().get(name)
        if known is None:
            raise PluginError(f"no marketplace {name!r}; added: {', '.join(sorted(self.known())) or 'none'}")
        return self._load(known)

    def _load(self, known: KnownMarketplace) -> Marketplace:
        location = Path(known.install_location)
        try:
            if known.source.get("source") == "file":
                path = Path(str(known.source.get("path")))
                problems: list[str] = []
                market = parse_marketplace(load_json(path, problems), location, str(path), problems)
            else:
                market = load_marketplace(location)
        except ManifestError as exc:
            raise PluginError(f"marketplace {known.name!r}: {exc}") from exc
        market.name = known.name
        return market

    def catalogs(self) -> tuple[list[Marketplace], list[str]]:
        """Every added marketplace that can be read, and one line per one that cannot."""
        found, problems = [], []
        for known in self.known().values():
            try:
                found.append(self._load(known))
            except PluginError as exc:
                problems.append(str(exc))
        return found, problems

    def add_marketplace(self, spec: str, *, official: bool = False) -> tuple[KnownMarketplace, Marketplace]:
        """Add a catalog from a folder, a marketplace.json, a git URL, ``owner/repo[@ref]`` or an
        https URL of a marketplace.json. A catalog with the same name replaces the older one."""
        source = self.marketplace_source(spec)
        work = fetch.scratch(self.dirs.root / "marketplaces")
        try:
            location, market, catalog_only = self._materialize(source, work)
            self._check_name(market.name, official)
            if location.is_relative_to(work):
                final = self.dirs.marketplace_dir(market.name)
                remove_tree(self.dirs.root / "marketplaces", final, "marketplace folder")
                location.rename(final)
                location = final
                market.root = final
        finally:
            shutil.rmtree(work, ignore_errors=True)
        entry = KnownMarketplace(market.name, source, str(location), now(), official=official, catalog_only=catalog_only)
        known = self.known()
        known[market.name] = entry
        write_known(self.dirs, known)
        return entry, market

    def install_default(self, path: Path | None = None) -> tuple[KnownMarketplace, Marketplace]:
        """Add Anthropic's official catalog: from a local copy when ``path`` is given (offline),
        otherwise cloned from GitHub (the user asked for it)."""
        if path is not None:
            market = self._read_folder(path)
            if market.name != OFFICIAL_MARKETPLACE:
                raise PluginError(f"{path} holds marketplace {market.name!r}, not {OFFICIAL_MARKETPLACE}")
            return self.add_marketplace(str(path), official=True)
        known, market = self.add_marketplace(OFFICIAL_REPO, official=True)
        if market.name != OFFICIAL_MARKETPLACE:
            self.remove_marketplace(market.name)
            raise PluginError(f"{OFFICIAL_REPO} holds marketplace {market.name!r}, not {OFFICIAL_MARKETPLACE}")
        return known, market

    def _check_name(self, name: str, official: bool) -> None:
        if official:
            return
        lowered = name.lower()
        if lowered in RESERVED_MARKETPLACES or any(lowered.replace("-", "") == r.replace("-", "") for r in RESERVED_MARKETPLACES):
            raise PluginError(
                f"marketplace name {name!r} is reserved for Anthropic's official catalogs "
                "(use `roder plugin marketplace add-default` for the official one)"
            )

    def marketplace_source(self, spec: str) -> dict[str, Any]:
        text = spec.strip()
        if not text:
            raise PluginError("give a folder, a marketplace.json, a git URL, owner/repo or an https URL")
        local = Path(text).expanduser()
        if local.exists() or text.startswith(("/", "./", "../", "~")):
            local = local.resolve()
            if local.is_dir():
                return {"source": "directory", "path": str(local)}
            if local.is_file():
                return {"source": "file", "path": str(local)}
            raise PluginError(f"{text}: no such file or folder")
        repo, ref = text, None
        if "#" in text and "://" in text:
            text, _, ref = text.partition("#")
        if text.startswith(("file://", "git@", "ssh://")) or text.endswith(".git") or "/_git/" in text:
            return {"source": "git", "url": text, **({"ref": ref} if ref else {})}
        if text.startswith(("https://", "http://")):
            host = text.split("/")[2].lower()
            if host in _GIT_HOSTS and not text.endswith(".json"):
                return {"source": "git", "url": text, **({"ref": ref} if ref else {})}
            return {"source": "url", "url": text}
        match = _SHORTHAND.match(repo)
        if match:
            return {"source": "github", "repo": match.group(1), **({"ref": match.group(2)} if match.group(2) else {})}
        raise PluginError(f"{spec!r}: not a folder, a file, owner/repo or a URL with a scheme")

    def _read_folder(self, folder: Path) -> Marketplace:
        try:
            return load_marketplace(folder)
        except ManifestError as exc:
            raise PluginError(str(exc)) from exc

    def _materialize(self, source: dict[str, Any], work: Path) -> tuple[Path, Marketplace, bool]:
        kind = source["source"]
        try:
            if kind == "directory":
                folder = Path(source["path"])
                return folder, self._read_folder(folder), False
            if kind == "file":
                path = Path(source["path"])
                problems: list[str] = []
                root = path.parent.parent if path.parent.name == ".claude-plugin" else path.parent
                return root, parse_marketplace(load_json(path, problems), root, str(path), problems), False
            if kind == "url":
                target = work / "catalog" / ".claude-plugin" / "marketplace.json"
                target.parent.mkdir(parents=True)
                fetch.download(source["url"], target, self.settings, limit=16 * 1024 * 1024)
                return work / "catalog", self._read_folder(work / "catalog"), True
            url = self.settings.github_url.format(repo=source["repo"]) if kind == "github" else source["url"]
            fetch.clone(url, work / "clone", ref=source.get("ref"), settings=self.settings)
            return work / "clone", self._read_folder(work / "clone"), False
        except FetchError as exc:
            raise PluginError(str(exc)) from exc

    def remove_marketplace(self, name: str) -> list[str]:
        """Forget a catalog and uninstall every plugin installed from it; returns their ids."""
        known = self.known()
        entry = known.pop(name, None)
        if entry is None:
            raise PluginError(f"no marketplace {name!r}")
        removed = [record.id for record in read_installed(self.dirs).values() if record.marketplace == name]
        for identifier in removed:
            self.uninstall(identifier, force=True)
        own = self.dirs.marketplace_dir(name)
        if Path(entry.install_location) == own:
            remove_tree(self.dirs.root / "marketplaces", own, "marketplace folder")
        write_known(self.dirs, known)
        return removed

    def refresh(self, name: str | None = None) -> list[KnownMarketplace]:
        """Re-read catalogs: pull a clone (re-clone when pulling fails), download a URL again."""
        known = self.known()
        names = [name] if name else sorted(known)
        refreshed = []
        for current in names:
            entry = known.get(current)
            if entry is None:
                raise PluginError(f"no marketplace {current!r}")
            kind = entry.source.get("source")
            location = Path(entry.install_location)
            if kind in ("git", "github"):
                try:
                    fetch.pull(location, entry.source.get("ref"))
                except FetchError:
                    self.add_marketplace(self._spec_of(entry), official=entry.official)
                    refreshed.append(self.known()[current])
                    continue
            elif kind == "url":
                self.add_marketplace(entry.source["url"], official=entry.official)
                refreshed.append(self.known()[current])
                continue
            self._load(entry)  # a local folder or file: re-read it (errors surface here)
            entry.last_updated = now()
            known[current] = entry
            refreshed.append(entry)
        write_known(self.dirs, {**self.known(), **{e.name: e for e in refreshed}})
        return refreshed

    @staticmethod
    def _spec_of(entry: KnownMarketplace) -> str:
        source = entry.source
        if source.get("source") == "github":
            return str(source["repo"]) + (f"@{source['ref']}" if source.get("ref") else "")
        return str(source.get("url") or source.get("path"))

    # ------------------------------------------------------------------ catalog

    def variants(self, name: str) -> list[Variant]:
        """Every marketplace's entry for plugin ``name`` (renames followed), in marketplace order."""
        catalogs, _ = self.catalogs()
        found = []
        for market in catalogs:
            current = market.resolve_rename(name)
            entry = market.entry(current) if current else None
            if entry is not None:
                found.append(Variant(market, entry))
        return found

    def variant(self, identifier: str) -> Variant:
        """``name@mkt`` (or a bare name that only one marketplace offers)."""
        name, market_name = split_id(identifier)
        if market_name is None:
            options = self.variants(name)
            if not options:
                raise PluginError(f"no marketplace offers a plugin named {name!r}")
            if len(options) > 1:
                ids = ", ".join(v.id for v in options)
                raise PluginError(f"{name!r} is offered by several marketplaces: {ids}; name one (name@marketplace)")
            return options[0]
        market = self.marketplace(market_name)
        current = market.resolve_rename(name)
        if current is None:
            raise PluginError(f"{name!r} was removed from marketplace {market_name!r}")
        entry = market.entry(current)
        if entry is None:
            raise PluginError(f"marketplace {market_name!r} has no plugin {name!r}")
        return Variant(market, entry)

    def search(self, query: str = "", limit: int | None = None) -> list[dict[str, Any]]:
        """Plugins whose name, description, category or keywords contain every word of
        ``query``, one result per plugin name with its variants (``name@marketplace``)."""
        words = query.lower().split()
        installed = read_installed(self.dirs)
        grouped: dict[str, list[Variant]] = {}
        catalogs, _ = self.catalogs()
        for market in catalogs:
            for entry in market.entries:
                text = " ".join([entry.name, entry.description, entry.category, *entry.keywords]).lower()
                if all(word in text for word in words):
                    grouped.setdefault(entry.name, []).append(Variant(market, entry))
        ranked = sorted(grouped.items(), key=lambda kv: (not any(w in kv[0].lower() for w in words) if words else False, kv[0]))
        results = []
        for name, variants in ranked[:limit] if limit else ranked:
            first = variants[0].entry
            results.append(
                {
                    "name": name,
                    "description": first.description,
                    "category": first.category,
                    "variants": [v.to_json(installed.get(v.id)) for v in variants],
                }
            )
        return results

    # ------------------------------------------------------------------ preview and install

    def _plugin_dir(self, variant: Variant) -> tuple[Path, bool]:
        """The folder of a relative-source plugin inside its marketplace, and whether it is the
        marketplace root itself."""
        known = self.known().get(variant.marketplace.name)
        if known is not None and known.catalog_only:
            raise PluginError(
                f"{variant.id} has a relative source, but marketplace {variant.marketplace.name!r} was added by URL "
                "(only its marketplace.json was downloaded); add it from git or a folder instead"
            )
        root = variant.marketplace.root.resolve()
        target = (root / variant.entry.source.path).resolve()
        if target != root and not target.is_relative_to(root):
            raise PluginError(f"{variant.id}: source leaves the marketplace")
        if not target.is_dir():
            raise PluginError(f"{variant.id}: folder {variant.entry.source.path} is missing from the marketplace")
        return target, target == root

    def _version(self, variant: Variant, folder: Path, fetched: Fetched | None) -> str:
        """The version to install as: it names a folder, so it must be one plain name."""
        version = self._stated_version(variant, folder, fetched)
        try:
            return component(version, f"{variant.id}: version")
        except UnsafePathError as exc:
            raise PluginError(str(exc)) from None

    def _stated_version(self, variant: Variant, folder: Path, fetched: Fetched | None) -> str:
        manifest = load_manifest(folder)
        if manifest.version:
            return manifest.version
        if variant.entry.version:
            return variant.entry.version
        commit = fetched.commit if fetched else None
        if commit is None and not variant.entry.source.external:
            commit = fetch.head_commit(variant.marketplace.root)
        if commit:
            return commit[:12]
        if fetched is not None and fetched.digest:
            return fetched.digest[:12]
        return "unknown"

    def _fetch_external(self, source: PluginSource, work: Path) -> Fetched:
        """Fetch into ``work``; on failure ``work`` is deleted (nothing half-fetched stays)."""
        try:
            return self._fetch_into(source, work)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise

    def _fetch_into(self, source: PluginSource, work: Path) -> Fetched:
        try:
            if source.kind in ("github", "url", "git-subdir"):
                commit = fetch.clone(
                    fetch.git_url(source, self.settings), work / "clone", ref=source.ref, sha=source.sha, settings=self.settings
                )
                folder = work / "clone"
                if source.path:
                    folder = (work / "clone" / source.path.strip("/")).resolve()
                    if not folder.is_relative_to((work / "clone").resolve()) or not folder.is_dir():
                        raise PluginError(f"{source.describe()}: path {source.path!r} is not a folder of the repository")
                return Fetched(folder, commit=commit)
            if source.kind == "archive":
                return fetch.fetch_archive(source, work, self.settings)
            if source.kind == "npm":
                return fetch.fetch_npm(source, work)
            if source.kind == "command":
                folder = fetch.run_command_source(source)
                return Fetched(folder, digest=fetch.content_hash(folder))
        except FetchError as exc:
            raise PluginError(str(exc)) from exc
        raise PluginError(f"source type {source.kind!r} not supported")

    def preview(self, identifier: str) -> Preview:
        """What the plugin contains and what would run, its dependencies included. A relative
        source is read in place; an external one is fetched into a staging folder (kept for the
        install that follows); a ``command`` source is not run: its exact command is what the
        user accepts. A dependency cycle or a missing dependency is an error naming the chain."""
        previews: dict[str, Preview] = {}
        try:
            top = self._preview_tree(self.variant(identifier), [], previews)
        except BaseException:
            for staged in previews.values():
                self.discard(staged)
            raise
        top.dependencies = [p for key, p in previews.items() if key != top.variant.id]
        for dependency in top.dependencies:
            top.runs_code += [f"dependency {dependency.variant.id}: {line}" for line in dependency.runs_code]
            top.problems += [f"dependency {dependency.variant.id}: {line}" for line in dependency.problems]
        top.consent = _consent(top.variant, top.version, top.runs_code)
        return top

    def _preview_one(self, variant: Variant) -> Preview:
        source = variant.entry.source
        if source.kind == "command":
            runs = [f"command source (runs from $HOME to produce the plugin folder): {source.command}"]
            return Preview(variant, "content hash", False, None, runs, _consent(variant, "", runs))
        staged: Fetched | None = None
        if source.external:
            staged = self._fetch_external(source, fetch.scratch(self.dirs.staging))
            folder, at_root = staged.path, False
        else:
            folder, at_root = self._plugin_dir(variant)
        layout = resolve_layout(folder, variant.entry.name, load_manifest(folder), variant.entry, marketplace_root=at_root)
        version = self._version(variant, folder, staged)
        runs = layout.runs_code()
        return Preview(variant, version, True, layout, runs, _consent(variant, version, runs), list(layout.problems), staged)

    def _preview_tree(self, variant: Variant, chain: list[str], previews: dict[str, Preview]) -> Preview:
        """Preview ``variant`` and, depth first, every dependency not installed at a suitable
        version; ``previews`` collects them in install order (dependencies before dependents)."""
        preview = self._preview_one(variant)
        installed = read_installed(self.dirs)
        for dependency in preview.layout.dependencies if preview.layout is not None else []:
            dep_variant = self._dependency_variant(variant, dependency, [*chain, variant.id])
            if dep_variant.id in previews:
                continue
            record = installed.get(dep_variant.id)
            if record is not None and _suits(record.version, variant, dependency):
                continue
            dep_preview = self._preview_tree(dep_variant, [*chain, variant.id], previews)
            if not _suits(dep_preview.version, variant, dependency) and dep_preview.components_known:
                raise PluginError(
                    f"{variant.id} needs {dependency.describe()}, but {dep_variant.id} is version {dep_preview.version}"
                )
        previews[variant.id] = preview
        return preview

    def _dependency_variant(self, dependent: Variant, dependency: Dependency, chain: list[str]) -> Variant:
        market = dependency.marketplace or dependent.marketplace.name
        if market != dependent.marketplace.name and market not in dependent.marketplace.allow_cross_dependencies:
            raise PluginError(
                f"{dependent.id} depends on {dependency.name}@{market}, but marketplace {dependent.marketplace.name!r} "
                f"does not allow dependencies from {market!r} (allowCrossMarketplaceDependenciesOn)"
            )
        identifier = plugin_id(dependency.name, market)
        if identifier in chain:
            cycle = " -> ".join([*chain[chain.index(identifier) :], identifier])
            raise PluginError(f"dependency cycle: {cycle}; nothing was installed")
        try:
            return self.variant(identifier)
        except PluginError as exc:
            path = " -> ".join([*chain, identifier])
            raise PluginError(f"missing dependency {dependency.describe()} ({path}): {exc}; nothing was installed") from None

    def install(
        self,
        identifier: str,
        consent: str | None = None,
        *,
        preview: Preview | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> InstallRecord:
        """Install the plugin's missing dependencies, then copy the plugin into the cache,
        record it, store its options and enable it. Installing an installed plugin again updates
        it (or re-enables it when nothing changed), keeping the options it had."""
        preview = preview or self.preview(identifier)
        variant = preview.variant
        every = [preview, *preview.dependencies]
        needs_consent = preview.runs_code or any(p.variant.entry.source.kind == "command" for p in every)
        if needs_consent and consent != preview.consent:
            self.discard(preview)
            raise PluginError(
                f"{variant.id} runs code when enabled:\n  "
                + "\n  ".join(preview.runs_code)
                + "\nreview it with plugins/preview_install and pass its consent token to install"
            )
        before = set(read_installed(self.dirs))
        installed: list[InstallRecord] = []
        try:
            if preview.layout is not None:  # options are checked before any dependency is installed
                self._checked_options(variant.id, preview.layout, options or {}, auto=False)
            for dependency in preview.dependencies:
                installed.append(self._install_one(dependency, {}, auto=True))
            record = self._install_one(preview, options or {}, auto=False)
        except BaseException:
            self.discard(preview)
            for done in installed:  # nothing half-installed: new dependencies go with the failure
                if done.id not in before:
                    self.uninstall(done.id, force=True)
            raise
        return record

    def _install_one(self, preview: Preview, given: Mapping[str, Any], *, auto: bool) -> InstallRecord:
        variant = preview.variant
        source = variant.entry.source
        fetched = preview.staged
        work = fetch.scratch(self.dirs.staging)
        problems: list[str] = []
        try:
            if source.kind == "command":
                fetched = self._fetch_external(source, work)
                self._accept_command(variant.id, source.command)
            if fetched is not None:
                folder, boundary = fetched.path, fetched.path
            else:
                folder, _ = self._plugin_dir(variant)
                boundary = variant.marketplace.root
            version = fetch.content_hash(folder)[:12] if source.kind == "command" else self._version(variant, folder, fetched)
            raw = variant.entry.raw
            entry: dict[str, Any] = {
                "strict": variant.entry.strict,
                "atRoot": source.path in (".", "./"),
                **variant.entry.components(),
                **{key: raw[key] for key in ("userConfig", "dependencies") if key in raw},
            }
            layout = resolve_layout(
                folder,
                variant.entry.name,
                load_manifest(folder),
                entry_of(variant.entry.name, entry),
                marketplace_root=bool(entry["atRoot"]),
            )
            values = self._checked_options(variant.id, layout, given, auto=auto)
            if source.kind == "command" and source.mode == "link":
                install_path = folder
            else:
                install_path = self.dirs.cache_dir(variant.marketplace.name, variant.entry.name, version)
                remove_tree(self.dirs.code, install_path, "installed plugin")
                fetch.copy_plugin(folder, install_path, boundary, problems)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            self.discard(preview)
        commit = fetched.commit if fetched else fetch.head_commit(variant.marketplace.root)
        dependencies = [self._dependency_variant(variant, d, []).id for d in layout.dependencies]
        old = read_installed(self.dirs).get(variant.id)
        in_cache = install_path.resolve().is_relative_to(self.dirs.code.resolve())
        notes = node_dependencies(install_path, self.paths) if in_cache else []  # a linked folder is the user's
        record = self._record(
            variant.id,
            install_path,
            version,
            commit,
            source.to_json(),
            entry,
            dependencies=dependencies,
            auto=auto and (old is None or old.auto_installed),
            notes=notes,
        )
        self.options.save(variant.id, layout.user_config, values)
        self._enable_dependencies(record)
        return record

    def _checked_options(self, identifier: str, layout: PluginLayout, given: Mapping[str, Any], *, auto: bool) -> dict[str, Any]:
        """The plugin's option values: what was given over what is stored, checked."""
        try:
            return check_values(layout.user_config, identifier, {**self.options.values(identifier), **given})
        except OptionError as exc:
            if auto:
                raise PluginError(f"{exc} (it is a dependency: install {identifier} first with its options)") from None
            raise PluginError(str(exc)) from None

    def _installed_layout(self, identifier: str) -> tuple[InstallRecord, PluginLayout]:
        records = read_installed(self.dirs)
        record = records.get(identifier) or _by_name(records, identifier)
        root = Path(record.install_path)
        return record, resolve_layout(root, record.name, load_manifest(root), entry_of(record.name, record.entry))

    def configure(self, identifier: str, given: Mapping[str, Any]) -> InstallRecord:
        """Change an installed plugin's options (checked like at install: every required one
        must end up with a value)."""
        record, layout = self._installed_layout(identifier)
        values = self._checked_options(record.id, layout, given, auto=False)
        self.options.save(record.id, layout.user_config, values)
        return record

    def missing_options(self, identifier: str) -> list[OptionSpec]:
        """Required options of an installed plugin that have no value (asked for at enable)."""
        record, layout = self._installed_layout(identifier)
        return self.unset_required(record.id, layout)

    def unset_required(self, plugin: str, layout: PluginLayout) -> list[OptionSpec]:
        """The required options of ``layout`` with neither a stored value nor a default."""
        stored = self.options.values(plugin)
        return [s for k, s in layout.user_config.items() if s.required and s.default is None and k not in stored]

    def _record(
        self,
        identifier: str,
        install_path: Path,
        version: str,
        commit: str | None,
        source: dict[str, Any],
        entry: dict[str, Any],
        *,
        dependencies: list[str] | None = None,
        auto: bool = False,
        notes: list[str] | None = None,
    ) -> InstallRecord:
        """Write the install record (enabled) and create the plugin's data folder."""
        records = read_installed(self.dirs)
        old = records.get(identifier)
        stamp = now()
        record = InstallRecord(
            id=identifier,
            install_path=str(install_path),
            version=version,
            installed_at=old.installed_at if old else stamp,
            last_updated=stamp,
            enabled=True,
            git_commit_sha=commit,
            source=source,
            entry=entry,
            dependencies=dependencies or [],
            auto_installed=auto,
            notes=notes or [],
        )
        records[identifier] = record
        write_installed(self.dirs, records)
        self.dirs.data_dir(identifier).mkdir(parents=True, exist_ok=True)
        if old is not None and old.install_path != record.install_path:
            _remove_cached(Path(old.install_path), self.dirs.code)
        return record

    def import_folder(self, identifier: str, folder: Path, version: str) -> InstallRecord:
        """Copy a plugin another tool already installed (Claude Code's cache) and record it."""
        name, market = split_id(identifier)
        if market is None:
            raise PluginError(f"{identifier!r}: expected name@marketplace")
        try:
            variant = self.variant(identifier)
            entry = {"strict": variant.entry.strict, **variant.entry.components()}
        except PluginError:
            entry = {}
        install_path = self.dirs.cache_dir(market, name, version)
        remove_tree(self.dirs.code, install_path, "installed plugin")
        problems: list[str] = []
        fetch.copy_plugin(folder, install_path, folder, problems)
        return self._record(identifier, install_path, version, None, {"source": "claude-import", "path": str(folder)}, entry)

    def discard(self, preview: Preview) -> None:
        """Delete what a preview (and its dependencies' previews) fetched, when no install follows."""
        for each in [preview, *preview.dependencies]:
            if each.staged is not None:
                shutil.rmtree(_staging_root(each.staged.path, self.dirs.staging), ignore_errors=True)

    def _accept_command(self, identifier: str, command: str) -> None:
        accepted = read_json(self.dirs.accepted_file, {})
        accepted = accepted if isinstance(accepted, dict) else {}
        accepted[identifier] = command
        write_json(self.dirs.accepted_file, accepted)

    def installed(self) -> dict[str, InstallRecord]:
        return read_installed(self.dirs)

    def installed_record(self, identifier: str) -> InstallRecord:
        """The install record of ``identifier`` (an id, or a name only one variant has)."""
        records = read_installed(self.dirs)
        return records.get(identifier) or _by_name(records, identifier)

    def set_enabled(self, identifier: str, enabled: bool) -> InstallRecord:
        """Enabling a plugin enables its dependencies; disabling one an enabled plugin depends
        on is refused."""
        records = read_installed(self.dirs)
        record = records.get(identifier) or _by_name(records, identifier)
        if not enabled:
            dependents = [r.id for r in records.values() if r.enabled and record.id in r.dependencies]
            if dependents:
                raise PluginError(f"{record.id} cannot be disabled: {', '.join(dependents)} depend(s) on it; disable those first")
        record.enabled = enabled
        record.last_updated = now()
        records[record.id] = record
        write_installed(self.dirs, records)
        if enabled:
            self._enable_dependencies(record)
        return record

    def _enable_dependencies(self, record: InstallRecord) -> None:
        records = read_installed(self.dirs)
        todo, changed = list(record.dependencies), False
        while todo:
            current = records.get(todo.pop())
            if current is not None and not current.enabled:
                current.enabled, changed = True, True
                todo.extend(current.dependencies)
        if changed:
            write_installed(self.dirs, records)

    def dependents(self, identifier: str) -> list[str]:
        """Installed plugins that depend on ``identifier``."""
        return sorted(r.id for r in read_installed(self.dirs).values() if identifier in r.dependencies)

    def uninstall(self, identifier: str, *, keep_data: bool = False, force: bool = False) -> InstallRecord:
        """Remove a plugin; refused while another installed plugin depends on it (``force``
        is for rolling back a failed install and removing a whole marketplace)."""
        records = read_installed(self.dirs)
        record = records.get(identifier) or _by_name(records, identifier)
        dependents = [r.id for r in records.values() if record.id in r.dependencies]
        if dependents and not force:
            names = ", ".join(dependents)
            raise PluginError(f"{record.id} cannot be uninstalled: {names} depend(s) on it; uninstall those first")
        records.pop(record.id)
        write_installed(self.dirs, records)
        _remove_cached(Path(record.install_path), self.dirs.code)
        if not keep_data:
            with contextlib.suppress(OSError):
                remove_tree(self.dirs.root / "data", self.dirs.data_dir(record.id), "plugin data")
            self.options.forget(record.id)
        return record

    def prune(self) -> list[str]:
        """Uninstall plugins installed only as dependencies that nothing installed needs now."""
        removed: list[str] = []
        while True:
            records = read_installed(self.dirs)
            needed = {d for r in records.values() for d in r.dependencies}
            unused = [r.id for r in records.values() if r.auto_installed and r.id not in needed]
            if not unused:
                return removed
            for identifier in unused:
                self.uninstall(identifier)
                removed.append(identifier)


def _by_name(records: dict[str, InstallRecord], identifier: str, *, pop: bool = False) -> InstallRecord:
    name, market = split_id(identifier)
    matches = [r for r in records.values() if r.name == name and (market is None or r.marketplace == market)]
    if len(matches) != 1:
        installed = ", ".join(sorted(records)) or "none"
        raise PluginError(
            f"plugin {identifier!r} is not installed (installed: {installed})"
            if not matches
            else f"{identifier!r} is installed from several marketplaces; name one: {', '.join(r.id for r in matches)}"
        )
    if pop:
        records.pop(matches[0].id)
    return matches[0]


def _remove_cached(path: Path, cache_root: Path) -> None:
    """Delete an installed copy, only ever inside the cache (a linked command source is not ours)."""
    if path.exists() and path.resolve().is_relative_to(cache_root.resolve()):
        with contextlib.suppress(OSError):
            remove_tree(cache_root, path, "installed plugin")


def _staging_root(path: Path, staging: Path) -> Path:
    """The ``.fetch-*`` folder under ``staging`` that holds ``path``."""
    relative = path.resolve().relative_to(staging.resolve())
    return staging / relative.parts[0]
