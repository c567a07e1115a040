"""Start-up: `roder --version` and `roder -p hi` (mock engine) against `python -c pass`.

Each case is a fresh process; CPU is user + system of the process and its children. With
`--baseline DIR` (another checkout: `git archive REV | tar -x -C DIR`) both checkouts run
interleaved, run by run, so they see the same load; the load average is printed. The module
count is how many modules the run imported (`python -X importtime`), the figure the startup-import
test (tests/test_startup_imports.py) guards as a list.

    python bench/startup.py [--runs 9] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import SUMMARY_HEADER, checkout_env, compile_dependencies, load_average, run_once, run_summary

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "roder --version": [sys.executable, "-m", "roder_tui.cli", "--version"],
    "roder -p hi (mock)": [sys.executable, "-m", "roder_tui.cli", "-p", "hi", "--provider", "mock"],
}


def module_count(command: list[str], env: dict[str, str], cwd: Path) -> int:
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=env, cwd=cwd, capture_output=True, text=True)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:") and "self [us]" not in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, interleaved")
    opts = parser.parse_args()
    compile_dependencies()
    variants = {"this": checkout_env(ROOT)}
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline), **variants}
    with tempfile.TemporaryDirectory(prefix="roder-bench-") as scratch:
        cwd = Path(scratch) / "ws"
        cwd.mkdir()
        base_env = {**os.environ, "RODER_HOME": str(Path(scratch) / "home"), "RODER_NO_HOST": "1"}
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        print(f"load average before: {load_average()}")
        for _ in range(opts.runs):
            for case, command in CASES.items():
                for name, extra in variants.items() if case != "python -c pass" else [("floor", {})]:
                    results.setdefault((case, name), []).append(run_once(command, {**base_env, **extra}, cwd))
        print(f"load average after: {load_average()}")
        print(f"{'case':<20} {'variant':<9} {SUMMARY_HEADER} {'modules':>8}")
        for (case, name), rows in results.items():
            modules = module_count(CASES[case], {**base_env, **variants.get(name, {})}, cwd)
            print(f"{case:<20} {name:<9} {run_summary(rows)} {modules:>8}")


if __name__ == "__main__":
    main()
