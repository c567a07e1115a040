"""``roder trust [PATH]`` / ``roder untrust [PATH]``: decide whether a folder's own items load.

A trusted folder's ``.roder/config.toml`` (with its hooks), ``.roder/extensions``, skills,
commands, agents and ``.mcp.json`` load; an untrusted one's never do. Decisions are stored per
canonical path in the user data dir, cover subfolders unless a nearer decision says otherwise,
and are written to the audit log. The work is the ``trust/set`` and ``trust/list`` handlers'
(``roder_core.server.methods.trust``), called directly: no runtime is started, so deciding about
a folder never loads anything of it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from roder_core.policy.audit import AuditLog
from roder_core.server.errors import RpcError
from roder_core.server.methods.trust import record_trust, trust_decisions, trust_state
from roder_core.settings.paths import RoderPaths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="folder (default: the current one)")
    parser.add_argument("--list", action="store_true", help="list every recorded decision")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _list(paths: RoderPaths, as_json: bool) -> int:
    decisions = trust_decisions(paths).decisions
    if as_json:
        print(json.dumps({d.path: d.trusted for d in decisions}, indent=2))
    elif not decisions:
        print("no trust decisions recorded yet (`roder trust [PATH]` trusts a folder)")
    else:
        for decision in decisions:
            print(f"{'trusted  ' if decision.trusted else 'untrusted'}  {decision.path}")
    return 0


def _decide(args: argparse.Namespace, trusted: bool) -> int:
    paths = RoderPaths.from_env(dict(os.environ))
    if args.list:
        return _list(paths, args.json)
    folder = Path(args.path).expanduser()
    if not folder.is_dir():
        print(f"roder: {folder} is not a folder")
        return 2
    folder = folder.resolve()
    try:
        with AuditLog(paths.audit_file) as audit:
            record_trust(paths, folder, trusted, audit.record, "roder trust")
        state = trust_state(paths, folder)
    except RpcError as exc:
        print(f"roder: {exc.message}")
        return 2
    if args.json:
        print(json.dumps({"path": state.cwd, "trusted": trusted, "items": state.items}))
        return 0
    print(f"{'trusted' if trusted else 'untrusted'}: {state.cwd}")
    if state.items:
        print(("now loads: " if trusted else "will not load: ") + ", ".join(state.items))
    return 0


def run(args: argparse.Namespace) -> int:
    return _decide(args, True)


def run_untrust(args: argparse.Namespace) -> int:
    return _decide(args, False)
