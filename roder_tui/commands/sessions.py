"""``roder sessions list|show|fork|export|rm``: the stored threads, from the command line.

Thread ids may be shortened to any unambiguous prefix (``thr_3f2a``, or just ``3f2a``). Exit
codes: 0 done, 1 the thread or turn does not exist (or another error, explained on stderr).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.errors import RoderError
from roder_tui.commands.session_listing import indexed_rows, print_rows

if TYPE_CHECKING:  # loaded by the commands that start a runtime; `list` usually does not
    from roder_core.runtime.runtime import Runtime


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="threads of this workspace, newest first, forks under their parent")
    listing.add_argument("--all", action="store_true", help="threads of every workspace")
    listing.add_argument("--json", action="store_true", help="print the rows as JSON")
    listing.add_argument("--limit", type=int, help="at most this many threads")
    show = sub.add_parser("show", help="print a thread as a Markdown transcript")
    show.add_argument("id", help="thread id (or an unambiguous prefix)")
    show.add_argument("--json", action="store_true", help="print the whole thread as JSON")
    fork = sub.add_parser("fork", help="branch a thread into a new one (the original is not changed)")
    fork.add_argument("id", help="thread id (or an unambiguous prefix)")
    fork.add_argument("--turn", type=int, metavar="N", help="keep turns 1..N (default: every finished turn)")
    fork.add_argument("--json", action="store_true", help="print the new thread's id and parent as JSON")
    export = sub.add_parser("export", help="write a Markdown transcript, a JSON eval trajectory or ATIF")
    export.add_argument("id", help="thread id (or an unambiguous prefix)")
    export.add_argument(
        "--format",
        choices=("markdown", "json", "atif"),
        required=True,
        help="atif: Agent Trajectory Interchange Format (Harbor), for trainers and viewers",
    )
    export.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    remove = sub.add_parser("rm", help="delete a thread's file (its forks keep theirs)")
    remove.add_argument("id", help="thread id (or an unambiguous prefix)")


async def _list(runtime: Runtime, args: argparse.Namespace) -> int:
    cwd = None if args.all else str(runtime.options.cwd)
    rows = await runtime.list_threads(cwd, args.limit)
    print_rows([row.wire() for row in rows], runtime.options.cwd, every_workspace=args.all, as_json=args.json)
    return 0


async def _load(runtime: Runtime, wanted: str) -> Any:
    if runtime.store is None:
        raise RoderError("no thread store is installed")
    return await runtime.store.load(await runtime.find_thread(wanted))


async def _show(runtime: Runtime, args: argparse.Namespace) -> int:
    from roder_core.threads.transcript import render_markdown

    thread = await _load(runtime, args.id)
    print(json.dumps(thread.wire(), indent=2, ensure_ascii=False) if args.json else render_markdown(thread), end="\n")
    return 0


async def _fork(runtime: Runtime, args: argparse.Namespace) -> int:
    from roder_core.threads.sessions import turn_id_at

    parent = await _load(runtime, args.id)
    turn_id = turn_id_at(parent, args.turn) if args.turn is not None else None
    thread = await runtime.fork_thread(parent.id, turn_id)
    if args.json:
        print(
            json.dumps({"id": thread.id, "parent": thread.parent.wire() if thread.parent else None, "turns": len(thread.turns)})
        )
    else:
        print(thread.id)
    return 0


async def _export(runtime: Runtime, args: argparse.Namespace) -> int:
    thread = await _load(runtime, args.id)
    if args.format == "markdown":
        from roder_core.threads.transcript import render_markdown

        text = render_markdown(thread)
    elif args.format == "atif":
        from roder_core.threads.atif import build_atif

        text = json.dumps(build_atif(thread, await runtime.store.events(thread.id)), indent=2, ensure_ascii=False) + "\n"
    else:
        from roder_core.threads.trajectory import build_trajectory

        text = json.dumps(build_trajectory(thread, await runtime.store.events(thread.id)), indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


async def _remove(runtime: Runtime, args: argparse.Namespace) -> int:
    thread_id = await runtime.find_thread(args.id)
    await runtime.delete_thread(thread_id)
    print(f"deleted {thread_id}")
    return 0


ACTIONS: dict[str, Callable[[Runtime, argparse.Namespace], Awaitable[int]]] = {
    "list": _list,
    "show": _show,
    "fork": _fork,
    "export": _export,
    "rm": _remove,
}


async def _run(args: argparse.Namespace) -> int:
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    runtime = start_runtime(StartSettings(interactive=False)).runtime
    try:
        return await ACTIONS[args.action](runtime, args)
    finally:
        await runtime.close()


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            cwd = Path.cwd().resolve()
            rows = indexed_rows(cwd, args.all, args.limit)
            if rows is not None:
                print_rows(rows, cwd, every_workspace=args.all, as_json=args.json)
                return 0
        return _run_started(args)
    except BrokenPipeError:
        raise  # stdout's reader left: the CLI entry ends quietly
    except (RoderError, OSError, sqlite3.Error) as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 1


def _run_started(args: argparse.Namespace) -> int:
    import asyncio

    from roder_core.kernel.registry import RegistryError
    from roder_core.settings.config import ConfigError

    try:
        return asyncio.run(_run(args))
    except (RegistryError, ConfigError) as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 1
