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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from roder_core.errors import RoderError
from roder_core.kernel.distribution import make_host
from roder_core.plugins import claude_import
from roder_core.plugins.fetch import FetchError
from roder_core.plugins.manifest import ManifestError
from roder_core.plugins.service import PluginService
from roder_core.settings.config import ConfigError


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


def _options(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--option {pair!r}: write KEY=VALUE")
        found[key.strip()] = value
    return found


def _ask_options(specs: list[dict[str, Any]], given: dict[str, str]) -> dict[str, str]:
    """On a terminal, ask for required options that were not given (sensitive ones unechoed)."""
    if not sys.stdin.isatty():
        return given
    import getpass

    answers = dict(given)
    for spec in specs:
        if spec["key"] in answers or not spec.get("required") or spec.get("default") is not None:
            continue
        question = f"{spec.get('title') or spec['key']}" + (f" ({spec['description']})" if spec.get("description") else "")
        try:
            value = getpass.getpass(f"{question}: ") if spec.get("sensitive") else input(f"{question}: ")
        except EOFError:
            break
        if value:
            answers[spec["key"]] = value
    return answers


def _confirm(question: str, assume_yes: bool) -> bool:
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        print(f"{question} (no terminal to ask on: pass --yes to accept)", file=sys.stderr)
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _print_components(components: dict[str, Any]) -> None:
    for key, label in (("commands", "commands"), ("skills", "skills"), ("agents", "agents")):
        if components.get(key):
            print(f"  {label}: {', '.join(components[key])}")
    for key, label in (("mcpServers", "MCP servers"), ("lspServers", "LSP servers")):
        for server in components.get(key) or []:
            print(f"  {label}: {server.get('id', server['name'])}  {server['target']}")
    if components.get("unsupported"):
        print(f"  not used by Roder: {', '.join(components['unsupported'])}")


def _print_preview(data: dict[str, Any]) -> None:
    plugin = data["plugin"]
    print(f"{plugin['id']}  version {data['version']}  ({plugin['sourceDescription']})")
    if plugin.get("description"):
        print(f"  {plugin['description']}")
    if data["componentsKnown"]:
        _print_components(data["components"])
    else:
        print("  components: known once the command source has run")
    for dependency in data.get("dependencies") or []:
        print(f"  installs dependency {dependency['id']} {dependency['version']}")
    for option in data.get("userConfig") or []:
        need = "required" if option.get("required") else "optional"
        print(f"  option {option['key']} ({option['type']}, {need}{', sensitive' if option.get('sensitive') else ''})")
    if data["runsCode"]:
        print("Runs code while enabled:")
        for line in data["runsCode"]:
            print(f"  - {line}")
    else:
        print("Runs no code of its own (commands, skills and agents only).")
    for problem in data["problems"]:
        print(f"  ! {problem}")


def _market_line(row: dict[str, Any]) -> str:
    source = row["source"]
    where = source.get("path") or source.get("url") or source.get("repo") or ""
    count = f"{row.get('pluginCount', 0)} plugins" if row.get("added", True) else "declared by this project, not added"
    return f"{row['name']}  {count}  ({source.get('source')} {where})"


def _marketplace(service: PluginService, args: argparse.Namespace) -> int:
    action = args.market_action
    if action == "list":
        rows = service.list_marketplaces()
        if args.json:
            print(json.dumps(rows, indent=2))
        elif not rows:
            print("No marketplaces. Add one: roder plugin marketplace add SOURCE (or add-default).")
        for row in [] if args.json else rows:
            print(_market_line(row))
            for problem in row.get("problems") or []:
                print(f"  ! {problem}")
        return 0
    if action in ("add", "add-default"):
        row = service.add(args.source) if action == "add" else service.install_default(args.path)
        print(f"added {_market_line(row)}")
        for problem in row.get("problems") or []:
            print(f"  ! {problem}")
        return 0
    if action == "remove":
        result = service.remove(args.name)
        print(f"removed {args.name}" + (f"; uninstalled {', '.join(result['uninstalled'])}" if result["uninstalled"] else ""))
        return 0
    for row in service.refresh(args.name):
        print(f"refreshed {_market_line(row)}")
    return 0


def _install(service: PluginService, args: argparse.Namespace) -> int:
    preview, data = service.preview(args.plugin)
    _print_preview(data)
    consent = None
    if data["runsCode"]:
        if not _confirm(f"Install {data['plugin']['id']} and let it run the above?", args.yes):
            service.store.discard(preview)
            print("not installed", file=sys.stderr)
            return 2
        consent = preview.consent
    options = _ask_options(data.get("userConfig") or [], _options(args.option))
    row = service.install(args.plugin, consent, preview, options)
    for dependency in data.get("dependencies") or []:
        print(f"installed dependency {dependency['id']} {dependency['version']}")
    print(f"installed {row['id']} {row['version']} (enabled; start a new session to use it)")
    for note in row["problems"]:
        print(f"  ! {note}")
    return 0


def _list(service: PluginService, args: argparse.Namespace) -> int:
    data = service.list_installed()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    if not data["plugins"]:
        print("No plugins installed. Find some: roder plugin search QUERY")
    for row in data["plugins"]:
        state = "enabled" if row["enabled"] else "disabled"
        print(f"{row['id']}  {row['version']}  {state}{'' if row['active'] or not row['enabled'] else ' (not loaded here)'}")
        _print_components(row["components"])
        for problem in row["problems"]:
            print(f"  ! {problem}")
    for problem in data["problems"]:
        print(f"! {problem}")
    return 0


def _search(service: PluginService, args: argparse.Namespace) -> int:
    data = service.search(" ".join(args.query))
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    if not data["results"]:
        print("No plugins match." if service.store.known() else "No marketplaces yet: roder plugin marketplace add-default")
    for result in data["results"]:
        print(f"{result['name']}  {' '.join(result['description'].split())[:90]}")
        for variant in result["variants"]:
            mark = " [installed]" if variant["installed"] else ""
            print(f"  {variant['id']}  {variant['version'] or '-'}  {variant['sourceDescription']}{mark}")
    for problem in data["problems"]:
        print(f"! {problem}", file=sys.stderr)
    return 0


def _import(service: PluginService, args: argparse.Namespace) -> int:
    root = args.claude_dir or claude_import.claude_dir()
    found = claude_import.plan(service.store, root)
    todo = [p for p in found.plugins if not p.skip]
    print(f"From {root}:")
    for name, location in found.marketplaces.items():
        print(f"  marketplace {name}  ({location})")
    for item in found.plugins:
        print(f"  {item.id}  {item.version}  " + (f"skipped: {item.skip}" if item.skip else "will be enabled"))
        for line in item.runs_code if not item.skip else []:
            print(f"    runs: {line}")
    for problem in found.problems:
        print(f"  ! {problem}")
    if not todo and not found.marketplaces:
        print("Nothing to import.")
        return 0
    if not _confirm(f"Import {len(todo)} plugin(s) and {len(found.marketplaces)} marketplace(s)?", args.yes):
        print("nothing imported", file=sys.stderr)
        return 2
    imported, problems = claude_import.apply(service.store, found)
    print(f"imported {len(imported)} plugin(s): {', '.join(imported) or 'none'}")
    for problem in problems:
        print(f"! {problem}", file=sys.stderr)
    return 0 if not problems else 1


def run(args: argparse.Namespace) -> int:
    try:
        host = make_host(Path.cwd(), interactive=False)
        service = PluginService(host.paths, host.cwd, host.trusted, host.config.model_extra)
        if args.action == "marketplace":
            return _marketplace(service, args)
        if args.action == "preview":
            preview, data = service.preview(args.plugin)
            service.store.discard(preview)
            print(json.dumps(data, indent=2)) if args.json else _print_preview(data)
            return 0
        if args.action == "enable":
            missing = [spec.to_json() for spec in service.store.missing_options(args.plugin)]
            given = _ask_options(missing, _options(args.option))
            if given or missing:  # a required option still missing refuses, naming it
                service.configure(args.plugin, given)
        if args.action == "configure":
            service.configure(args.plugin, _options(args.option))
        if args.action == "configure":
            print(f"configured {args.plugin} (applies to sessions started from now on)")
            return 0
        if args.action in ("enable", "disable"):
            row = service.set_enabled(args.plugin, args.action == "enable")
            print(f"{args.action}d {row['id']} (applies to sessions started from now on)")
            return 0
        if args.action == "uninstall":
            removed, pruned = service.uninstall(args.plugin, args.keep_data, prune=args.prune)
            print(f"uninstalled {removed}" + (f"; pruned {', '.join(pruned)}" if pruned else ""))
            return 0
        handlers = {"install": _install, "list": _list, "search": _search, "import-claude": _import}
        return handlers[args.action](service, args)
    except (RoderError, FetchError, ManifestError, ConfigError) as exc:
        print(f"roder plugin: {exc}", file=sys.stderr)
        return 1
