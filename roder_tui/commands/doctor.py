"""``roder doctor``: what protects this machine when Roder runs commands here.

Prints the sandbox section (level, bubblewrap, capabilities, user namespace, seccomp, network,
read-only and masked paths, limits), checked live with a command run inside the sandbox.
"""

from __future__ import annotations

import argparse
import json
import os


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox",
        choices=("workspace-write", "read-only", "off"),
        help="report this sandbox level instead of the configured one",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--no-live", action="store_true", help="skip the command run inside the sandbox")


def run(args: argparse.Namespace) -> int:
    from roder_core.brokers.sandbox import sandbox_status
    from roder_core.brokers.sandbox_report import sandbox_report
    from roder_core.settings.config import load_config
    from roder_core.settings.paths import RoderPaths

    env = dict(os.environ)
    paths = RoderPaths.from_env(env)
    config = load_config(paths)  # a configuration error rises to the CLI's one handler
    status = sandbox_status(args.sandbox or config.sandbox, cache_file=paths.cache_dir / "sandbox-probe.json")
    lines = sandbox_report(status, config, paths, env, live=not args.no_live)
    if args.json:
        print(json.dumps({"sandbox": {line.topic: line.text for line in lines}}, indent=2))
        return 0
    print("sandbox")
    width = max(len(line.topic) for line in lines)
    for line in lines:
        print(f"  {line.topic.ljust(width)}  {line.text}")
    return 0
