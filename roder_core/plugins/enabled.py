"""Which installed plugins apply to a folder, and the marketplaces a project declares.

The user's choice is the ``enabled`` flag of each install record (``plugins/disable`` clears
it, installing sets it). ``[plugins] enabled = {"name@mkt" = false}`` in config.toml overrides
it; a trusted project overrides both with its ``.claude/settings.json`` (``enabledPlugins``,
``extraKnownMarketplaces``) and the personal ``.claude/settings.local.json``, exactly as Claude
Code reads them. An untrusted folder's settings are never read. A plugin a project enables that
is not installed is reported, never fetched: the user installs it.

Reading a plugin's layout (its manifest, components and options) loads with the first plugin
that applies: with none installed or enabled (``roder -p`` in most folders), only the install
records and the settings are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from roder_core.brokers.project_reader import ProjectFileRefused, project_reader
from roder_core.plugins.records import InstallRecord, PluginDirs, read_installed
from roder_core.settings.paths import RoderPaths

if TYPE_CHECKING:
    from roder_core.plugins.layout import PluginLayout

PROJECT_SETTINGS = (".claude/settings.json", ".claude/settings.local.json")


@dataclass
class ActivePlugin:
    """An enabled, installed plugin and what it contains."""

    record: InstallRecord
    root: Path
    data_dir: Path
    layout: PluginLayout
    #: Its ``userConfig`` values (sensitive ones included: only for its own processes).
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def id(self) -> str:
        return self.record.id

    def variables(self, project: Path) -> dict[str, str]:
        """The values of ``${CLAUDE_PLUGIN_ROOT}`` and friends (also exported to hooks and servers)."""
        return {
            "CLAUDE_PLUGIN_ROOT": str(self.root),
            "CLAUDE_PLUGIN_DATA": str(self.data_dir),
            "CLAUDE_PROJECT_DIR": str(project),
        }

    def process_env(self, project: Path) -> dict[str, str]:
        """What its hooks and MCP servers get: the variables plus ``CLAUDE_PLUGIN_OPTION_<KEY>``."""
        from roder_core.plugins.options import option_env

        return {**self.variables(project), **option_env(self.layout.user_config, self.options)}

    def public_options(self) -> frozenset[str]:
        """Option keys whose values may appear in text the model reads (not sensitive)."""
        return frozenset(k for k, spec in self.layout.user_config.items() if not spec.sensitive)


@dataclass
class ProjectPlugins:
    """What a trusted project's settings declare."""

    enabled: dict[str, bool] = field(default_factory=dict)
    marketplaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class ActivePlugins:
    plugins: list[ActivePlugin] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    project: ProjectPlugins = field(default_factory=ProjectPlugins)


@runtime_checkable
class PluginAware(Protocol):
    """A service that reads the enabled plugins: ``Runtime.plugins_changed`` hands it the new set
    after a plugin is installed, enabled, disabled, configured or removed, so the running session
    uses it from the next turn. Returns one problem line per component it could not load.
    ``plugin_parts`` names the parts of a plugin it takes (its layout's fields)."""

    plugin_parts: frozenset[str]

    async def reload_plugins(self, active: ActivePlugins) -> list[str]: ...


def project_plugins(cwd: Path, trusted: bool) -> ProjectPlugins:
    """``enabledPlugins`` and ``extraKnownMarketplaces`` of a trusted project (later files win)."""
    found = ProjectPlugins()
    if not trusted:
        return found
    reader = project_reader(cwd)
    for relative in PROJECT_SETTINGS:
        path = cwd / relative
        if not reader.is_file(path):
            continue
        try:
            data = json.loads(reader.read_text(path))
        except ProjectFileRefused as exc:
            found.problems.append(f"{exc}; its plugin settings are ignored")
            continue
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        if not isinstance(data, dict):
            found.problems.append(f"{path}: not a JSON object; its plugin settings are ignored")
            continue
        enabled = data.get("enabledPlugins")
        if isinstance(enabled, dict):
            found.enabled.update({str(k): bool(v) for k, v in enabled.items()})
        markets = data.get("extraKnownMarketplaces") or data.get("additionalMarketplaces")
        if isinstance(markets, dict):
            for name, spec in markets.items():
                if isinstance(spec, dict) and isinstance(spec.get("source"), dict):
                    found.marketplaces[str(name)] = spec["source"]
    return found


def _config_enabled(config_extra: Mapping[str, Any] | None) -> dict[str, bool]:
    section = (config_extra or {}).get("plugins")
    enabled = section.get("enabled") if isinstance(section, dict) else None
    return {str(k): bool(v) for k, v in enabled.items()} if isinstance(enabled, dict) else {}


def installed_layout(record: InstallRecord, root: Path) -> PluginLayout:
    """The components of an installed copy, with the catalog entry it was installed from."""
    from roder_core.plugins.layout import resolve_layout
    from roder_core.plugins.manifest import entry_of, load_manifest

    entry = entry_of(record.name, record.entry)
    return resolve_layout(root, record.name, load_manifest(root), entry, marketplace_root=bool(record.entry.get("atRoot")))


def _applicable(
    records: dict[str, InstallRecord], overrides: Mapping[str, bool], problems: list[str]
) -> list[tuple[str, InstallRecord]]:
    """The enabled records whose files exist, first of each name only (same-named variants
    would claim the same commands); what is left out is one line in ``problems``."""
    taken: dict[str, str] = {}
    found = []
    for identifier, record in sorted(records.items()):
        if not overrides.get(identifier, record.enabled):
            continue
        root = Path(record.install_path)
        if not root.is_dir():
            problems.append(f"plugin {identifier}: its files are missing ({root}); reinstall it")
            continue
        if record.name in taken:
            problems.append(
                f"plugin {identifier} is not loaded: {taken[record.name]} is enabled under the same name "
                "(their commands would clash); disable one"
            )
            continue
        taken[record.name] = identifier
        found.append((identifier, record))
    return found


def _overrides(cwd: Path, trusted: bool, config_extra: Mapping[str, Any] | None) -> tuple[ProjectPlugins, dict[str, bool]]:
    project = project_plugins(cwd, trusted)
    return project, {**_config_enabled(config_extra), **project.enabled}


def active_plugins(paths: RoderPaths, cwd: Path, trusted: bool, config_extra: Mapping[str, Any] | None = None) -> ActivePlugins:
    """The enabled plugins for ``cwd`` with their layouts; problems are one line each."""
    dirs = PluginDirs.of(paths)
    records = read_installed(dirs)
    project, overrides = _overrides(cwd, trusted, config_extra)
    result = ActivePlugins(project=project)
    result.problems.extend(result.project.problems)
    for identifier, wanted in overrides.items():
        if wanted and identifier not in records:
            from roder_core.plugins.manifest import split_id

            name, market = split_id(identifier)
            result.problems.append(
                f"plugin {identifier} is enabled by settings but not installed; install it with "
                f"`roder plugin install {name}{'@' + market if market else ''}`"
            )
    applicable = _applicable(records, overrides, result.problems)
    if not applicable:
        return result
    from roder_core.plugins.options import OptionStore

    options = OptionStore(dirs)
    for identifier, record in applicable:
        root = Path(record.install_path)
        layout = installed_layout(record, root)
        values = options.values(identifier) if layout.user_config else {}
        missing = [k for k, spec in layout.user_config.items() if spec.required and k not in values]
        if missing:
            result.problems.append(
                f"plugin {identifier}: option {', '.join(missing)} has no value; "
                f"set it with `roder plugin configure {identifier} --option KEY=VALUE`"
            )
        result.plugins.append(ActivePlugin(record, root, dirs.data_dir(identifier), layout, values))
        result.problems.extend(f"plugin {identifier}: {p}" for p in layout.problems)

    return result


def plugin_state_files(paths: RoderPaths, cwd: Path, trusted: bool) -> list[Path]:
    """The files ``active_plugins`` reads the enabled set from (the install records, the options,
    a trusted project's settings): a running session watches them, so a change another process
    made (``roder plugin install`` in another terminal) reaches it too."""
    from roder_core.plugins.options import OPTIONS_FILE

    dirs = PluginDirs.of(paths)
    return [dirs.installed_file, dirs.root / OPTIONS_FILE, *((cwd / p) for p in PROJECT_SETTINGS if trusted)]


def plugin_bin_dirs(paths: RoderPaths, cwd: Path, trusted: bool, config_extra: Mapping[str, Any] | None = None) -> list[Path]:
    """The ``bin/`` folders of the plugins that apply to ``cwd``: put on the PATH of the
    commands tools run while the plugin is enabled. Cheap (records and settings, no layouts):
    every broker set asks."""
    records = read_installed(PluginDirs.of(paths))
    if not records:
        return []
    _, overrides = _overrides(cwd, trusted, config_extra)
    found = [Path(record.install_path) / "bin" for _, record in _applicable(records, overrides, [])]
    return [folder for folder in found if folder.is_dir()]
