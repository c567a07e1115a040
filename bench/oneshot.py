"""One-shot wall time and peak memory: `roder -p` running a 10-round mock-scripted task.

Each round is one model call answered with a `bash` tool call (`echo round N`), then a final
answer: the same shape as the peers' figures in ../shared/anchors.md ("10 shell-tool rounds then
an answer"). Runs the real `roder` program in a subprocess, offline, in bypass mode.

    python bench/oneshot.py [--runs 5]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def script(rounds: int) -> dict[str, object]:
    steps: list[dict[str, object]] = [
        {"text": f"Round {i}.", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo round {i}"}}]}
        for i in range(rounds)
    ]
    steps.append({"text": "All rounds done."})
    return {"steps": steps}


def measure(cmd: list[str], env: dict[str, str], cwd: Path, runs: int) -> tuple[list[float], float]:
    walls, peak = [], 0.0
    for _ in range(runs):
        # Peak RSS per child: run each in a fresh `python -c` wrapper so RUSAGE_CHILDREN is per run.
        wrapper = [sys.executable, "-c",
                   "import resource,subprocess,sys,json,time;t=time.perf_counter();"
                   "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
                   "w=time.perf_counter()-t;"
                   "r=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024;"
                   "print(json.dumps({'wall':w,'peak':r,'rc':p.returncode,'err':p.stderr[-400:]}))", *cmd]
        result = json.loads(subprocess.run(wrapper, cwd=cwd, env=env, capture_output=True, text=True).stdout)
        if result["rc"] != 0:
            raise SystemExit(f"roder failed: {result['err']}")
        walls.append(result["wall"])
        peak = max(peak, result["peak"])
    return walls, peak


def compile_bytecode() -> None:
    """pip compiles bytecode when it installs a package; an editable checkout under
    PYTHONDONTWRITEBYTECODE would recompile every module at every start, so compile once first."""
    root = Path(__file__).resolve().parents[1]
    for folder in ("roder_core", "roder_tui", "extensions"):
        compileall.compile_dir(root / folder, quiet=1)


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    opts = parser.parse_args()
    roder = [sys.executable, "-m", "roder_tui.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "ws").mkdir()
        script_path = tmp_path / "script.json"
        script_path.write_text(json.dumps(script(opts.rounds)))
        env = {**os.environ, "RODER_HOME": str(tmp_path / "home"), "RODER_MOCK_SCRIPT": str(script_path)}
        cases = {
            "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
            "roder -p hi (no tools)": [*roder, "-p", "hi", "--provider", "mock"],
            f"roder -p, {opts.rounds} bash rounds + answer": [*roder, "-p", "go", "--provider", "mock", "--mode", "bypass"],
        }
        print(f"{'case':<40} {'median s':>9} {'min s':>7} {'peak MiB':>9}")
        for name, cmd in cases.items():
            run_env = env if "rounds" in name else {k: v for k, v in env.items() if k != "RODER_MOCK_SCRIPT"}
            walls, peak = measure(cmd, run_env, tmp_path / "ws", opts.runs)
            print(f"{name:<40} {statistics.median(walls):>9.3f} {min(walls):>7.3f} {peak:>9.1f}")


if __name__ == "__main__":
    main()
