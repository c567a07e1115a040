"""What protecting a large tree costs per command: the tree guard walks the whole workspace
before and after every command (it has no budget, so protection does not depend on the size).

    python bench/tree_guard.py [--files 200000] [--runs 5]

Measured in the same run: one walk of a workspace of ``--files`` files (CPU and wall), and a
sandboxed ``true`` through the process broker in a ten-file workspace (the floor: bubblewrap,
seccomp, two walks of nothing) against the same command in the big workspace. The trees live
on tmpfs when /dev/shm is writable, so the figure is the walk and not the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roder_core.brokers import tree_guard  # noqa: E402
from tests.tools.harness import make_brokers  # noqa: E402


def build(workspace: Path, files: int) -> None:
    """``files`` empty files, 100 to a folder, like an installed node_modules."""
    for index in range(files):
        if index % 100 == 0:
            folder = workspace / "node_modules" / f"pkg{index // 100:05}"
            folder.mkdir(parents=True)
        (folder / f"f{index % 100}.js").touch()


def walk(workspace: Path, runs: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        tree_guard.scan([workspace])
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return wall, cpu


async def command(workspace: Path, cache: Path, runs: int) -> list[float]:
    process = make_brokers(workspace, cache, sandbox=None).process
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await process.run("true")
        samples.append(time.perf_counter() - started)
        assert result.exit_code == 0, result.output
    return samples


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.0f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = Path(tempfile.mkdtemp(prefix="roder-bench-tree-", dir=base))
    try:
        small, big = tmp / "small", tmp / "big"
        small.mkdir()
        big.mkdir()
        build(small, 10)
        build(big, args.files)
        print(f"load average {os.getloadavg()[0]:.1f}; trees on {base or tempfile.gettempdir()}")
        wall, cpu = walk(big, args.runs)
        print(f"one walk of {args.files:,} files: {ms(wall)} wall, {ms(cpu)} CPU (median of {args.runs})")
        floor = await command(small, tmp / "cache-small", args.runs)
        large = await command(big, tmp / "cache-big", args.runs)
        print(f"sandboxed `true`, 10 files:       {ms(floor)}")
        print(f"sandboxed `true`, {args.files:,} files: {ms(large)} (+{ms([b - a for a, b in zip(floor, large, strict=True)])})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
