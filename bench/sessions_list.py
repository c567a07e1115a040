"""`roder sessions list` over 1,000 threads, whole process: warm index and rebuilt index.

Threads are written once through the JSONL store (realistic 14-event coding turns, see
``sessions.py``) into a temporary RODER_HOME. Two cases, each a fresh ``python -m roder_tui.cli
sessions list --all --json``:
- warm: the index is up to date (a listing ran before);
- rebuilt: ``index.sqlite`` is deleted first, so the listing re-reads every thread file.

`--baseline DIR` runs both cases also against another checkout (``git archive REV | tar -x -C
DIR``), interleaved run by run, so both see the same load; the load average is printed with the
table. Wall time under load mostly measures waiting for a core: CPU (user + system) is the steadier
figure.

    python bench/sessions_list.py [--threads 1000] [--runs 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import SUMMARY_HEADER, checkout_env, compile_bytecode, load_average, run_once, run_summary
from sessions import EVENTS_PER_TURN, write_thread

ROOT = Path(__file__).resolve().parents[1]


async def write_threads(cwd: Path, threads: int) -> None:
    from roder_ext_jsonl_store import JsonlThreadStore

    from roder_core.settings.paths import RoderPaths

    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    for n in range(threads):
        await write_thread(store, cwd, EVENTS_PER_TURN + 2, f"thread {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=7)
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
        asyncio.run(write_threads(cwd, opts.threads))
        # A home per variant: each records its own installed distributions (the fast path's
        # check), which the other would overwrite in a shared one, sending both to a full start.
        homes = {name: Path(scratch) / f"home-{name}" for name in variants}
        for name, variant_home in homes.items():
            shutil.copytree(home, variant_home)
            variants[name] = {**variants[name], "RODER_HOME": str(variant_home)}
        command = [sys.executable, "-m", "roder_tui.cli", "sessions", "list", "--all", "--json"]
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        print(f"load average before: {load_average()}")
        for extra in variants.values():  # a first listing per variant records what it caches
            run_once(command, {**os.environ, **extra}, cwd)
        for _ in range(opts.runs):
            for case in ("warm", "rebuilt"):
                for name, extra in variants.items():
                    if case == "rebuilt":
                        index = homes[name] / "data" / "threads" / "index.sqlite"
                        for suffix in ("", "-wal", "-shm"):
                            Path(f"{index}{suffix}").unlink(missing_ok=True)
                    results.setdefault((case, name), []).append(run_once(command, {**os.environ, **extra}, cwd))
        print(f"load average after: {load_average()}")
        print(f"{'case':<10} {'variant':<9} {SUMMARY_HEADER}")
        for (case, name), rows in results.items():
            print(f"{case:<10} {name:<9} {run_summary(rows)}")


if __name__ == "__main__":
    main()
