"""How long an edit's result waits for its language-server diagnostics, before and after.

Runs the LSP extension's own manager (``LspManager``: the real servers, confined as Roder runs
them) through what the hook does around an edit (``remember`` before it, ``introduced`` after
it, with the default ``diagnostics_timeout``) for a series of edits to a clean TypeScript file
and a clean Python file: edits that change no diagnostics, then one that breaks the types and
one that fixes them. The first edit of each language (the server starting and analysing the
project) is left out. ``--baseline REV`` runs the same series with the extension as it is at
``REV`` (taken with ``git archive``), interleaved with this checkout, each in a process of its
own; ``--burn N`` runs N CPU-burning processes beside it. Prints per variant and language the
median and max of the clean edits, the breaking edit's time, and what the results said.

    RODER_TEST_LSP_BIN=/work/lsp-tools/node_modules/.bin \\
        python bench/lsp_edit_latency.py --baseline main --burn 2 --edits 5
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

FILES = {
    "typescript": ("clean.ts", "export function add(a: number, b: number): number {\n  return a + b;\n}\nadd(1, 2);\n"),
    "python": ("clean.py", "def add(a: int, b: int) -> int:\n    return a + b\n\n\nadd(1, 2)\n"),
}
BREAK = {"typescript": ("add(1, 2);", "add(1, '2');"), "python": ("add(1, 2)", 'add(1, "2")')}


def burn() -> None:
    while True:
        pass


async def series(edits: int) -> dict[str, Any]:
    """One variant's figures (run in a child whose sys.path starts with the variant's code)."""
    from roder_ext_lsp.manager import LspManager
    from roder_ext_lsp.servers import available

    from roder_core.brokers.secrets import SecretRedactor
    from roder_core.settings.config import LspConfig

    config = LspConfig()
    env = {**os.environ, "PATH": os.pathsep.join(p for p in (os.environ.get("RODER_TEST_LSP_BIN", ""), os.environ["PATH"]) if p)}
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lsp-bench-") as folder:
        workspace = Path(folder)
        specs, _hints = available(config, [], env["PATH"])
        # A trusted folder, as before the trust rule (the baseline's manager has no such argument).
        parameters = inspect.signature(LspManager).parameters
        trusted = (True,) if "trusted" in parameters else ()
        # The run's known secrets (a manager from before they were passed takes none).
        known = (SecretRedactor(),) if "known" in parameters else ()
        manager = LspManager(config, specs, [], workspace, env, *known, [], *trusted)
        try:
            for language, (name, text) in FILES.items():
                path = workspace / name
                path.write_text(text)

                async def edit(new: str, path: Path = path, budget: float = config.diagnostics_timeout) -> tuple[float, str]:
                    manager.remember("t", [path])
                    path.write_text(new)
                    start = time.perf_counter()
                    report = await manager.introduced("t", [path], budget)
                    return time.perf_counter() - start, report

                # The server starts and analyses the project: given all the time it takes.
                await edit(text + ("// warm\n" if language == "typescript" else "# warm\n"), budget=600.0)
                clean = []
                notes = set()
                for i in range(edits):
                    comment = "//" if language == "typescript" else "#"
                    spent, report = await edit(text + f"{comment} edit {i}\n")
                    clean.append(spent)
                    notes.add(report or "(nothing)")
                old, new = BREAK[language]
                broke_time, broke = await edit(text.replace(old, new))
                figures[language] = {
                    "clean_median": statistics.median(clean),
                    "clean_max": max(clean),
                    "clean_said": sorted(notes),
                    "breaking": broke_time,
                    "breaking_said": broke.splitlines()[:2],
                }
        finally:
            await manager.aclose()
    return figures


def variant_root(rev: str, into: Path) -> Path:
    """The extensions folder of ``rev`` with its LSP extension (only that is swapped)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "extensions/roder_ext_lsp"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "extensions"


def run_child(root: Path | None, edits: int) -> dict[str, Any]:
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--edits", str(edits)], env=env, capture_output=True, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=5, help="clean edits per language")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", help="a git revision whose LSP extension is measured too")
    parser.add_argument("--burn", type=int, default=0, help="CPU-burning processes beside it")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(series(args.edits))))
        return
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burn)]
    for burner in burners:
        burner.start()
    try:
        with tempfile.TemporaryDirectory(prefix="lsp-bench-base-") as base:
            variants: list[tuple[str, Path | None]] = [("after", None)]
            if args.baseline:
                variants.insert(0, (f"before ({args.baseline})", variant_root(args.baseline, Path(base))))
            for run in range(args.runs):
                for label, root in variants:
                    load = os.getloadavg()[0]
                    for language, f in run_child(root, args.edits).items():
                        print(
                            f"run {run + 1} {label:<16} {language:<10} load {load:4.1f}  clean edit median "
                            f"{f['clean_median']:6.2f} s max {f['clean_max']:6.2f} s  breaking edit {f['breaking']:6.2f} s"
                        )
                        print(f"    clean said: {f['clean_said']}")
                        print(f"    breaking said: {f['breaking_said']}")
    finally:
        for burner in burners:
            burner.kill()


if __name__ == "__main__":
    main()
