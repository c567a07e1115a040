"""`roder sessions list` over many threads, whole process, and `thread/list` with a limit.

Threads are written through the JSONL store (realistic 14-event coding turns, see ``sessions.py``)
into a temporary RODER_HOME: the first ``--written`` of them one by one, the rest as copies of
those under fresh ids (writing 10,000 threads through the store takes longer than the benchmark).

Listing cases, each a fresh ``python -m roder_tui.cli sessions list ...``:
- ``list``: ``roder sessions list`` (this folder, the text listing's default page);
- ``all-json``: ``roder sessions list --all --json`` (every row, as JSON);
- each warm (the index is up to date: a listing ran before and the folder has not changed for a
  while) and rebuilt (the index is deleted first, so the listing reads every thread file).

``thread/list``: the store's ``list_threads(cwd, limit)`` (what the app server's handler calls),
CPU per call in a process of each checkout, with ``limit`` 20 over ``--small`` threads and over
all of them, and with no limit: a listing proportional to ``limit`` costs the same for both.

`--baseline DIR` runs everything also against another checkout (``git archive REV | tar -x -C
DIR``), interleaved run by run, so both see the same load; the load average is printed with the
tables. Wall time under load mostly measures waiting for a core: CPU (user + system) is the
steadier figure.

    python bench/sessions_list.py [--threads 10000] [--runs 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import SUMMARY_HEADER, checkout_env, compile_bytecode, load_average, run_once, run_summary
from sessions import EVENTS_PER_TURN, write_thread

ROOT = Path(__file__).resolve().parents[1]

#: Times ``list_threads`` in the checkout on PYTHONPATH: CPU ms per call, median of the calls.
THREAD_LIST = """
import asyncio, json, statistics, sys, time
from pathlib import Path
from roder_ext_jsonl_store import JsonlThreadStore

store = JsonlThreadStore(Path(sys.argv[1]))
cwd, calls = sys.argv[2], int(sys.argv[3])
limit = int(sys.argv[4]) or None

async def main() -> None:
    await store.list_threads(cwd, limit)  # the index is current before timing
    spent = []
    for _ in range(calls):
        start = time.process_time()
        rows = await store.list_threads(cwd, limit)
        spent.append(time.process_time() - start)
    print(json.dumps({"ms": statistics.median(spent) * 1000, "rows": len(rows)}))

asyncio.run(main())
"""


async def write_threads(cwd: Path, threads: int, written: int = 100) -> None:
    """``written`` threads through the store, then copies of them under fresh ids up to
    ``threads`` (each copy's file is the original's with the id replaced)."""
    from roder_ext_jsonl_store import JsonlThreadStore

    from roder_core.settings.paths import RoderPaths

    directory = RoderPaths.from_env().threads_dir
    store = JsonlThreadStore(directory)
    originals = []
    for n in range(min(threads, written)):
        originals.append(await write_thread(store, cwd, EVENTS_PER_TURN + 2, f"thread {n}"))
    for n in range(len(originals), threads):
        original = originals[n % len(originals)]
        copy = f"thr_{secrets.token_hex(10)}"
        data = (directory / f"{original}.jsonl").read_bytes().replace(original.encode(), copy.encode())
        (directory / f"{copy}.jsonl").write_bytes(data)


def drop_index(home: Path) -> None:
    threads = home / "data" / "threads"
    shutil.rmtree(threads / ".index", ignore_errors=True)
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (threads / name).unlink(missing_ok=True)


def settle(home: Path) -> None:
    """Date the threads folder's last change back: a listing trusts the folder's mtime once it
    is a few seconds old (as it is when nobody made a thread just now)."""
    threads = home / "data" / "threads"
    old = time.time_ns() - 60 * 10**9
    os.utime(threads, ns=(old, old))


def thread_list(env: dict[str, str], directory: Path, cwd: Path, limit: int, calls: int) -> tuple[float, int]:
    done = subprocess.run(
        [sys.executable, "-c", THREAD_LIST, str(directory), str(cwd), str(calls), str(limit)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    return float(result["ms"]), int(result["rows"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--written", type=int, default=100, help="threads written through the store; the rest are copies")
    parser.add_argument("--small", type=int, default=200, help="threads in the small folder of the thread/list case")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, interleaved")
    opts = parser.parse_args()
    compile_bytecode(ROOT)
    variants: dict[str, dict[str, str]] = {"this": {}}
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline), **variants}
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch:
        home, cwd = Path(scratch) / "home", Path(scratch) / "ws"
        cwd.mkdir()
        os.environ["RODER_HOME"] = str(home)
        asyncio.run(write_threads(cwd, opts.threads, opts.written))
        small_homes = {name: Path(scratch) / f"small-{name}" for name in variants}
        for small_home in small_homes.values():
            (small_home / "data" / "threads").mkdir(parents=True)
            for path in sorted((home / "data" / "threads").glob("*.jsonl"))[: opts.small]:
                shutil.copy2(path, small_home / "data" / "threads" / path.name)
        # A home per variant: each records its own installed distributions (the fast path's
        # check), which the other would overwrite in a shared one, sending both to a full start.
        homes = {name: Path(scratch) / f"home-{name}" for name in variants}
        for name, variant_home in homes.items():
            shutil.copytree(home, variant_home)
            variants[name] = {**variants[name], "RODER_HOME": str(variant_home)}
        commands = {
            "list": [sys.executable, "-m", "roder_tui.cli", "sessions", "list"],
            "all-json": [sys.executable, "-m", "roder_tui.cli", "sessions", "list", "--all", "--json"],
        }
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        listed: dict[tuple[str, str, int], list[float]] = {}
        print(f"load average before: {load_average()}")
        for extra in variants.values():  # a first listing per variant records what it caches
            run_once(commands["list"], {**os.environ, **extra}, cwd)
        for _ in range(opts.runs):
            for command, argv in commands.items():
                for case in ("warm", "rebuilt"):
                    for name, extra in variants.items():
                        if case == "rebuilt":
                            drop_index(homes[name])
                        else:
                            run_once(argv, {**os.environ, **extra}, cwd)
                            settle(homes[name])
                            run_once(argv, {**os.environ, **extra}, cwd)  # records the settled folder
                        results.setdefault((f"{command} {case}", name), []).append(run_once(argv, {**os.environ, **extra}, cwd))
            for name, extra in variants.items():
                env = {**os.environ, **extra}
                for label, folder, limit in (
                    (f"{opts.small} threads", small_homes[name], 20),
                    (f"{opts.threads} threads", homes[name], 20),
                    (f"{opts.small} threads", small_homes[name], 0),
                ):
                    ms, _rows = thread_list(env, folder / "data" / "threads", cwd, limit, 20)
                    listed.setdefault((label, name, limit), []).append(ms)
        print(f"load average after: {load_average()}")
        print(f"{'case':<18} {'variant':<9} {SUMMARY_HEADER}")
        for (case, name), rows in results.items():
            print(f"{case:<18} {name:<9} {run_summary(rows)}")
        print(f"\nthread/list (store.list_threads), CPU ms per call, median of {opts.runs} runs of 20 calls")
        for (label, name, limit), samples in listed.items():
            samples.sort()
            print(f"{label:<16} limit {limit or 'none':<5} {name:<9} {samples[len(samples) // 2]:8.3f} ms")


if __name__ == "__main__":
    main()
