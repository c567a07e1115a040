"""Protocol models of the marketplace and plugin methods (seed 004).

The protocol keeps four things apart: catalog sources (``MarketplaceInfo``: where a catalog
comes from), search results (``SearchResult``: one per plugin name), concrete variants
(``PluginVariant``: ``name@marketplace`` with a version and a source) and installed records
(``InstalledPlugin``). Installing a plugin that runs code needs the ``consent`` token of the
preview that listed what runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel, ServerNotification, register, register_notification


class MarketplaceInfo(ProtocolModel):
    name: str
    #: How it was added: {"source": "directory"|"file"|"git"|"github"|"url", ...}.
    source: dict[str, Any]
    install_location: str = ""
    last_updated: str = ""
    official: bool = False
    #: Added by URL: only marketplace.json was downloaded, so relative plugin sources cannot install.
    catalog_only: bool = False
    description: str = ""
    owner: str = ""
    plugin_count: int = 0
    #: "user": added by the user; "project": declared by the trusted folder's settings.
    declared_by: str = "user"
    #: False for a project-declared catalog the user has not added yet.
    added: bool = True
    problems: list[str] = Field(default_factory=empty_list)


class MarketplacesListResult(ProtocolModel):
    marketplaces: list[MarketplaceInfo]


class MarketplaceResult(ProtocolModel):
    marketplace: MarketplaceInfo


class InstallDefaultParams(ProtocolModel):
    #: A local copy of the official catalog (offline); without it the catalog is cloned from GitHub.
    path: str | None = None


class MarketplaceAddParams(ProtocolModel):
    #: A folder, a marketplace.json path, a git URL, ``owner/repo[@ref]`` or an https URL.
    source: str


class MarketplaceNameParams(ProtocolModel):
    name: str


class MarketplaceRemoveResult(ProtocolModel):
    removed: str
    #: Plugins installed from it, uninstalled with it.
    uninstalled: list[str] = Field(default_factory=empty_list)


class MarketplaceRefreshParams(ProtocolModel):
    #: One catalog; every catalog when omitted.
    name: str | None = None


class PluginVariant(ProtocolModel):
    id: str
    name: str
    marketplace: str
    version: str | None = None
    description: str = ""
    source: dict[str, Any]
    source_description: str = ""
    category: str = ""
    keywords: list[str] = Field(default_factory=empty_list)
    author: str = ""
    homepage: str = ""
    strict: bool = True
    installed: bool = False
    enabled: bool = False
    installed_version: str | None = None


class SearchParams(ProtocolModel):
    query: str = ""
    limit: int | None = Field(default=None, ge=1)


class SearchResult(ProtocolModel):
    name: str
    description: str = ""
    category: str = ""
    variants: list[PluginVariant]


class SearchResultList(ProtocolModel):
    results: list[SearchResult]
    problems: list[str] = Field(default_factory=empty_list)


class MarketplacePluginParams(ProtocolModel):
    #: ``name@marketplace`` (or a name only one marketplace offers).
    plugin: str


class MarketplacePluginResult(ProtocolModel):
    plugin: PluginVariant
    #: The catalog entry as written (component keys included).
    entry: dict[str, Any]
    readme: str = ""


class PluginParams(ProtocolModel):
    plugin: str


class PluginOption(ProtocolModel):
    """One ``userConfig`` option a plugin asks for (a sensitive one's default is never sent)."""

    key: str
    #: string | number | boolean | directory | file
    type: str = "string"
    title: str = ""
    description: str = ""
    sensitive: bool = False
    required: bool = False
    multiple: bool = False
    default: Any = None
    min: float | None = None
    max: float | None = None


class PreviewComponents(ProtocolModel):
    commands: list[str] = Field(default_factory=empty_list)
    skills: list[str] = Field(default_factory=empty_list)
    agents: list[str] = Field(default_factory=empty_list)
    hooks: list[dict[str, Any]] = Field(default_factory=empty_list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=empty_list)
    lsp_servers: list[dict[str, Any]] = Field(default_factory=empty_list)
    #: Roder process extensions the plugin ships (``roderExtensions``).
    roder_extensions: list[dict[str, Any]] = Field(default_factory=empty_list)
    bin: list[str] = Field(default_factory=empty_list)
    unsupported: list[str] = Field(default_factory=empty_list)
    #: ``plugin:style`` names, selectable with ``/output-style``.
    output_styles: list[str] = Field(default_factory=empty_list)
    #: Theme names, offered by the TUI's theme picker.
    themes: list[str] = Field(default_factory=empty_list)
    #: Listed only: Roder does not run monitors.
    monitors: list[dict[str, Any]] = Field(default_factory=empty_list)
    user_config: list[PluginOption] = Field(default_factory=empty_list)
    #: What it depends on, as declared (``name[@marketplace] [version range]``).
    dependencies: list[str] = Field(default_factory=empty_list)


class DependencyPreview(ProtocolModel):
    id: str
    version: str


class PreviewResult(ProtocolModel):
    plugin: PluginVariant
    version: str
    #: False for a ``command`` source: its folder exists only once the accepted command ran.
    components_known: bool
    components: PreviewComponents
    #: Everything that would run code: hooks, MCP/LSP servers, bin/, install scripts, ``!`` lines
    #: of commands, a command source's exact command.
    runs_code: list[str]
    #: Pass to plugins/install to accept exactly what is listed here.
    consent: str
    problems: list[str] = Field(default_factory=empty_list)
    #: Plugins installed with it because it depends on them (what they run is in runsCode).
    dependencies: list[DependencyPreview] = Field(default_factory=empty_list)
    #: The options to ask the user for (pass the answers as plugins/install ``options``).
    user_config: list[PluginOption] = Field(default_factory=empty_list)


class InstallParams(ProtocolModel):
    plugin: str
    #: The preview's consent token; needed when the plugin runs code.
    consent: str | None = None
    #: Values of its ``userConfig`` options by key (a required one without a default must be
    #: given). Sensitive values are stored with Roder's keys and never echoed back.
    options: dict[str, Any] = Field(default_factory=dict)


class InstalledPlugin(ProtocolModel):
    id: str
    name: str
    marketplace: str
    version: str
    install_path: str
    data_dir: str
    enabled: bool
    #: Applies to this server's folder: enabled, not turned off by the folder's settings and not
    #: shadowed by a same-named variant. A session started now loads it (changes need a restart).
    active: bool = False
    installed_at: str = ""
    last_updated: str = ""
    git_commit_sha: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    components: PreviewComponents = Field(default_factory=PreviewComponents)
    problems: list[str] = Field(default_factory=empty_list)
    #: Non-sensitive option values; ``sensitiveOptions`` names the sensitive ones that are set.
    options: dict[str, Any] = Field(default_factory=dict)
    sensitive_options: list[str] = Field(default_factory=empty_list)
    #: Ids of the installed plugins it depends on, and whether it came only as a dependency.
    dependencies: list[str] = Field(default_factory=empty_list)
    auto_installed: bool = False
    #: Required options with neither a value nor a default: plugins/enable needs them (as
    #: ``options``) before it turns the plugin on.
    missing_options: list[PluginOption] = Field(default_factory=empty_list)


class LiveChange(ProtocolModel):
    """How a plugin change reaches the running server: ``applied`` names the parts of the
    plugins that apply from the next turn (commands, skills, agents, hooks, MCP servers, LSP
    servers, Roder extensions, ...); ``nextStart`` names what still waits for roder to start
    again (a part no service of this server reloads), and ``restartRequired`` is set when that
    list is not empty."""

    restart_required: bool = True
    applied: list[str] = Field(default_factory=empty_list)
    next_start: list[str] = Field(default_factory=empty_list)
    #: What the plugins brought that the session did not load (an extension refused), one line each.
    not_loaded: list[str] = Field(default_factory=empty_list)


class PluginsChanged(ServerNotification):
    """Plugins were installed, enabled, disabled, configured or removed (through this server, or
    by another process: ``elsewhere``) and the server reloaded them: clients read their command
    lists again (``commands/list``)."""

    method: Literal["plugins/changed"] = "plugins/changed"
    #: Ids of the plugins the change was about.
    plugins: list[str] = Field(default_factory=empty_list)
    applied: list[str] = Field(default_factory=empty_list)
    next_start: list[str] = Field(default_factory=empty_list)
    not_loaded: list[str] = Field(default_factory=empty_list)
    #: The change was made by another process (``roder plugin`` in another terminal).
    elsewhere: bool = False


class InstallResult(LiveChange):
    installed: InstalledPlugin


class InstallAllParams(ProtocolModel):
    #: A plugin name (search result); every marketplace's variant is installed.
    name: str
    #: Consent tokens by variant id (``name@marketplace``), from plugins/preview_install.
    consents: dict[str, str] = Field(default_factory=dict)


class SkippedVariant(ProtocolModel):
    id: str
    reason: str


class InstallAllResult(LiveChange):
    installed: list[InstalledPlugin]
    skipped: list[SkippedVariant] = Field(default_factory=empty_list)
    #: How same-named variants coexist (only one is enabled).
    note: str = ""


class ListInstalledResult(ProtocolModel):
    plugins: list[InstalledPlugin]
    problems: list[str] = Field(default_factory=empty_list)


class DisableResult(LiveChange):
    plugin: InstalledPlugin


class PluginResult(ProtocolModel):
    plugin: InstalledPlugin


class PluginOptionsParams(ProtocolModel):
    #: ``name@marketplace`` (or a name only one installed variant has).
    plugin: str
    #: Values of its ``userConfig`` options by key, over the stored ones (a list option takes a
    #: list or comma-separated text). Sensitive values are stored with Roder's keys, never echoed.
    options: dict[str, Any] = Field(default_factory=dict)


class EnableResult(LiveChange):
    plugin: InstalledPlugin
    #: Same-named variants that were enabled and are now disabled (only one variant is enabled).
    disabled_variants: list[str] = Field(default_factory=empty_list)


class ConfigureResult(LiveChange):
    plugin: InstalledPlugin


class ImportClaudeParams(ProtocolModel):
    #: Claude Code's folder; relative to the server's folder. Default: ``$CLAUDE_CONFIG_DIR`` or
    #: ``~/.claude`` of the server's environment.
    claude_dir: str | None = None


class ImportMarketplace(ProtocolModel):
    name: str
    #: Claude Code's clone of the catalog, added to Roder as a folder.
    location: str


class ImportCandidate(ProtocolModel):
    id: str
    version: str
    #: What it would run once enabled (hooks, servers, bin/, ``!`` lines).
    runs_code: list[str] = Field(default_factory=empty_list)
    #: Why it will not be imported (not enabled in Claude Code, already installed, files missing);
    #: empty: it will be imported and enabled.
    skip: str = ""


class ImportPreviewResult(ProtocolModel):
    claude_dir: str
    marketplaces: list[ImportMarketplace] = Field(default_factory=empty_list)
    plugins: list[ImportCandidate] = Field(default_factory=empty_list)
    problems: list[str] = Field(default_factory=empty_list)
    #: Pass to plugins/import_claude to import exactly what is listed here.
    consent: str


class ImportClaudeApplyParams(ImportClaudeParams):
    #: The preview's consent token.
    consent: str


class ImportClaudeResult(LiveChange):
    imported: list[str] = Field(default_factory=empty_list)
    #: Catalogs or plugins that could not be imported, one line each (the rest were).
    problems: list[str] = Field(default_factory=empty_list)


class UninstallParams(ProtocolModel):
    plugin: str
    #: Keep the plugin's data folder (CLAUDE_PLUGIN_DATA) and its options.
    keep_data: bool = False
    #: Also uninstall plugins that were installed only as dependencies and are now unused.
    prune: bool = False


class UninstallResult(LiveChange):
    uninstalled: str
    pruned: list[str] = Field(default_factory=empty_list)


MARKETPLACES_LIST = MethodSpec(
    "marketplaces/list",
    "marketplaces",
    NoParams,
    MarketplacesListResult,
    "Added plugin catalogs, plus those a trusted project declares.",
)

MARKETPLACES_INSTALL_DEFAULT = MethodSpec(
    "marketplaces/install_default",
    "marketplaces",
    InstallDefaultParams,
    MarketplaceResult,
    "Add Anthropic's official catalog (from a local copy with path; otherwise cloned from GitHub).",
)

MARKETPLACES_ADD = MethodSpec(
    "marketplaces/add",
    "marketplaces",
    MarketplaceAddParams,
    MarketplaceResult,
    "Add a catalog from a folder, a marketplace.json, a git URL, owner/repo or an https URL.",
)

MARKETPLACES_REMOVE = MethodSpec(
    "marketplaces/remove",
    "marketplaces",
    MarketplaceNameParams,
    MarketplaceRemoveResult,
    "Forget a catalog and uninstall every plugin installed from it.",
)

MARKETPLACES_REFRESH = MethodSpec(
    "marketplaces/refresh",
    "marketplaces",
    MarketplaceRefreshParams,
    MarketplacesListResult,
    "Re-read catalogs (git pull, download again, or re-read a folder).",
)

MARKETPLACES_SEARCH = MethodSpec(
    "marketplaces/search",
    "marketplaces",
    SearchParams,
    SearchResultList,
    "Search every catalog: one result per plugin name, with its variants (name@marketplace).",
)

MARKETPLACES_PLUGIN = MethodSpec(
    "marketplaces/plugin",
    "marketplaces",
    MarketplacePluginParams,
    MarketplacePluginResult,
    "One catalog entry in full (and the plugin's README when it is local).",
)

PLUGINS_PREVIEW_INSTALL = MethodSpec(
    "plugins/preview_install",
    "marketplaces",
    PluginParams,
    PreviewResult,
    "What a plugin contains and everything that would run code, before installing; returns a consent token.",
)

PLUGINS_INSTALL = MethodSpec(
    "plugins/install",
    "marketplaces",
    InstallParams,
    InstallResult,
    "Install and enable a plugin and its dependencies (one that runs code needs its preview's consent token; "
    "options answers its userConfig).",
)

PLUGINS_INSTALL_ALL_VARIANTS = MethodSpec(
    "plugins/install_all_variants",
    "marketplaces",
    InstallAllParams,
    InstallAllResult,
    "Install every marketplace's variant of a plugin name; the first is enabled, the others stay disabled.",
)

PLUGINS_LIST_INSTALLED = MethodSpec(
    "plugins/list_installed",
    "marketplaces",
    NoParams,
    ListInstalledResult,
    "Installed plugins with their state, components and problems.",
)

PLUGINS_DISABLE = MethodSpec(
    "plugins/disable",
    "marketplaces",
    PluginParams,
    DisableResult,
    "Disable an installed plugin (its hooks, servers and extensions stop from the next turn); refused while an enabled "
    "plugin depends on it.",
)

PLUGINS_UNINSTALL = MethodSpec(
    "plugins/uninstall",
    "marketplaces",
    UninstallParams,
    UninstallResult,
    "Remove an installed plugin, its cached copy and (unless keepData) its data folder and options; refused while "
    "another plugin depends on it (prune also removes unused automatic dependencies).",
)

PLUGINS_READ = MethodSpec(
    "plugins/read",
    "marketplaces",
    PluginParams,
    PluginResult,
    "One installed plugin (by id, or a name only one installed variant has): state, components, options and the "
    "required options still missing.",
)

PLUGINS_ENABLE = MethodSpec(
    "plugins/enable",
    "marketplaces",
    PluginOptionsParams,
    EnableResult,
    "Enable an installed plugin and its dependencies (options sets its userConfig first; a required option still "
    "without a value refuses); its same-named variants are disabled.",
)

PLUGINS_CONFIGURE = MethodSpec(
    "plugins/configure",
    "marketplaces",
    PluginOptionsParams,
    ConfigureResult,
    "Set an installed plugin's userConfig options (checked like at install); applies to sessions started afterwards.",
)

PLUGINS_PREVIEW_IMPORT_CLAUDE = MethodSpec(
    "plugins/preview_import_claude",
    "marketplaces",
    ImportClaudeParams,
    ImportPreviewResult,
    "What importing Claude Code's enabled plugins and cloned catalogs would do (reads only); returns a consent token.",
)

PLUGINS_IMPORT_CLAUDE = MethodSpec(
    "plugins/import_claude",
    "marketplaces",
    ImportClaudeApplyParams,
    ImportClaudeResult,
    "Import what the preview listed (needs its consent token): copies each plugin from Claude Code's cache, enabled, "
    "and adds its catalogs; Claude Code's files are only read.",
)

_SPECS: list[MethodSpec[Any, Any]] = [
    MARKETPLACES_LIST,
    MARKETPLACES_INSTALL_DEFAULT,
    MARKETPLACES_ADD,
    MARKETPLACES_REMOVE,
    MARKETPLACES_REFRESH,
    MARKETPLACES_SEARCH,
    MARKETPLACES_PLUGIN,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_INSTALL,
    PLUGINS_INSTALL_ALL_VARIANTS,
    PLUGINS_LIST_INSTALLED,
    PLUGINS_DISABLE,
    PLUGINS_UNINSTALL,
    PLUGINS_READ,
    PLUGINS_ENABLE,
    PLUGINS_CONFIGURE,
    PLUGINS_PREVIEW_IMPORT_CLAUDE,
    PLUGINS_IMPORT_CLAUDE,
]
for _spec in _SPECS:
    register(_spec)
register_notification(PluginsChanged)
