"""`glob` and `grep` in a 100,000-file git tree, against ripgrep in the same run.

The tree (``pkg0..9/mod000..999/f0..9.py``, one line in a hundred files holding ``needle``, a
``.gitignore`` and an ignored ``build/`` folder) is written once under the system's temp folder
and reused. Cases, each run interleaved with its reference and (``--baseline DIR``, another
checkout: ``git archive REV | tar -x -C DIR``) the code before:

- glob ``**/*.py`` against ``rg --files --glob '*.py'``;
- glob ``pkg7/mod777/*.py`` (one folder of 10 files) against ``rg --files pkg7/mod777``;
- grep ``needle`` against ``rg -n needle``.

Each Roder measurement is a fresh child process that times one tool call in process (the
brokers and the tool as a thread gets them; the sandbox level is the machine's default), so
the figure is the call, not the interpreter's start. Wall and CPU (the process and its
children: ripgrep, bubblewrap) are printed, medians, with the load average.

    python bench/monorepo_tools.py [--files 100000] [--runs 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oneshot import checkout_env, load_average

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "glob **/*.py": (["rg", "--files", "--glob", "*.py"], {"tool": "glob", "pattern": "**/*.py"}),
    "glob pkg7/mod777/*.py": (["rg", "--files", "pkg7/mod777"], {"tool": "glob", "pattern": "pkg7/mod777/*.py"}),
    "grep needle": (["rg", "-n", "needle"], {"tool": "grep", "pattern": "needle"}),
}


def build_tree(files: int) -> Path:
    """The tree, written once per size (a marker file says it is complete)."""
    tree = Path(tempfile.gettempdir()) / f"roder-bench-monorepo-{files}"
    if (tree / ".complete").exists():
        return tree
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").write_text("build/\n*.pyc\n.complete\n")
    (tree / "build").mkdir()
    for n in range(1000):
        (tree / "build" / f"out{n}.py").write_text("needle = 'ignored'\n")
    per_folder = 10
    for index in range(files):
        folder = tree / f"pkg{index // (files // 10)}" / f"mod{(index // per_folder) % 1000:03d}"
        if index % per_folder == 0:
            folder.mkdir(parents=True, exist_ok=True)
        body = f"def f{index}():\n    return {index}\n"
        if index % 100 == 0:
            body += "# needle here\n"
        (folder / f"f{index % per_folder}.py").write_text(body)
    (tree / ".complete").write_text("")
    return tree


def cpu_now() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def reference(argv: list[str], tree: Path) -> tuple[float, float, int]:
    before, started = cpu_now(), time.perf_counter()
    done = subprocess.run(argv, cwd=tree, capture_output=True, check=False)
    return time.perf_counter() - started, cpu_now() - before, done.stdout.count(b"\n")


def roder(env: dict[str, str], case: dict[str, str], tree: Path) -> tuple[float, float, int]:
    """One tool call in a fresh child process (``--one``)."""
    done = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(case), "--tree", str(tree)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{case} failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    return result["wall"], result["cpu"], result["lines"]


def one(case: dict[str, str], tree: Path) -> None:
    """Time one tool call in this process (the checkout on PYTHONPATH decides which code)."""
    import asyncio

    from roder_ext_builtin_coding_tools.search import GlobTool, GrepTool

    from tests.tools.harness import context, make_brokers, run_tool

    async def call() -> dict[str, float]:
        with tempfile.TemporaryDirectory() as cache:
            ctx = context(tree, make_brokers(tree, Path(cache), sandbox=None))
            tool = GlobTool() if case["tool"] == "glob" else GrepTool()
            before, started = cpu_now(), time.perf_counter()
            result = await run_tool(tool, ctx, pattern=case["pattern"])
            wall, cpu = time.perf_counter() - started, cpu_now() - before
            if result.is_error:
                raise SystemExit(result.text)
            return {"wall": wall, "cpu": cpu, "lines": result.text.count("\n")}

    print(json.dumps(asyncio.run(call())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, interleaved")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.one:
        one(json.loads(opts.one), opts.tree)
        return
    tree = build_tree(opts.files)
    variants = {"this": checkout_env(ROOT)}
    if opts.baseline:
        variants = {"baseline": checkout_env(opts.baseline), **variants}
    results: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    print(f"tree: {tree} ({opts.files} files); load average before: {load_average()}")
    for _ in range(opts.runs):
        for name, (argv, case) in CASES.items():
            results.setdefault((name, "rg (reference)"), []).append(reference(argv, tree))
            for variant, env in variants.items():
                results.setdefault((name, variant), []).append(roder(env, case, tree))
    print(f"load average after: {load_average()}")
    print(f"{'case':<24} {'who':<15} {'wall med':>9} {'cpu med':>8} {'x rg wall':>9} {'lines':>7}")
    for (name, who), rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        ref = statistics.median(r[0] for r in results[(name, "rg (reference)")])
        print(
            f"{name:<24} {who:<15} {wall:>9.3f} {statistics.median(r[1] for r in rows):>8.3f} {wall / ref:>9.1f} {rows[-1][2]:>7}"
        )


if __name__ == "__main__":
    main()
