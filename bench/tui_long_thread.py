"""Open time and memory of a 2,000-message thread in the app, and the cost of moving through it.

    .venv/bin/python bench/tui_long_thread.py [--messages 2000]

The thread (user questions and markdown answers with a code block each) is written through the
real runtime and JSONL store, then opened in a fresh process with ``-r ID`` (headless, 120x40).
Reported: time from app start to the transcript shown, peak RSS against the same app opening an
empty thread, and the time to jump to the start, back to the end, and to load older entries on
scroll-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


async def child(workspace: Path, thread_id: str | None) -> dict[str, float]:
    from tests.tui.helpers import make_app

    class Env:
        def setenv(self, key: str, value: str) -> None:
            os.environ[key] = value

    started = time.perf_counter()
    app = make_app(workspace, None, Env(), resume=thread_id)
    out: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        await pilot.pause()
        out["open_s"] = time.perf_counter() - started
        out["entries"] = len(app.transcript.model.entries)
        out["mounted"] = sum(1 for e in app.transcript.model.entries if e.widget is not None)
        if thread_id:
            t = time.perf_counter()
            await app.transcript.action_jump_start()
            await pilot.pause()
            out["jump_start_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await app.transcript.action_jump_end()
            await pilot.pause()
            out["jump_end_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await app.transcript.load_earlier()
            await pilot.pause()
            out["load_20_earlier_ms"] = (time.perf_counter() - t) * 1000
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(home: str, workspace: Path, thread_id: str | None) -> dict[str, float]:
    env = {**os.environ, "RODER_HOME": home}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(workspace), thread_id or ""],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--child", nargs=2)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(asyncio.run(child(Path(opts.child[0]), opts.child[1] or None))))
        return
    home = tempfile.mkdtemp(prefix="roder-tui-bench-home-")
    os.environ["RODER_HOME"] = home
    workspace = Path(tempfile.mkdtemp(prefix="roder-tui-bench-ws-"))
    from tests.tui.helpers import write_long_thread

    t = time.perf_counter()
    thread_id = asyncio.run(write_long_thread(workspace, opts.messages))
    written = time.perf_counter() - t
    empty = run_child(home, workspace, None)
    long = run_child(home, workspace, thread_id)
    print(f"thread: {opts.messages} messages written in {written:.1f} s; load average {os.getloadavg()[0]:.1f}")
    print("| | empty thread | 2,000-message thread |")
    print("|---|---|---|")
    print(f"| open to transcript shown | {empty['open_s']:.2f} s | {long['open_s']:.2f} s |")
    print(f"| peak RSS | {empty['peak_rss_mb']:.0f} MB | {long['peak_rss_mb']:.0f} MB |")
    print(f"| entries / mounted widgets | 0 / 0 | {long['entries']:.0f} / {long['mounted']:.0f} |")
    print(f"| jump to start (`home`) | | {long['jump_start_ms']:.0f} ms |")
    print(f"| jump to end (`end`) | | {long['jump_end_ms']:.0f} ms |")
    print(f"| load 20 older entries on scroll-up | | {long['load_20_earlier_ms']:.0f} ms |")


if __name__ == "__main__":
    main()
