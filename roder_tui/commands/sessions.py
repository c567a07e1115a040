"""``roder sessions list|show|fork|export|rm``: the stored threads, from the command line.

Each action is control-plane calls (``thread/find``, ``thread/read``, ``thread/fork``,
``thread/export``, ``thread/delete``, ``thread/list``) through an in-process client. ``list``
first tries the JSONL index directly (``session_listing``): same rows, no start-up.

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
from typing import TYPE_CHECKING

from roder_core.errors import RoderError
from roder_tui.commands.session_listing import DEFAULT_PAGE, page_limit, print_from_index, print_rows

if TYPE_CHECKING:  # loaded by the commands that start a runtime; `list` usually does not
    from roder_core.ir import Thread
    from roder_core.server.client import LocalAppClient
    from roder_core.server.protocol_sessions import ExportFormat


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="threads of this workspace, newest first, forks under their parent")
    listing.add_argument("--all", action="store_true", help="threads of every workspace")
    listing.add_argument("--json", action="store_true", help="print the rows as JSON")
    listing.add_argument(
        "--limit",
        type=int,
        help=f"at most this many threads (default: the newest {DEFAULT_PAGE}, every thread with --json; 0: every thread)",
    )
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


async def _list(client: LocalAppClient, args: argparse.Namespace) -> int:
    from roder_core.server.protocol import THREAD_LIST, ThreadListParams

    cwd = Path.cwd().resolve()  # the folder the client's runtime was started in
    limit = page_limit(args.limit, args.json)
    asked = ThreadListParams(cwd=None if args.all else str(cwd), limit=None if limit is None else limit + 1)
    listed = await client.call(THREAD_LIST, asked)
    print_rows([row.wire() for row in listed.threads], cwd, every_workspace=args.all, as_json=args.json, limit=limit)
    return 0


async def _find(client: LocalAppClient, wanted: str) -> str:
    from roder_core.server.protocol_sessions import THREAD_FIND, ThreadFindParams

    return (await client.call(THREAD_FIND, ThreadFindParams(query=wanted))).thread_id


async def _read(client: LocalAppClient, wanted: str) -> Thread:
    from roder_core.server.protocol import THREAD_READ, ThreadReadParams

    thread_id = await _find(client, wanted)
    return (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread


async def _show(client: LocalAppClient, args: argparse.Namespace) -> int:
    if args.json:
        thread = await _read(client, args.id)
        print(json.dumps(thread.wire(), indent=2, ensure_ascii=False))
        return 0
    sys.stdout.write(await _export_text(client, args.id, "markdown") + "\n")
    return 0


async def _fork(client: LocalAppClient, args: argparse.Namespace) -> int:
    from roder_core.server.protocol import THREAD_FORK, ThreadForkParams
    from roder_core.threads.sessions import turn_id_at

    parent = await _read(client, args.id)
    turn_id = turn_id_at(parent, args.turn) if args.turn is not None else None
    thread = (await client.call(THREAD_FORK, ThreadForkParams(thread_id=parent.id, turn_id=turn_id))).thread
    if args.json:
        thread = await _read(client, thread.id)  # thread/fork answers without the turns
        print(
            json.dumps({"id": thread.id, "parent": thread.parent.wire() if thread.parent else None, "turns": len(thread.turns)})
        )
    else:
        print(thread.id)
    return 0


async def _export_text(client: LocalAppClient, wanted: str, form: ExportFormat) -> str:
    from roder_core.server.protocol_sessions import THREAD_EXPORT, ThreadExportParams

    thread_id = await _find(client, wanted)
    return (await client.call(THREAD_EXPORT, ThreadExportParams(thread_id=thread_id, format=form))).text


async def _export(client: LocalAppClient, args: argparse.Namespace) -> int:
    text = await _export_text(client, args.id, args.format)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


async def _remove(client: LocalAppClient, args: argparse.Namespace) -> int:
    from roder_core.server.protocol_sessions import THREAD_DELETE, ThreadIdParams

    thread_id = await _find(client, args.id)
    deleted = await client.call(THREAD_DELETE, ThreadIdParams(thread_id=thread_id))
    print(f"deleted {deleted.thread_id}")
    return 0


ACTIONS: dict[str, Callable[[LocalAppClient, argparse.Namespace], Awaitable[int]]] = {
    "list": _list,
    "show": _show,
    "fork": _fork,
    "export": _export,
    "rm": _remove,
}


async def _run(args: argparse.Namespace) -> int:
    from roder_core.server.errors import RpcError
    from roder_tui.commands.control import fail, local_client

    async with local_client() as client:
        try:
            return await ACTIONS[args.action](client, args)
        except RpcError as exc:
            return fail(exc.message)


def run(args: argparse.Namespace) -> int:
    try:
        # The fast path: the JSONL index read in a process that loads neither pydantic, the
        # control plane nor any extension; its rows are the ones thread/list returns
        # (tests/sessions/test_listing_fast_path.py compares both). ``roder_tui.cli`` takes it
        # before parsing; this is for the forms it leaves to argparse (``--lim 5``).
        if args.action == "list" and print_from_index(args.all, args.json, args.limit):
            return 0
        return _run_started(args)
    except BrokenPipeError:
        raise  # stdout's reader left: the CLI entry ends quietly
    except (RoderError, OSError, sqlite3.Error) as exc:
        print(f"roder: {exc}", file=sys.stderr)
        return 1


def _run_started(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_run(args))  # a configuration error rises to the CLI's one handler
