"""``roder plugin ...``: Claude Code plugins and marketplaces from the command line.

    roder plugin marketplace add SOURCE | add-default [--path DIR] | list | remove NAME | refresh [NAME]
    roder plugin search [QUERY] | preview PLUGIN | install PLUGIN [--yes] [--option KEY=VALUE ...] | list
    roder plugin enable PLUGIN [--option KEY=VALUE ...] | disable PLUGIN | configure PLUGIN --option KEY=VALUE ...
    roder plugin uninstall PLUGIN [--keep-data] [--prune] | import-claude [--yes]

Installing shows everything the plugin (and each dependency it brings) would run and asks first
(``--yes`` accepts without asking; with no terminal to ask on, nothing that runs code is
installed without it). A plugin's ``userConfig`` options are given with ``--option``; on a
terminal, required ones not given are asked for (sensitive ones without echo). Changes apply to
sessions started afterwards. Exit codes: 0 done, 1 failed (the reason on stderr), 2 declined.

Each subcommand is a client of the ``marketplaces/*`` and ``plugins/*`` control-plane methods
(``client.call(SPEC, params)`` through the in-process client of ``commands.control``), the same
methods an app-server client calls: what ``--json`` prints is what the method answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from roder_core.errors import RoderError
from roder_core.server.app_client import AppClient
from roder_core.server.errors import RpcError
from roder_core.server.protocol_plugins import (
    MARKETPLACES_ADD,
    MARKETPLACES_INSTALL_DEFAULT,
    MARKETPLACES_LIST,
    MARKETPLACES_REFRESH,
    MARKETPLACES_REMOVE,
    MARKETPLACES_SEARCH,
    PLUGINS_CONFIGURE,
    PLUGINS_DISABLE,
    PLUGINS_ENABLE,
    PLUGINS_IMPORT_CLAUDE,
    PLUGINS_INSTALL,
    PLUGINS_LIST_INSTALLED,
    PLUGINS_PREVIEW_IMPORT_CLAUDE,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_READ,
    PLUGINS_UNINSTALL,
    ImportClaudeApplyParams,
    ImportClaudeParams,
    InstallDefaultParams,
    InstallParams,
    MarketplaceAddParams,
    MarketplaceInfo,
    MarketplaceNameParams,
    MarketplaceRefreshParams,
    PluginOption,
    PluginOptionsParams,
    PluginParams,
    PreviewComponents,
    PreviewResult,
    SearchParams,
    UninstallParams,
)
from roder_tui.commands.control import local_client
from roder_tui.terminal_text import ask
from roder_tui.wording import plural

Action = Callable[[AppClient, argparse.Namespace], Awaitable[int]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    market = sub.add_parser("marketplace", help="add, list, remove or refresh plugin catalogs")
    msub = market.add_subparsers(dest="market_action", required=True)
    add = msub.add_parser("add", help="add a catalog: a folder, a marketplace.json, a git URL, owner/repo or an https URL")
    add.add_argument("source")
    default = msub.add_parser("add-default", help="add Anthropic's official catalog (clones from GitHub without --path)")
    default.add_argument("--path", help="a local copy of the official catalog (offline)")
    listing = msub.add_parser("list", help="added catalogs")
    listing.add_argument("--json", action="store_true")
    remove = msub.add_parser("remove", help="forget a catalog and uninstall its plugins")
    remove.add_argument("name")
    refresh = msub.add_parser("refresh", help="update catalogs (git pull, download again)")
    refresh.add_argument("name", nargs="?")
    search = sub.add_parser("search", help="search every catalog (one line per plugin, with its variants)")
    search.add_argument("query", nargs="*")
    search.add_argument("--json", action="store_true")
    preview = sub.add_parser("preview", help="show what a plugin contains and runs, without installing")
    preview.add_argument("plugin", help="name@marketplace (or a name only one catalog offers)")
    preview.add_argument("--json", action="store_true")
    install = sub.add_parser("install", help="install and enable a plugin (shows what it runs and asks)")
    install.add_argument("plugin")
    install.add_argument("--yes", "-y", action="store_true", help="accept what it runs without asking")
    _option_argument(install)
    installed = sub.add_parser("list", help="installed plugins")
    installed.add_argument("--json", action="store_true")
    enable = sub.add_parser("enable", help="enable an installed plugin (and its dependencies)")
    enable.add_argument("plugin")
    _option_argument(enable)
    sub.add_parser("disable", help="disable an installed plugin").add_argument("plugin")
    configure = sub.add_parser("configure", help="set an installed plugin's options (its userConfig)")
    configure.add_argument("plugin")
    _option_argument(configure)
    uninstall = sub.add_parser("uninstall", help="remove an installed plugin and its data")
    uninstall.add_argument("plugin")
    uninstall.add_argument("--prune", action="store_true", help="also remove dependencies nothing else needs")
    uninstall.add_argument("--keep-data", action="store_true", help="keep its data folder")
    imports = sub.add_parser("import-claude", help="import the plugins enabled in Claude Code (reads ~/.claude only)")
    imports.add_argument("--claude-dir", type=Path, help="Claude Code's folder (default: $CLAUDE_CONFIG_DIR or ~/.claude)")
    imports.add_argument("--yes", "-y", action="store_true", help="import without asking")


def _option_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a userConfig option of the plugin (repeatable; a list option takes comma-separated values)",
    )


def _options(pairs: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise RoderError(f"--option {pair!r}: write KEY=VALUE")  # the command line, not the config
        found[key.strip()] = value
    return found


def _ask_options(specs: list[PluginOption], given: dict[str, Any]) -> dict[str, Any]:
    """On a terminal, ask for required options that were not given (sensitive ones unechoed)."""
    if not sys.stdin.isatty():
        return given
    answers = dict(given)
    for spec in specs:
        if spec.key in answers or not spec.required or spec.default is not None:
            continue
        question = f"{spec.title or spec.key}" + (f" ({spec.description})" if spec.description else "")
        try:
            value = ask(f"{question}: ", hidden=spec.sensitive)
        except EOFError:
            break
        if value:
            answers[spec.key] = value
    return answers


def _confirm(question: str, assume_yes: bool) -> bool:
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        print(f"{question} (no terminal to ask on: pass --yes to accept)", file=sys.stderr)
        return False
    try:
        return ask(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _print_components(components: PreviewComponents) -> None:
    for values, label in ((components.commands, "commands"), (components.skills, "skills"), (components.agents, "agents")):
        if values:
            print(f"  {label}: {', '.join(values)}")
    for servers, label in ((components.mcp_servers, "MCP servers"), (components.lsp_servers, "LSP servers")):
        for server in servers:
            print(f"  {label}: {server.get('id', server['name'])}  {server['target']}")
    if components.unsupported:
        print(f"  not used by Roder: {', '.join(components.unsupported)}")


def _print_preview(data: PreviewResult) -> None:
    plugin = data.plugin
    print(f"{plugin.id}  version {data.version}  ({plugin.source_description})")
    if plugin.description:
        print(f"  {plugin.description}")
    if data.components_known:
        _print_components(data.components)
    else:
        print("  components: known once the command source has run")
    for dependency in data.dependencies:
        print(f"  installs dependency {dependency.id} {dependency.version}")
    for option in data.user_config:
        need = "required" if option.required else "optional"
        print(f"  option {option.key} ({option.type}, {need}{', sensitive' if option.sensitive else ''})")
    if data.runs_code:
        print("Runs code while enabled:")
        for line in data.runs_code:
            print(f"  - {line}")
    else:
        print("Runs no code of its own (commands, skills and agents only).")
    for problem in data.problems:
        print(f"  ! {problem}")


def _market_line(row: MarketplaceInfo) -> str:
    source = row.source
    where = source.get("path") or source.get("url") or source.get("repo") or ""
    count = plural(row.plugin_count, "plugin") if row.added else "declared by this project, not added"
    return f"{row.name}  {count}  ({source.get('source')} {where})"


def _print_market(row: MarketplaceInfo, prefix: str = "") -> None:
    print(prefix + _market_line(row))
    for problem in row.problems:
        print(f"  ! {problem}")


async def _marketplace(client: AppClient, args: argparse.Namespace) -> int:
    action = args.market_action
    if action == "list":
        rows = (await client.call(MARKETPLACES_LIST)).marketplaces
        if args.json:
            print(json.dumps([row.wire() for row in rows], indent=2))
            return 0
        if not rows:
            print("No marketplaces. Add one: roder plugin marketplace add SOURCE (or add-default).")
        for row in rows:
            _print_market(row)
        return 0
    if action in ("add", "add-default"):
        added = await (
            client.call(MARKETPLACES_ADD, MarketplaceAddParams(source=args.source))
            if action == "add"
            else client.call(MARKETPLACES_INSTALL_DEFAULT, InstallDefaultParams(path=args.path))
        )
        _print_market(added.marketplace, "added ")
        return 0
    if action == "remove":
        removed = await client.call(MARKETPLACES_REMOVE, MarketplaceNameParams(name=args.name))
        print(f"removed {args.name}" + (f"; uninstalled {', '.join(removed.uninstalled)}" if removed.uninstalled else ""))
        return 0
    for row in (await client.call(MARKETPLACES_REFRESH, MarketplaceRefreshParams(name=args.name))).marketplaces:
        print(f"refreshed {_market_line(row)}")
    return 0


async def _preview(client: AppClient, args: argparse.Namespace) -> int:
    data = await client.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin=args.plugin))
    print(json.dumps(data.wire(), indent=2)) if args.json else _print_preview(data)
    return 0


async def _install(client: AppClient, args: argparse.Namespace) -> int:
    data = await client.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin=args.plugin))
    _print_preview(data)
    consent = None
    if data.runs_code:
        if not _confirm(f"Install {data.plugin.id} and let it run the above?", args.yes):
            print("not installed", file=sys.stderr)
            return 2
        consent = data.consent
    options = _ask_options(data.user_config, _options(args.option))
    # The previewed variant's id: the install is of exactly what was shown and accepted.
    row = (await client.call(PLUGINS_INSTALL, InstallParams(plugin=data.plugin.id, consent=consent, options=options))).installed
    for dependency in data.dependencies:
        print(f"installed dependency {dependency.id} {dependency.version}")
    print(f"installed {row.id} {row.version} (enabled; new sessions load it, and /plugin applies changes in a running one)")
    for note in row.problems:
        print(f"  ! {note}")
    return 0


async def _list(client: AppClient, args: argparse.Namespace) -> int:
    data = await client.call(PLUGINS_LIST_INSTALLED)
    if args.json:
        print(json.dumps(data.wire(), indent=2))
        return 0
    if not data.plugins:
        print("No plugins installed. Find some: roder plugin search QUERY")
    for row in data.plugins:
        state = "enabled" if row.enabled else "disabled"
        print(f"{row.id}  {row.version}  {state}{'' if row.active or not row.enabled else ' (not loaded here)'}")
        _print_components(row.components)
        for problem in row.problems:
            print(f"  ! {problem}")
    for problem in data.problems:
        print(f"! {problem}")
    return 0


async def _search(client: AppClient, args: argparse.Namespace) -> int:
    data = await client.call(MARKETPLACES_SEARCH, SearchParams(query=" ".join(args.query)))
    if args.json:
        print(json.dumps(data.wire(), indent=2))
        return 0
    if not data.results:
        added = [m for m in (await client.call(MARKETPLACES_LIST)).marketplaces if m.added]
        print("No plugins match." if added else "No marketplaces yet: roder plugin marketplace add-default")
    for result in data.results:
        print(f"{result.name}  {' '.join(result.description.split())[:90]}")
        for variant in result.variants:
            mark = " [installed]" if variant.installed else ""
            print(f"  {variant.id}  {variant.version or '-'}  {variant.source_description}{mark}")
    for problem in data.problems:
        print(f"! {problem}", file=sys.stderr)
    return 0


async def _enable(client: AppClient, args: argparse.Namespace) -> int:
    given = _options(args.option)
    if sys.stdin.isatty():  # ask for required options that have no value yet
        missing = (await client.call(PLUGINS_READ, PluginParams(plugin=args.plugin))).plugin.missing_options
        given = _ask_options(missing, given)
    row = (await client.call(PLUGINS_ENABLE, PluginOptionsParams(plugin=args.plugin, options=given))).plugin
    print(f"enabled {row.id} (applies to sessions started from now on)")
    return 0


async def _disable(client: AppClient, args: argparse.Namespace) -> int:
    row = (await client.call(PLUGINS_DISABLE, PluginParams(plugin=args.plugin))).plugin
    print(f"disabled {row.id} (applies to sessions started from now on)")
    return 0


async def _configure(client: AppClient, args: argparse.Namespace) -> int:
    await client.call(PLUGINS_CONFIGURE, PluginOptionsParams(plugin=args.plugin, options=_options(args.option)))
    print(f"configured {args.plugin} (applies to sessions started from now on)")
    return 0


async def _uninstall(client: AppClient, args: argparse.Namespace) -> int:
    params = UninstallParams(plugin=args.plugin, keep_data=args.keep_data, prune=args.prune)
    done = await client.call(PLUGINS_UNINSTALL, params)
    print(f"uninstalled {done.uninstalled}" + (f"; pruned {', '.join(done.pruned)}" if done.pruned else ""))
    return 0


async def _import(client: AppClient, args: argparse.Namespace) -> int:
    where = ImportClaudeParams(claude_dir=str(args.claude_dir) if args.claude_dir else None)
    found = await client.call(PLUGINS_PREVIEW_IMPORT_CLAUDE, where)
    todo = [p for p in found.plugins if not p.skip]
    print(f"From {found.claude_dir}:")
    for market in found.marketplaces:
        print(f"  marketplace {market.name}  ({market.location})")
    for item in found.plugins:
        print(f"  {item.id}  {item.version}  " + (f"skipped: {item.skip}" if item.skip else "will be enabled"))
        for line in item.runs_code if not item.skip else []:
            print(f"    runs: {line}")
    for problem in found.problems:
        print(f"  ! {problem}")
    if not todo and not found.marketplaces:
        print("Nothing to import.")
        return 0
    if not _confirm(f"Import {plural(len(todo), 'plugin')} and {plural(len(found.marketplaces), 'marketplace')}?", args.yes):
        print("nothing imported", file=sys.stderr)
        return 2
    done = await client.call(PLUGINS_IMPORT_CLAUDE, ImportClaudeApplyParams(claude_dir=found.claude_dir, consent=found.consent))
    print(f"imported {plural(len(done.imported), 'plugin')}: {', '.join(done.imported) or 'none'}")
    for problem in done.problems:
        print(f"! {problem}", file=sys.stderr)
    return 0 if not done.problems else 1


ACTIONS: dict[str, Action] = {
    "marketplace": _marketplace,
    "search": _search,
    "preview": _preview,
    "install": _install,
    "list": _list,
    "enable": _enable,
    "disable": _disable,
    "configure": _configure,
    "uninstall": _uninstall,
    "import-claude": _import,
}


async def _session(args: argparse.Namespace) -> int:
    async with local_client() as client:
        return await ACTIONS[args.action](client, args)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_session(args))
    except RpcError as exc:
        print(f"roder plugin: {exc.message}", file=sys.stderr)
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        print(f"roder plugin: {exc}", file=sys.stderr)
    return 1
