"""Session store figures: resuming a 10,000-event thread and listing 1,000 threads.

Threads are written through the JSONL store's own append path with the events a real coding turn
produces (user message, reasoning, streamed answer, a tool call with a 2 KB result, usage, turn
start/end), so file sizes and parse work are realistic. Everything runs offline in a temporary
RODER_HOME.

    python bench/sessions.py [--events 10000] [--threads 1000] [--runs 5]

Reports (median of --runs):
- resume: ``JsonlThreadStore.load`` of the 10,000-event thread from the whole file (read, parse,
  fold with the reducer, write a snapshot), then from its snapshot after one more turn was
  appended, and ``Runtime.resume_thread`` of it in a fresh runtime;
- listing: the first listing of 1,000 threads with no index (rebuilds it from the files), a listing
  with the index up to date, and the wall time of ``roder sessions list --all --json`` (a whole
  process, Python start-up included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

EVENTS_PER_TURN = 14


def _turn_events(thread_id: str, n: int, compacts: bool = False) -> list:
    """One coding turn's events; ``compacts`` opens it with a compaction that keeps nothing
    older, as the runtime's automatic compaction leaves a thread that outgrew the window."""
    from roder_core.ir import (
        AgentMessageItem,
        CompactionItem,
        ReasoningItem,
        ToolCallItem,
        ToolResultItem,
        Turn,
        Usage,
        UserMessageItem,
    )
    from roder_core.threads.events import (
        ItemCompleted,
        ItemStarted,
        ThreadStatusChanged,
        TokenUsageUpdated,
        TurnCompleted,
        TurnStarted,
    )

    turn = Turn()
    usage = Usage(input_tokens=1_200 + n, output_tokens=300)
    user = UserMessageItem(text=f"Request {n}: please look at module_{n}.py and fix the failing test.")
    thinking = ReasoningItem(text="I should read the file first, then run the tests. " * 4)
    call = ToolCallItem(call_id=f"call_{n}", name="read", arguments={"path": f"src/module_{n}.py"})
    result = ToolResultItem(call_id=f"call_{n}", name="read", text="    def f(x):\n        return x\n" * 64, duration_ms=3)
    answer = AgentMessageItem(text="I fixed the off-by-one error in the loop and the test passes now. " * 6)
    events = [TurnStarted(thread_id=thread_id, turn_id=turn.id), ThreadStatusChanged(thread_id=thread_id, status="active")]
    items = (user, thinking, call, result, answer)
    if compacts:
        items = (CompactionItem(summary=f"## Goal\nfix module {n}\n" + "Progress so far. " * 40), *items)
    for item in items:
        events.append(ItemStarted(thread_id=thread_id, turn_id=turn.id, item=item))
        events.append(ItemCompleted(thread_id=thread_id, turn_id=turn.id, item=item))
    events.append(TokenUsageUpdated(thread_id=thread_id, turn_id=turn.id, usage=usage, total=usage))
    summary = turn.model_copy(update={"status": "completed", "usage": usage, "completed_at": time.time()})
    events.append(TurnCompleted(thread_id=thread_id, turn=summary))
    return events


async def write_thread(store: object, cwd: Path, events: int, title: str, compact_every: int = 0) -> str:
    """A thread of ``events`` events; with ``compact_every``, every so many turns open with a
    compaction (a thread the runtime kept within the model's window as it grew)."""
    from roder_core.ir import ThreadHeader
    from roder_core.threads.events import ThreadStarted, ThreadTitleChanged

    header = ThreadHeader(cwd=str(cwd), provider="mock", model="mock", title=title)
    await store.append(header, ThreadStarted(thread_id=header.id, thread=header))
    await store.append(header, ThreadTitleChanged(thread_id=header.id, title=title))
    written, n = 2, 0
    while written < events:
        compacts = compact_every > 0 and n > 0 and n % compact_every == 0
        for event in _turn_events(header.id, n, compacts):
            await store.append(header, event)
            written += 1
        if compacts:
            await store.sync(header.id)  # the runtime syncs at every turn boundary
        n += 1
    await store.sync(header.id)
    await store.release(header.id)
    return header.id


async def write_thread_turn(store: object, thread_id: str) -> None:
    """Append one more turn to a stored thread, as another process continuing it would."""
    from roder_core.ir import ThreadHeader

    header = ThreadHeader(id=thread_id, cwd="/", provider="mock", model="mock")
    for event in _turn_events(thread_id, 10**6):
        await store.append(header, event)
    await store.sync(thread_id)
    await store.release(thread_id)


async def median_of(runs: int, action: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def bench(events: int, threads: int, runs: int) -> None:
    from roder_ext_jsonl_store import JsonlThreadStore

    from roder_core.runtime.bootstrap import StartSettings, start_runtime
    from roder_core.settings.paths import RoderPaths

    paths = RoderPaths.from_env()
    cwd = Path(os.environ["RODER_HOME"]).parent / "ws"
    cwd.mkdir(exist_ok=True)
    store = JsonlThreadStore(paths.threads_dir)
    big = await write_thread(store, cwd, events, "the big one")
    size = (paths.threads_dir / f"{big}.jsonl").stat().st_size
    from roder_ext_jsonl_store.snapshots import snapshot_path

    snap = snapshot_path(paths.threads_dir, big)

    async def load_whole() -> None:
        snap.unlink(missing_ok=True)  # fold every line (and write the snapshot, as a first load does)
        await JsonlThreadStore(paths.threads_dir).load(big)

    whole = await median_of(runs, load_whole)
    await write_thread_turn(store, big)  # the snapshot now lacks one turn, as after a `-p -c`
    load = await median_of(runs, lambda: JsonlThreadStore(paths.threads_dir).load(big))
    loaded = await JsonlThreadStore(paths.threads_dir).load(big)

    async def resume() -> None:
        runtime = start_runtime(StartSettings(cwd=cwd, provider="mock", interactive=False)).runtime
        await runtime.resume_thread(big)
        await runtime.close()

    resumed = await median_of(runs, resume)
    print(
        f"resume: {events} events ({len(loaded.turns)} turns, {size / 1e6:.1f} MB): "
        f"store.load from the whole file {whole * 1000:.0f} ms, from its snapshot plus one turn "
        f"{load * 1000:.0f} ms, Runtime.resume_thread {resumed * 1000:.0f} ms (median of {runs})"
    )

    for n in range(threads - 1):
        await write_thread(store, cwd, EVENTS_PER_TURN + 2, f"thread {n}")
    index = paths.threads_dir / "index.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)

    async def cold() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{index}{suffix}").unlink(missing_ok=True)
        await JsonlThreadStore(paths.threads_dir).list_threads()

    cold_time = await median_of(runs, cold)
    warm = await median_of(runs * 2, lambda: JsonlThreadStore(paths.threads_dir).list_threads())
    rows = await store.list_threads()
    cli = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "sessions", "list", "--all", "--json"],
            cwd=cwd,
            check=True,
            capture_output=True,
        )
        cli.append(time.perf_counter() - start)
    print(
        f"listing {len(rows)} threads: no index (rebuilt from the files) {cold_time * 1000:.0f} ms, "
        f"index up to date {warm * 1000:.1f} ms, `roder sessions list --all --json` "
        f"{statistics.median(cli) * 1000:.0f} ms wall (median of {runs})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch:
        os.environ["RODER_HOME"] = str(Path(scratch) / "home")
        asyncio.run(bench(args.events, args.threads, args.runs))


if __name__ == "__main__":
    main()
