"""``roder sessions list`` output, and the fast path that reads the JSONL index without start-up.

Listing rows are wire dicts (``ThreadSummary.wire()``), whether they come from a started runtime or
straight from the index, so both paths print the same thing. The fast path is taken only when the
last full start-up with the same installed distributions recorded that the JSONL store holds
threads in this data directory (``roder_core.kernel.store_record``), and the folder has no project
extensions (which, once trusted, could install another store); it imports neither pydantic nor any
extension. ``roder_tui.cli`` takes it before it parses the command line or sets up logging
(``quick_list``): the listing's whole cost is then the interpreter, ``sqlite3`` and ``json``.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from roder_core.kernel.store_record import recorded_jsonl_dir
from roder_core.settings.paths import RoderPaths

Row = dict[str, Any]


def indexed_rows(
    cwd: Path, every_workspace: bool, limit: int | None, profile: str = "developer", paths: RoderPaths | None = None
) -> list[Row] | None:
    """Rows from the JSONL thread index, or None when only a started runtime can tell."""
    if (cwd / ".roder" / "extensions").is_dir():
        return None
    directory = recorded_jsonl_dir(paths or RoderPaths.from_env(), profile)
    if directory is None:
        return None
    from roder_ext_jsonl_store.index import ThreadIndex

    return ThreadIndex(directory).listing(None if every_workspace else str(cwd), limit)


def print_from_index(every_workspace: bool, as_json: bool, limit: int | None, paths: RoderPaths | None = None) -> bool:
    """Print the listing ``--all``, ``--json`` and ``--limit`` ask for from the index; False
    (nothing printed) when only a started runtime can tell."""
    cwd = Path.cwd().resolve()
    shown = page_limit(limit, as_json)
    rows = indexed_rows(cwd, every_workspace, None if shown is None else shown + 1, paths=paths)
    if rows is None:
        return False
    print_rows(rows, cwd, every_workspace=every_workspace, as_json=as_json, limit=shown)
    return True


def quick_list(argv: list[str]) -> int | None:
    """``roder sessions list ARGV`` from the index, before the command line is parsed: the exit
    status, or None when the full command must answer (arguments other than the plain forms
    ``list_options`` reads, such as ``--help`` or a mistake argparse explains; a home Roder
    cannot use; a store only a start-up knows; an error, which that run reports)."""
    import sqlite3

    options = list_options(argv)
    if options is None:
        return None
    paths = RoderPaths.from_env()
    if paths.unusable_reason() is not None:
        return None
    try:
        return 0 if print_from_index(*options, paths=paths) else None
    except BrokenPipeError:
        raise  # the reader of stdout left: ``cli`` ends quietly
    except (OSError, sqlite3.Error):
        return None


def list_options(argv: list[str]) -> tuple[bool, bool, int | None] | None:
    """``--all``, ``--json`` and ``--limit N`` (``--limit=N``) of ``sessions list`` as
    ``(all, json, limit)``, read as argparse reads them; None for anything else (abbreviations,
    ``--help``, a bad number), which is left to argparse
    (``tests/sessions/test_listing_fast_path.py`` checks both agree)."""
    every_workspace, as_json, limit = False, False, None
    args = iter(argv)
    for arg in args:
        if arg == "--all":
            every_workspace = True
        elif arg == "--json":
            as_json = True
        elif arg == "--limit" or arg.startswith("--limit="):
            value = arg.removeprefix("--limit=") if arg != "--limit" else next(args, "")
            if not (value.isascii() and value.isdigit()):
                return None
            limit = int(value)
        else:
            return None
    return every_workspace, as_json, limit


#: The text listing's default length: the newest threads, and a line saying how to see more.
#: (A listing of 10,000 threads printed all of them: half of the command's time.)
DEFAULT_PAGE = 50


def page_limit(limit: int | None, as_json: bool) -> int | None:
    """How many rows to show: ``--limit`` (0: all), else every row as JSON, else a page."""
    if limit is None:
        return None if as_json else DEFAULT_PAGE
    return limit or None


def print_rows(rows: list[Row], cwd: Path, *, every_workspace: bool, as_json: bool, limit: int | None = None) -> None:
    """Print the rows of a listing asked with ``limit + 1`` (when ``limit`` is set), so a text
    listing can say that older threads were left out and how to see them."""
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit is not None else rows
    if as_json:
        # One row per line: readable, and written by the C encoder (``indent`` is pure Python).
        print("[\n" + ",\n".join(f"  {json.dumps(row, ensure_ascii=False)}" for row in rows) + "\n]" if rows else "[]")
    elif not rows:
        where = "anywhere" if every_workspace else f"in {cwd} (`roder sessions list --all` shows every workspace)"
        print(f"No threads {where}.")
    else:
        print("\n".join(_tree_lines(_roots(rows), show_cwd=every_workspace)))
        if more:
            print(f"(only the newest {limit} shown: `--limit N` shows more, `--limit 0` every thread)")


def _roots(rows: list[Row]) -> list[tuple[Row, list[Any]]]:
    """Forks under their parent (children oldest first); a fork whose parent is not listed is a
    root. Nodes are ``(row, children)``; roots keep the rows' order (newest first)."""
    nodes: dict[str, tuple[Row, list[Any]]] = {row["id"]: (row, []) for row in rows}
    roots = []
    for row in rows:
        parent_id = (row.get("parent") or {}).get("threadId")
        parent = nodes.get(parent_id) if parent_id else None
        if parent is None or parent is nodes[row["id"]]:
            roots.append(nodes[row["id"]])
        else:
            parent[1].append(nodes[row["id"]])
    for _row, children in nodes.values():
        children.sort(key=lambda node: node[0]["createdAt"])
    return roots


def _tree_lines(nodes: list[tuple[Row, list[Any]]], show_cwd: bool, depth: int = 0) -> list[str]:
    lines = []
    for row, children in nodes:
        indent = "  " * depth + ("↳ " if depth else "")
        title = " ".join(row["title"].split()) or "(untitled)"
        where = f"  [{row['cwd']}]" if show_cwd and depth == 0 else ""
        when = datetime.datetime.fromtimestamp(row["updatedAt"]).strftime("%Y-%m-%d %H:%M")
        lines.append(f"{indent}{row['id']}  {when}  {row['turnCount']:>3} turn(s)  {title[:70]}{where}")
        lines.extend(_tree_lines(children, show_cwd, depth + 1))
    return lines
