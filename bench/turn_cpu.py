"""Per-turn CPU over a long thread: does a turn cost more as the thread grows?

A runtime built by the real bootstrap with the mock engine and the built-in tools runs --turns
turns in one thread, each a `read` tool call and then a 100-word answer. The CPU of each turn
(this process's, `time.process_time`) is recorded; the figures are the mean of turns 1-10, of
the middle ten and of the last ten, and the last ten over the first ten (the goal: flat, within
1.2x). Each variant runs in a child process; `--baseline DIR` (another checkout: `git archive
REV | tar -x -C DIR`) runs the code before as well, alternating, with the load average printed.

    python bench/turn_cpu.py [--turns 500] [--runs 1] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import checkout_env, load_average

ROOT = Path(__file__).resolve().parents[1]


def one(turns: int) -> None:
    """Run the thread in this process (the checkout on PYTHONPATH decides which code)."""
    import asyncio
    import time

    from tests.tools.harness import start

    async def run() -> list[float]:
        with tempfile.TemporaryDirectory() as scratch:
            os.environ["RODER_HOME"] = str(Path(scratch) / "home")
            workspace = Path(scratch) / "ws"
            workspace.mkdir()
            (workspace / "notes.txt").write_text("a line of notes\n" * 50)
            steps: list[dict[str, object]] = []
            for n in range(turns):
                call = {"name": "read", "arguments": {"path": "notes.txt"}}
                steps.append({"text": f"Reading, round {n}.", "tool_calls": [call]})
                steps.append({"text": f"Done with round {n}. " + "word " * 100})
            runtime = start(workspace, steps, sandbox="off").runtime
            thread = await runtime.start_thread()
            costs = []
            for n in range(turns):
                before = time.process_time()
                await runtime.run_turn(thread.id, f"round {n}, please")
                costs.append(time.process_time() - before)
            return costs

    print(json.dumps(asyncio.run(run())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, interleaved")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.one:
        one(opts.turns)
        return
    variants = {"this": checkout_env(ROOT)}
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline), **variants}
    print(f"load average before: {load_average()}")
    rows = []
    for _ in range(opts.runs):
        for name, env in variants.items():
            done = subprocess.run(
                [sys.executable, __file__, "--one", "--turns", str(opts.turns)],
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                check=True,
            )
            costs = json.loads(done.stdout.splitlines()[-1])
            middle = len(costs) // 2
            first, mid, last = (sum(c[:10]) / 10 * 1000 for c in (costs, costs[middle - 5 :], costs[-10:]))
            rows.append((name, first, mid, last))
    print(f"load average after: {load_average()}")
    print(f"{'variant':<9} {'turns 1-10 ms':>14} {'middle ten ms':>14} {'last ten ms':>12} {'last/first':>11}")
    for name, first, mid, last in rows:
        print(f"{name:<9} {first:>14.1f} {mid:>14.1f} {last:>12.1f} {last / first:>11.2f}")


if __name__ == "__main__":
    main()
