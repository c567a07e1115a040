"""Overhead of a tool call through a process extension against the same tool in process.

Runs the Python SDK's example extension (``sdk/python/examples/wordcount.py``) as Roder runs it
(``Supervisor``, the JSON-RPC connection, ``ProcessTool.execute``; with bubblewrap where it is
installed) and calls ``word_count`` N times in a row; then calls the same handler function in
this process N times. Prints the median and p95 per call of each and the difference: the goal is
under 2 ms added per call. Usage: ``python bench/process_extension.py [--calls 500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from roder_ext_process.services import ProcessTool
from roder_ext_process.supervisor import Supervisor, confine

from roder_core.kernel.tools import ToolCall, ToolExecutionContext
from roder_core.settings.config import ProcessExtensionConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "sdk" / "python" / "examples" / "wordcount.py"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


async def through_process(workspace: Path, calls: int) -> tuple[list[float], bool]:
    config = ProcessExtensionConfig(command=[sys.executable, str(EXAMPLE)], capabilities=["fs.read.workspace"])
    supervisor = Supervisor("wordcount", config, workspace, confine("wordcount", config, workspace, os.environ, []))
    shake = supervisor.handshake()
    tool = ProcessTool(supervisor, next(t for t in shake.tools if t["name"] == "word_count"))
    ctx = ToolExecutionContext("thr", "turn", "call", workspace, "bypass", brokers=None)  # type: ignore[arg-type]
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        result = await tool.execute(ctx, ToolCall(f"c{i}", "word_count", {"path": "notes.txt"}))
        samples.append(time.perf_counter() - start)
        assert not result.is_error, result.text
    supervisor.close()
    return samples, supervisor.confinement.sandboxed


async def in_process(workspace: Path, calls: int) -> list[float]:
    spec = importlib.util.spec_from_file_location("wordcount_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sdk = sys.modules["roder_extension_sdk"]
    ctx = sdk.ToolContext("c", "thr", workspace, lambda _m: None)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        await module.word_count({"path": "notes.txt"}, ctx)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "notes.txt").write_text("one two three\n" * 100)
        remote, sandboxed = asyncio.run(through_process(workspace, args.calls))
        local = asyncio.run(in_process(workspace, args.calls))
    load = os.getloadavg()[0]
    (rm, r95), (lm, l95) = percentiles(remote), percentiles(local)
    print(f"calls: {args.calls} each; load average {load:.2f}; process {'sandboxed' if sandboxed else 'unconfined'}")
    print(f"through the process extension: median {rm:.3f} ms, p95 {r95:.3f} ms")
    print(f"same handler in process:      median {lm:.3f} ms, p95 {l95:.3f} ms")
    print(f"added per call: median {rm - lm:.3f} ms (goal < 2 ms)")


if __name__ == "__main__":
    main()
