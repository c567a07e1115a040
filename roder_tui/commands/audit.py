"""``roder audit verify|tail``: check the audit log's hash chain, or show its last records.

``verify`` exits 0 when the chain is intact and 1 (naming every broken line) when it is not.
The work is the ``audit/verify`` and ``audit/tail`` handlers' (``roder_core.server.methods.audit``),
called on the file directly: reading a log needs no runtime, so none is started.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from roder_core.server.methods.audit import tail_log, verify_log
from roder_core.settings.paths import RoderPaths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("verify", help="check the hash chain; exit 1 if the log was tampered with")
    check.add_argument("--file", type=Path, help="audit log to check (default: the data dir's audit.jsonl)")
    tail = sub.add_parser("tail", help="print the last records")
    tail.add_argument("-n", type=int, default=20, help="how many records (default 20)")
    tail.add_argument("--file", type=Path, help="audit log to read")
    tail.add_argument("--json", action="store_true", help="print the raw JSON lines")


def run(args: argparse.Namespace) -> int:
    path = args.file or RoderPaths.from_env().audit_file
    if args.action == "verify":
        report = verify_log(path)
        if report.ok:
            print(f"ok: {report.records} records, chain intact, head {report.head_hash[:16]}  ({path})")
            return 0
        print(f"TAMPERED or damaged: {path}")
        for problem in report.problems:
            print(f"  {problem}")
        return 1
    tail = tail_log(path, max(args.n, 1))
    if not tail.exists:
        print(f"no audit log yet at {path}")
        return 1
    for line in tail.lines:
        record = line.record
        if args.json:
            print(line.raw)
        elif record is None:
            print(f"(unreadable line) {line.raw[:120]}")
        else:
            extra = {k: v for k, v in record.items() if k not in ("seq", "ts", "kind", "prev", "hash")}
            print(f"{record.get('seq'):>6} {record.get('kind', '?'):<20} {json.dumps(extra, ensure_ascii=False)[:200]}")
    return 0
