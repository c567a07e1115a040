"""What a hung MCP server adds to `roder -p`: the real program, offline (mock provider), with no
MCP server, with one healthy server (tests/ecosystem/mcp_fixture_server.py), with one server that
never answers its handshake and with one that is connected but ignores the end of its stdin and
SIGTERM at shutdown (tests/ecosystem/mcp_hanging_server.py, plain and ``at-exit``).

For the handshake case ``[mcp] startup_wait = 0`` so the turn does not wait for the server (that
wait is documented and configurable); what remains is loading the MCP SDK, spawning the server and
shutdown, which must not wait on the hung handshake. For the shutdown case the turn waits until
the server is connected (``startup_wait = 25``, as for its healthy twin), so what differs is the
shutdown alone. "hung" minus its "healthy" twin is what the hang itself costs.

Then, in this process and so apart from the machine's load on the rest of `roder -p`: how long
``McpManager.aclose`` takes for one connected server, the healthy twin against the one hung at
exit (``--stops`` times each).

    python bench/mcp_hung_exit.py [--runs 5] [--stops 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "ecosystem"


def wall(home: Path, cwd: Path) -> float:
    env = {**os.environ, "RODER_HOME": str(home)}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", "hello", "--provider", "mock"],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return time.perf_counter() - started


async def stop_once(mode: str, root: Path) -> float:
    """Seconds ``McpManager.aclose`` takes for one connected stdio server (``exits``/``at-exit``)."""
    from roder_ext_mcp.config import parse_server
    from roder_ext_mcp.manager import McpManager

    argv = [str(FIXTURES / "mcp_hanging_server.py"), str(root / "pid"), mode]
    config = parse_server("s", {"command": sys.executable, "args": argv}, "bench", {})
    manager = McpManager({"s": config}, root / "logs")
    manager.start()
    await manager.wait_ready(120)
    assert manager.connections["s"].status == "connected", manager.connections["s"].error
    started = time.perf_counter()
    await manager.aclose()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stops", type=int, default=10)
    options = parser.parse_args()
    runs = options.runs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, cwd = root / "home", root / "ws"
        home.mkdir()
        cwd.mkdir()
        config = home / "config.toml"
        configs = {"no MCP server": "[mcp]\nstartup_wait = 0\n"}
        for label, wait, args in (
            ("one healthy server", 0, ["mcp_fixture_server.py", "stdio"]),
            ("one server hung in initialize", 0, ["mcp_hanging_server.py", str(root / "pid")]),
            ("healthy twin, connected first", 25, ["mcp_hanging_server.py", str(root / "pid"), "exits"]),
            ("hung at exit, connected first", 25, ["mcp_hanging_server.py", str(root / "pid"), "at-exit"]),
        ):
            argv = [str(FIXTURES / args[0]), *args[1:]]
            configs[label] = (
                f"[mcp]\nstartup_wait = {wait}\n\n[mcp.servers.s]\ncommand = {json.dumps(sys.executable)}\n"
                f"args = {json.dumps(argv)}\n"
            )
        figures: dict[str, list[float]] = {label: [] for label in configs}
        for _ in range(runs):  # interleaved, so a burst of load on the machine hits every case alike
            for label, text in configs.items():
                config.write_text(text)
                figures[label].append(wall(home, cwd))
    for label, walls in figures.items():
        print(f"{label:30} median {statistics.median(walls):.2f} s  (runs: {', '.join(f'{w:.2f}' for w in walls)})")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("exits", "at-exit"):
            stops = [asyncio.run(stop_once(mode, Path(tmp))) for _ in range(options.stops)]
            print(f"aclose, server {mode:8}        median {statistics.median(stops):.3f} s  (max {max(stops):.3f})")


if __name__ == "__main__":
    main()
