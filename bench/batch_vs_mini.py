"""Rollouts per second: `roder batch` (sandboxed scoring on) against mini-swe-agent, same run.

Both harnesses get the same N tasks (a one-file repository whose `add` subtracts) and the same
loopback model server (Chat Completions, OpenAI's wire format: mini-swe-agent asks through
LiteLLM without streaming, Roder streams), which answers every rollout's first call with a bash
tool call that fixes the file and its second with the end of the task. Each rollout is complete:
a fresh copy of the workspace, the agent's two model calls and one command, and a score that
imports the fixed module. Roder runs `roder batch` with a config-defined provider, its score
sandboxed by bubblewrap (the runner guard and the prediction included); mini-swe-agent runs its
own agent and local environment the way its batch runner does (a thread pool of `--workers`),
with the score as a plain subprocess (unsandboxed). Wall time covers everything a user waits
for, interpreter start included, from the command to its exit.

mini-swe-agent is installed from PyPI into its own virtual environment the first time
(`--mini-venv`, default `~/.cache/roder-bench/mini-swe-agent-<version>`), so pip has compiled
its modules' bytecode, as it does at any install. Roder's modules get the same before the runs:
a checkout installed in editable mode has none, and under `PYTHONDONTWRITEBYTECODE=1` it never
gets any, so every process would compile every module it imports (`--no-bytecode` measures that).
`--ray` adds `roder batch --backend ray` (a local Ray instance started by the batch, so its
start is in the wall time). `--baseline TREE` adds `roder batch` from another checkout's sources
(say `git archive main | tar -x -C TREE`) in the same rounds: before and after in one run.

`--cpu N` measures the other thing that decides a long batch: CPU per rollout. Each harness runs
N rollouts one after another in one process (its agent, its score, the model server apart), and
the median CPU of a warm rollout is reported, the process's own and its children's.

    python bench/batch_vs_mini.py [--tasks 100] [--workers 2] [--rounds 2] [--baseline TREE] [--cpu N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MINI_VERSION = "2.4.6"
BUGGY = "def add(a, b):\n    return a - b\n"
FIX = "sed -i 's/a - b/a + b/' calc.py && echo FIXED-OK"
#: The same interpreter for both harnesses' scores, by absolute path (a version manager's shim
#: on PATH would cost more than the score itself).
SCORE = f"{sys.executable} -c 'from calc import add; assert add(2, 3) == 5'"

#: The mini-swe-agent side: its agent, its local environment, its model class, a thread pool.
MINI_DRIVER = r"""
import concurrent.futures, json, shutil, subprocess, sys, tempfile, time
from pathlib import Path
import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel
import minisweagent

base_url, source, count, workers, score = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
config = yaml.safe_load((Path(minisweagent.__file__).parent / "config" / "mini.yaml").read_text())
agent_config = {**config["agent"], "step_limit": 10, "cost_limit": 0.0}

def rollout(index):
    folder = Path(tempfile.mkdtemp(prefix="mini-rollout-"))
    try:
        workspace = folder / "calc"
        shutil.copytree(source, workspace)
        model = LitellmModel(model_name="openai/fake-model", cost_tracking="ignore_errors",
                             model_kwargs={"api_base": base_url, "api_key": "sk-bench"})
        agent = DefaultAgent(model, LocalEnvironment(cwd=str(workspace)), **agent_config)
        info = agent.run(f"Case {index}: add() subtracts; make it add.")
        done = subprocess.run(score, shell=True, cwd=workspace, capture_output=True)
        return info.get("exit_status"), done.returncode == 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)

if workers == 0:  # --cpu: one at a time, CPU per warm rollout
    print(json.dumps(cpu_per_rollout(lambda index: rollout(index)[1], count)))
    raise SystemExit
with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    results = list(pool.map(rollout, range(count)))
print(json.dumps({"passed": sum(1 for _, ok in results if ok), "exits": sorted({e for e, _ in results})}))
"""

#: Both ``--cpu`` drivers: run ``count`` rollouts in turn; the median CPU of the warm ones (all
#: but the first), this process's own and its waited-for children's.
CPU_LOOP = r"""
def cpu_per_rollout(run, count):
    import os, statistics
    samples = []
    for index in range(count):
        before = os.times()
        if not run(index):
            raise SystemExit(f"rollout {index} failed")
        after = os.times()
        own = after.user + after.system - before.user - before.system
        children = after.children_user + after.children_system - before.children_user - before.children_system
        if index:
            samples.append((own, children))
    own, children = (round(statistics.median(s[i] for s in samples) * 1000) for i in (0, 1))
    return {"own_ms": own, "children_ms": children, "total_ms": own + children}
"""

#: The Roder side of ``--cpu``: the batch worker's own rollout function, in this process.
RODER_CPU_DRIVER = r"""
import json, sys
from pathlib import Path
from roder_core.batch.tasks import load_tasks
from roder_core.batch.worker import RolloutSpec, RunSettings, resolve_settings, run_rollout

tasks = load_tasks(Path(sys.argv[1]))
settings, _ = resolve_settings(RunSettings(provider="fk"))

def rollout(index):
    return run_rollout(RolloutSpec(task=tasks[index], index=0, settings=settings)).result["passed"]

print(json.dumps(cpu_per_rollout(rollout, len(tasks))))
"""


def steps(count: int, *, mini: bool) -> list[dict[str, Any]]:
    """Two answers per rollout, matched by what the request holds (rollouts run in parallel)."""
    fix = {"text": "THOUGHT: fixing add.", "tool_calls": [{"name": "bash", "arguments": {"command": FIX}}]}
    end: dict[str, Any] = (
        {
            "text": "THOUGHT: done.",
            "tool_calls": [{"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}],
        }
        if mini
        else {"text": "Fixed: add now adds."}
    )
    usage = {"input_tokens": 1000, "output_tokens": 20}
    return [{**fix, "unless": "FIXED-OK", "usage": usage} for _ in range(count)] + [
        {**end, "when": "FIXED-OK", "usage": usage} for _ in range(count)
    ]


def mini_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing mini-swe-agent {MINI_VERSION} from PyPI into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"mini-swe-agent=={MINI_VERSION}"], check=True)
    return python


def run_mini(python: Path, base_url: str, source: Path, count: int, workers: int, root: Path) -> tuple[float, dict[str, Any]]:
    driver = root / "mini_driver.py"
    driver.write_text(CPU_LOOP + MINI_DRIVER)
    env = {
        **os.environ,
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    started = time.monotonic()
    done = subprocess.run(
        [str(python), str(driver), base_url, str(source), str(count), str(workers), SCORE],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"mini-swe-agent failed: {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def compile_bytecode(tree: Path | None) -> None:
    """Compile Roder's packages as pip does when it installs them: the folders ``roder`` imports
    them from (``tree``'s, or this interpreter's), asked from a neutral folder."""
    code = (
        "import compileall, os, roder_core, roder_tui, roder_ext_mock\n"
        "for module in (roder_core, roder_tui):\n"
        "    compileall.compile_dir(os.path.dirname(module.__file__), quiet=1)\n"
        "compileall.compile_dir(os.path.dirname(os.path.dirname(roder_ext_mock.__file__)), quiet=1)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir(), env=_roder_env(tree, {}))


def _roder_env(tree: Path | None, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RODER_")} | extra
    if tree is not None:  # that checkout's packages and built-in extensions first
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "extensions"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_roder(
    base_url: str, source: Path, count: int, workers: int, root: Path, tag: str, tree: Path | None = None, backend: str = "local"
) -> tuple[float, dict[str, Any]]:
    home, tasks = _roder_inputs(base_url, source, count, root, tag)
    out = root / f"out-{tag}"
    env = _roder_env(tree, {"RODER_HOME": str(home)})
    argv = [sys.executable, "-m", "roder_tui.cli", "batch", str(tasks), "--out", str(out), "--workers", str(workers)]
    argv += ["--provider", "fk", "--no-progress", "--backend", backend]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"roder batch failed: {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    sandboxes = {json.loads(p.read_text()).get("score_sandbox") for p in out.glob("rollouts/*/0/result.json")}
    phases = _phases(out)
    return wall, {"passed": summary["passed"], "score_sandbox": sorted(s for s in sandboxes if s), "phases": phases}


def _roder_inputs(base_url: str, source: Path, count: int, root: Path, tag: str) -> tuple[Path, Path]:
    """A ``RODER_HOME`` whose config defines the provider ``fk`` (the model server), and the tasks."""
    home = root / f"home-{tag}"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[providers.fk]\ndialect = "chat-completions"\nbase_url = "{base_url}"\nmodels = ["fake-model"]\n'
    )
    tasks = root / f"tasks-{tag}.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"t{i:04d}",
                    "prompt": f"Case {i}: add() subtracts; make it add.",
                    "workspace": str(source),
                    "score": SCORE,
                }
            )
            + "\n"
            for i in range(count)
        )
    )
    return home, tasks


def roder_cpu(base_url: str, source: Path, count: int, root: Path, tag: str, tree: Path | None = None) -> dict[str, Any]:
    """``--cpu``: Roder's batch rollouts one after another in one process (``RODER_CPU_DRIVER``)."""
    home, tasks = _roder_inputs(base_url, source, count, root, tag)
    driver = root / "roder_cpu_driver.py"
    driver.write_text(CPU_LOOP + RODER_CPU_DRIVER)
    env = _roder_env(tree, {"RODER_HOME": str(home)})
    done = subprocess.run([sys.executable, str(driver), str(tasks)], capture_output=True, text=True, env=env, cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"roder's rollouts failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _phases(out: Path) -> dict[str, float]:
    """Mean seconds per rollout in each phase the worker records (setup: workspace copy,
    baseline and runner guard; agent: runtime start and the turn; score: the sandboxed score)."""
    totals: dict[str, list[float]] = {}
    for path in out.glob("rollouts/*/0/result.json"):
        for key, value in json.loads(path.read_text()).get("timings", {}).items():
            totals.setdefault(key, []).append(float(value))
    return {key: round(sum(values) / len(values), 3) for key, values in sorted(totals.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of both harnesses")
    parser.add_argument(
        "--mini-venv", type=Path, default=Path.home() / ".cache" / "roder-bench" / f"mini-swe-agent-{MINI_VERSION}"
    )
    parser.add_argument("--baseline", type=Path, help="also run `roder batch` from this checkout's sources, interleaved")
    parser.add_argument("--no-bytecode", action="store_true", help="leave Roder's modules without compiled bytecode")
    parser.add_argument("--ray", action="store_true", help="also run `roder batch --backend ray` (needs ray installed)")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="also: CPU per warm rollout over N rollouts in turn")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from roder_core.testing.fake_server import ThreadedFakeServer

    python = mini_python(args.mini_venv)
    baseline = args.baseline.resolve() if args.baseline else None
    if not args.no_bytecode:
        for tree in (None, baseline) if baseline else (None,):
            compile_bytecode(tree)
    rows = []
    with tempfile.TemporaryDirectory(prefix="roder-bench-mini-") as scratch:
        root = Path(scratch)
        source = root / "calc"
        source.mkdir()
        (source / "calc.py").write_text(BUGGY)
        for round_ in range(args.rounds):
            load = os.getloadavg()[0]
            with ThreadedFakeServer(steps(args.tasks, mini=True)) as server:
                wall, info = run_mini(python, server.base_url, source, args.tasks, args.workers, root)
            rows.append(("mini-swe-agent " + MINI_VERSION + " (unsandboxed)", round_, wall, load, info))
            load = os.getloadavg()[0]
            with ThreadedFakeServer(steps(args.tasks, mini=False)) as server:
                wall, info = run_roder(server.base_url, source, args.tasks, args.workers, root, f"r{round_}")
            rows.append(("roder batch, local pool (sandboxed score)", round_, wall, load, info))
            if args.ray:
                load = os.getloadavg()[0]
                with ThreadedFakeServer(steps(args.tasks, mini=False)) as server:
                    wall, info = run_roder(server.base_url, source, args.tasks, args.workers, root, f"ray{round_}", backend="ray")
                rows.append(("roder batch, Ray local instance (sandboxed score)", round_, wall, load, info))
            if baseline is not None:
                load = os.getloadavg()[0]
                with ThreadedFakeServer(steps(args.tasks, mini=False)) as server:
                    wall, info = run_roder(server.base_url, source, args.tasks, args.workers, root, f"b{round_}", baseline)
                rows.append((f"roder batch from {baseline}", round_, wall, load, info))
        cpu_rows = []
        for round_ in range(args.rounds if args.cpu else 0):
            with ThreadedFakeServer(steps(args.cpu, mini=True)) as server:
                _wall, cpu = run_mini(python, server.base_url, source, args.cpu, 0, root)
            cpu_rows.append(("mini-swe-agent " + MINI_VERSION, round_, cpu))
            harnesses = [("roder", None), *([(f"roder from {baseline}", baseline)] if baseline else [])]
            for name, tree in harnesses:
                with ThreadedFakeServer(steps(args.cpu, mini=False)) as server:
                    cpu = roder_cpu(server.base_url, source, args.cpu, root, f"cpu{round_}{tree is not None}", tree)
                cpu_rows.append((name, round_, cpu))
    load_now = os.getloadavg()
    averages = " ".join(f"{value:.1f}" for value in load_now)
    print(f"{args.tasks} tasks, {args.workers} at a time; load average {averages} at the end")
    print("| harness | round | load before | wall s | rollouts/s | passed | details |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, round_, wall, load, info in rows:
        details = {k: v for k, v in info.items() if k != "passed"}
        rate = args.tasks / wall
        print(
            f"| {name} | {round_ + 1} | {load:.1f} | {wall:.1f} | {rate:.2f} | {info['passed']}/{args.tasks} "
            f"| {json.dumps(details)} |"
        )
    if cpu_rows:
        print(f"\nCPU per warm rollout, {args.cpu} rollouts in turn in one process (medians, ms)")
        print("| harness | round | own | children | total |")
        print("| --- | --- | --- | --- | --- |")
        for name, round_, cpu in cpu_rows:
            print(f"| {name} | {round_ + 1} | {cpu['own_ms']} | {cpu['children_ms']} | {cpu['total_ms']} |")


if __name__ == "__main__":
    main()
