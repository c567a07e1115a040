"""marketplaces/* and plugins/*: catalogs, search, preview, install, enable, configure, disable,
uninstall, and importing Claude Code's plugins. ``roder plugin`` is a client of these methods.

The work is file and process I/O (git, downloads, copies), so each call runs in a worker thread.
Every change (install, enable, disable, configure, uninstall, import) ends in one step,
``_applied``: ``Runtime.plugins_changed`` hands the new set of enabled plugins to every service
that reads them, so commands, skills, agents, output styles and MCP servers apply from the next
turn; what only loads when a runtime starts (hooks, LSP servers, Roder extensions) is named in
``nextStart``. A failed operation answers -32000 with the reason; nothing is left half-installed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from roder_core.plugins.claude_import import claude_dir
from roder_core.plugins.fetch import FetchError
from roder_core.plugins.manifest import ManifestError
from roder_core.plugins.service import PluginService
from roder_core.plugins.store import PluginError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import RUNTIME_ERROR, RpcError
from roder_core.server.plugin_watch import PluginWatch
from roder_core.server.protocol import NoParams, from_domain
from roder_core.server.protocol_plugins import (
    MARKETPLACES_ADD,
    MARKETPLACES_INSTALL_DEFAULT,
    MARKETPLACES_LIST,
    MARKETPLACES_PLUGIN,
    MARKETPLACES_REFRESH,
    MARKETPLACES_REMOVE,
    MARKETPLACES_SEARCH,
    PLUGINS_CONFIGURE,
    PLUGINS_DISABLE,
    PLUGINS_ENABLE,
    PLUGINS_IMPORT_CLAUDE,
    PLUGINS_INSTALL,
    PLUGINS_INSTALL_ALL_VARIANTS,
    PLUGINS_LIST_INSTALLED,
    PLUGINS_PREVIEW_IMPORT_CLAUDE,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_READ,
    PLUGINS_UNINSTALL,
    ConfigureResult,
    DisableResult,
    EnableResult,
    ImportClaudeApplyParams,
    ImportClaudeParams,
    ImportClaudeResult,
    ImportPreviewResult,
    InstallAllParams,
    InstallAllResult,
    InstallDefaultParams,
    InstalledPlugin,
    InstallParams,
    InstallResult,
    ListInstalledResult,
    LiveChange,
    MarketplaceAddParams,
    MarketplaceInfo,
    MarketplaceNameParams,
    MarketplacePluginParams,
    MarketplacePluginResult,
    MarketplaceRefreshParams,
    MarketplaceRemoveResult,
    MarketplaceResult,
    MarketplacesListResult,
    PluginOptionsParams,
    PluginParams,
    PluginResult,
    PluginsChanged,
    PreviewComponents,
    PreviewResult,
    SearchParams,
    SearchResultList,
    UninstallParams,
    UninstallResult,
)

T = TypeVar("T")
L = TypeVar("L", bound=LiveChange)

log = logging.getLogger(__name__)

#: The parts of a plugin a running session may take: (field of its components, field of its
#: layout that a service must reload, or None for what is read at each use, what the user reads).
#: A part no service of the runtime reloads waits for the next start.
_PARTS = (
    ("commands", None, "commands"),
    ("skills", "skills", "skills"),
    ("agents", None, "agents"),
    ("hooks", "hooks", "hooks"),
    ("mcp_servers", "mcp_servers", "MCP servers"),
    ("lsp_servers", "lsp_servers", "LSP servers"),
    ("roder_extensions", "process_extensions", "Roder extensions"),
    ("output_styles", "output_styles", "output styles"),
    ("monitors", "monitors", "monitors"),
    # Not reloaded: the commands' PATH is set when a thread's brokers are made, the theme list
    # when the app starts.
    ("bin", "bin", "bin/ commands"),
    ("themes", "themes", "themes"),
)


def _service(app: Dispatcher) -> PluginService:
    options = app.runtime.options
    return PluginService(options.paths, options.cwd, options.trusted, options.config.model_extra)


async def _run(work: Callable[[], T]) -> T:
    try:
        return await asyncio.to_thread(work)
    except (PluginError, FetchError, ManifestError) as exc:
        raise RpcError(RUNTIME_ERROR, str(exc)) from None


def live_parts(components: PreviewComponents, live: frozenset[str]) -> tuple[list[str], list[str]]:
    """The parts a plugin has that a running session with ``live`` (``Runtime.live_plugin_parts``)
    applies now, and those that wait for the next start."""
    now: list[str] = []
    later: list[str] = []
    for field, part, label in _PARTS:
        if getattr(components, field):
            (now if part is None or part in live else later).append(label)
    return now, later


async def apply_change(
    app: Dispatcher, plugins: list[InstalledPlugin], *, elsewhere: bool = False, gone: list[str] | None = None
) -> PluginsChanged:
    """The one step after every plugin change, made through this server or by another process
    (``server.plugin_watch``): the runtime reloads its plugins and clients hear which parts of
    ``plugins`` applied, which wait for the next start and what was not loaded (the
    notification, also returned)."""
    watch = app.services.get(PluginWatch.KEY)
    looked = watch.look() if isinstance(watch, PluginWatch) else None
    for problem in await app.runtime.plugins_changed():
        log.warning("reloading plugins: %s", problem)
    if isinstance(watch, PluginWatch) and looked is not None:
        watch.seen(looked)  # this change is applied: the watcher must not apply it a second time
    live = app.runtime.live_plugin_parts()
    parts = [live_parts(p.components, live) for p in plugins]
    applied = [label for *_, label in _PARTS if any(label in now for now, _ in parts)]
    waiting = [label for *_, label in _PARTS if any(label in later for _, later in parts)]
    ids = [p.id for p in plugins] + (gone or [])
    refused = list(app.runtime.plugin_refusals)
    changed = PluginsChanged(plugins=ids, applied=applied, next_start=waiting, not_loaded=refused, elsewhere=elsewhere)
    app.broadcast(changed)
    return changed


async def changed_elsewhere(app: Dispatcher, ids: list[str]) -> None:
    """Another process changed the plugins ``ids`` (``server.plugin_watch``): apply it as a
    change made here. A removed plugin is named without parts (its files are gone)."""
    service = _service(app)
    listing = from_domain(ListInstalledResult, await _run(service.list_installed))
    rows = [row for row in listing.plugins if row.id in ids]
    gone = [identifier for identifier in ids if identifier not in {row.id for row in rows}]
    await apply_change(app, rows, elsewhere=True, gone=gone)


H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


def _changes(handler: H) -> H:
    """A method that changes the plugins, from its first write to ``_applied``, holds the watch
    of plugin files (``server.plugin_watch``) off: the watcher never takes this server's own
    change for one made elsewhere, nor reloads in the middle of it."""

    @functools.wraps(handler)
    async def changing(app: Dispatcher, params: Any, ctx: CallContext) -> Any:
        watch = app.services.get(PluginWatch.KEY)
        if not isinstance(watch, PluginWatch):
            return await handler(app, params, ctx)
        async with watch.lock:
            return await handler(app, params, ctx)

    return cast(H, changing)


async def _applied(app: Dispatcher, result: L, plugins: list[InstalledPlugin]) -> L:
    """A change made through this server: ``apply_change``, told in the result too."""
    watch = app.services.get(PluginWatch.KEY)
    if isinstance(watch, PluginWatch) and not watch.lock.locked():
        raise RuntimeError("a method changing plugins must be decorated with @_changes (the watch would race it)")
    changed = await apply_change(app, plugins)
    result.applied, result.next_start, result.not_loaded = changed.applied, changed.next_start, changed.not_loaded
    result.restart_required = bool(result.next_start)
    return result


@handles(MARKETPLACES_LIST)
async def marketplaces_list(app: Dispatcher, params: NoParams, ctx: CallContext) -> MarketplacesListResult:
    rows = await _run(_service(app).list_marketplaces)
    return MarketplacesListResult(marketplaces=[from_domain(MarketplaceInfo, r) for r in rows])


@handles(MARKETPLACES_INSTALL_DEFAULT)
async def marketplaces_install_default(app: Dispatcher, params: InstallDefaultParams, ctx: CallContext) -> MarketplaceResult:
    row = await _run(lambda: _service(app).install_default(params.path))
    return MarketplaceResult(marketplace=from_domain(MarketplaceInfo, row))


@handles(MARKETPLACES_ADD)
async def marketplaces_add(app: Dispatcher, params: MarketplaceAddParams, ctx: CallContext) -> MarketplaceResult:
    row = await _run(lambda: _service(app).add(params.source))
    return MarketplaceResult(marketplace=from_domain(MarketplaceInfo, row))


@handles(MARKETPLACES_REMOVE)
async def marketplaces_remove(app: Dispatcher, params: MarketplaceNameParams, ctx: CallContext) -> MarketplaceRemoveResult:
    return from_domain(MarketplaceRemoveResult, await _run(lambda: _service(app).remove(params.name)))


@handles(MARKETPLACES_REFRESH)
async def marketplaces_refresh(app: Dispatcher, params: MarketplaceRefreshParams, ctx: CallContext) -> MarketplacesListResult:
    rows = await _run(lambda: _service(app).refresh(params.name))
    return MarketplacesListResult(marketplaces=[from_domain(MarketplaceInfo, r) for r in rows])


@handles(MARKETPLACES_SEARCH)
async def marketplaces_search(app: Dispatcher, params: SearchParams, ctx: CallContext) -> SearchResultList:
    return from_domain(SearchResultList, await _run(lambda: _service(app).search(params.query, params.limit)))


@handles(MARKETPLACES_PLUGIN)
async def marketplaces_plugin(app: Dispatcher, params: MarketplacePluginParams, ctx: CallContext) -> MarketplacePluginResult:
    return from_domain(MarketplacePluginResult, await _run(lambda: _service(app).plugin(params.plugin)))


@handles(PLUGINS_PREVIEW_INSTALL)
async def plugins_preview_install(app: Dispatcher, params: PluginParams, ctx: CallContext) -> PreviewResult:
    service = _service(app)

    def preview() -> PreviewResult:
        found, data = service.preview(params.plugin)
        service.store.discard(found)  # the install fetches again; a preview leaves nothing behind
        return from_domain(PreviewResult, data)

    return await _run(preview)


@handles(PLUGINS_INSTALL)
@_changes
async def plugins_install(app: Dispatcher, params: InstallParams, ctx: CallContext) -> InstallResult:
    row = await _run(lambda: _service(app).install(params.plugin, params.consent, options=params.options))
    installed = from_domain(InstalledPlugin, row)
    return await _applied(app, InstallResult(installed=installed), [installed])


@handles(PLUGINS_INSTALL_ALL_VARIANTS)
@_changes
async def plugins_install_all_variants(app: Dispatcher, params: InstallAllParams, ctx: CallContext) -> InstallAllResult:
    result = from_domain(InstallAllResult, await _run(lambda: _service(app).install_all(params.name, params.consents)))
    return await _applied(app, result, result.installed)


@handles(PLUGINS_LIST_INSTALLED)
async def plugins_list_installed(app: Dispatcher, params: NoParams, ctx: CallContext) -> ListInstalledResult:
    return from_domain(ListInstalledResult, await _run(_service(app).list_installed))


@handles(PLUGINS_DISABLE)
@_changes
async def plugins_disable(app: Dispatcher, params: PluginParams, ctx: CallContext) -> DisableResult:
    row = await _run(lambda: _service(app).set_enabled(params.plugin, False))
    plugin = from_domain(InstalledPlugin, row)
    return await _applied(app, DisableResult(plugin=plugin), [plugin])


@handles(PLUGINS_UNINSTALL)
@_changes
async def plugins_uninstall(app: Dispatcher, params: UninstallParams, ctx: CallContext) -> UninstallResult:
    service = _service(app)
    before = from_domain(InstalledPlugin, await _run(lambda: service.read(params.plugin)))
    removed, pruned = await _run(lambda: service.uninstall(params.plugin, params.keep_data, prune=params.prune))
    return await _applied(app, UninstallResult(uninstalled=removed, pruned=pruned), [before])


@handles(PLUGINS_READ)
async def plugins_read(app: Dispatcher, params: PluginParams, ctx: CallContext) -> PluginResult:
    return PluginResult(plugin=from_domain(InstalledPlugin, await _run(lambda: _service(app).read(params.plugin))))


@handles(PLUGINS_ENABLE)
@_changes
async def plugins_enable(app: Dispatcher, params: PluginOptionsParams, ctx: CallContext) -> EnableResult:
    row, switched_off = await _run(lambda: _service(app).enable(params.plugin, params.options))
    plugin = from_domain(InstalledPlugin, row)
    return await _applied(app, EnableResult(plugin=plugin, disabled_variants=switched_off), [plugin])


@handles(PLUGINS_CONFIGURE)
@_changes
async def plugins_configure(app: Dispatcher, params: PluginOptionsParams, ctx: CallContext) -> ConfigureResult:
    row = await _run(lambda: _service(app).configure(params.plugin, params.options))
    plugin = from_domain(InstalledPlugin, row)
    return await _applied(app, ConfigureResult(plugin=plugin), [plugin])


def _claude_dir(app: Dispatcher, params: ImportClaudeParams) -> Path:
    """The folder asked for (relative to the server's folder), or Claude Code's own by the
    server's environment."""
    options = app.runtime.options
    if params.claude_dir is None:
        return claude_dir(options.env)
    return options.cwd / Path(params.claude_dir).expanduser()


@handles(PLUGINS_PREVIEW_IMPORT_CLAUDE)
async def plugins_preview_import_claude(app: Dispatcher, params: ImportClaudeParams, ctx: CallContext) -> ImportPreviewResult:
    root = _claude_dir(app, params)
    return from_domain(ImportPreviewResult, await _run(lambda: _service(app).preview_import(root)))


@handles(PLUGINS_IMPORT_CLAUDE)
@_changes
async def plugins_import_claude(app: Dispatcher, params: ImportClaudeApplyParams, ctx: CallContext) -> ImportClaudeResult:
    root = _claude_dir(app, params)
    service = _service(app)
    result = from_domain(ImportClaudeResult, await _run(lambda: service.import_claude(root, params.consent)))
    rows = await _run(lambda: [service.read(identifier) for identifier in result.imported])
    imported = [from_domain(InstalledPlugin, row) for row in rows]
    return await _applied(app, result, imported)
