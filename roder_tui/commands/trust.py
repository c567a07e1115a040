"""``roder trust [PATH]`` / ``roder untrust [PATH]``: decide whether a folder's own items load.

A trusted folder's ``.roder/config.toml`` (with its hooks), ``.roder/extensions``, skills,
commands, agents and ``.mcp.json`` load; an untrusted one's never do. Decisions are stored per
canonical path in the user data dir and cover subfolders unless a nearer decision says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from roder_core.policy.trust import TrustStore, project_items
from roder_core.settings.paths import RoderPaths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="folder (default: the current one)")
    parser.add_argument("--list", action="store_true", help="list every recorded decision")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _store() -> TrustStore:
    return TrustStore(RoderPaths.from_env(dict(os.environ)))


def _decide(args: argparse.Namespace, trusted: bool) -> int:
    store = _store()
    if args.list:
        decisions = store.trusted_folders()
        if args.json:
            print(json.dumps(decisions, indent=2))
        elif not decisions:
            print("no trust decisions recorded yet (`roder trust [PATH]` trusts a folder)")
        for recorded, verdict in decisions.items() if not args.json else ():
            print(f"{'trusted  ' if verdict else 'untrusted'}  {recorded}")
        return 0
    folder = Path(args.path).expanduser()
    if not folder.is_dir():
        print(f"roder: {folder} is not a folder")
        return 2
    store.set(folder, trusted)
    canonical = TrustStore.canonical(folder)
    items = project_items(folder)
    if args.json:
        print(json.dumps({"path": canonical, "trusted": trusted, "items": items}))
        return 0
    verb = "trusted" if trusted else "untrusted"
    print(f"{verb}: {canonical}")
    if items:
        print(("now loads: " if trusted else "will not load: ") + ", ".join(items))
    return 0


def run(args: argparse.Namespace) -> int:
    return _decide(args, True)


def run_untrust(args: argparse.Namespace) -> int:
    return _decide(args, False)
