"""CPU of one streamed model reply against its size: the cost must grow linearly.

Runs ``roder -p`` against the loopback model server (chat-completions wire format) for replies
of 1, 2, 4 and 8 MB of text (and the same sizes as one tool call's arguments), and prints the
child's CPU seconds for each and the CPU per MB. Linear means the last column stays flat; a
quadratic step (string concatenation, re-parsing or re-scanning what was already received)
makes it double with each doubling of the size. The response ceiling is raised for the run.

    python bench/stream_linear.py [--sizes 1,2,4,8] [--chunk 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from roder_core.testing.fake_server import ThreadedFakeServer


def run(size_mb: float, chunk: int, kind: str) -> float:
    """Child CPU seconds (user + system) of one ``roder -p`` whose reply is ``size_mb`` MB."""
    text = "word " * int(size_mb * 1024 * 1024 / 5)
    if kind == "text":
        steps = [{"text": text, "chunk_size": chunk}]
    else:
        steps = [
            {"tool_calls": [{"name": "grep", "arguments": {"pattern": "x", "path": text[:200] + "."}}], "chunk_size": chunk},
            {"text": "ok"},
        ]
        steps[0]["tool_calls"][0]["arguments"] = json.dumps({"pattern": text, "path": "."})  # type: ignore[index]
    with tempfile.TemporaryDirectory() as tmp, ThreadedFakeServer(steps, models=("m",)) as server:
        home = Path(tmp)
        (home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["m"]\n\n[limits]\nresponse_mb = 1024\n'
        )
        env = {**os.environ, "RODER_HOME": str(home), "LOCAL_API_KEY": "k", "RODER_NO_HOST": "1"}
        env.pop("RODER_MOCK_SCRIPT", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "-p", "go", "--provider", "local", "--model", "m", "--mode", "bypass"],
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8", help="reply sizes in MB")
    parser.add_argument("--chunk", type=int, default=64, help="characters per streamed delta")
    parser.add_argument("--kind", choices=("text", "tool"), default="text")
    args = parser.parse_args()
    print(f"{'MB':>6} {'CPU s':>8} {'CPU s/MB':>9}   ({args.kind}, {args.chunk} characters per delta)")
    base = run(0.01, args.chunk, args.kind)  # start-up and one empty-ish turn
    for size in (float(s) for s in args.sizes.split(",")):
        cpu = run(size, args.chunk, args.kind) - base
        print(f"{size:6.1f} {cpu:8.2f} {cpu / size:9.2f}")


if __name__ == "__main__":
    main()
