"""One-shot wall time and peak memory of the real `roder -p`, whole process, offline.

Cases (medians of --runs):
- `python -c pass`, the interpreter floor;
- `roder -p hi` on the mock engine;
- 10 rounds (each a `bash` tool call, `echo round N`) then an answer, on the mock engine and over
  HTTP against the loopback fake model server (`tests/providers/fake_server.py`, chat-completions
  SSE): the task shape of the peers' figures in ../shared/anchors.md;
- with a host: the HTTP cases again while a `roder serve` host runs for the workspace (the
  turn is handed to it over its unix socket; with --baseline, each checkout has a host of its
  own); every other case runs with ``RODER_NO_HOST=1``, in process;
- resume: `roder -p hi -r ID` on a stored thread of --resume-events events (realistic 14-event
  coding turns written through the JSONL store) against `roder -p hi` on a fresh thread; the
  difference is the cost of resuming. Each resume appends a turn, as a user's would.

`--baseline DIR` runs every case also against another checkout of Roder (e.g.
`git archive main | tar -x -C DIR`), interleaved run by run with this one (A, B, A, B...), so
both see the same machine load; the load average is printed with each table. Roder's own packages and
the interpreter's site-packages are byte-compiled first, as a pip install leaves them.

Peers: first, `roder -p` (in process, sandboxed and not, and handed to a running `roder serve`
host started before the run) and every installed peer (`codex exec`, `claude -p`, `pi -p`, found on
PATH, in `--peer-bin DIR` or in the folder `--install-peers` installs them into with npm,
$TMPDIR/roder-bench-peers) play the same 10 shell rounds and answer against a fresh loopback
fake server each, interleaved run by run; a peer's run counts only when the server's request log
shows the rounds happened (see bench/oneshot_peers.py). The table gives each program's median
wall, median CPU and peak RSS, and roder's ratio to each (issue 22: at most 0.4x `codex exec`);
a missing peer is printed as NOT INSTALLED.

    python bench/oneshot.py [--runs 5] [--rounds 10] [--resume-events 10000,100000] [--baseline DIR] [--no-host]
                             [--peer-bin DIR] [--peers-only] [--install-peers]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import oneshot_peers

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = (
    "import resource,subprocess,sys,json,time;t=time.perf_counter();"
    "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
    "w=time.perf_counter()-t;"
    "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(json.dumps({'wall':w,'cpu':u.ru_utime+u.ru_stime,'peak':u.ru_maxrss/1024,"
    "'rc':p.returncode,'err':p.stderr[-400:]}))"
)


def script(rounds: int) -> dict[str, object]:
    steps: list[dict[str, object]] = [
        {"text": f"Round {i}.", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo round {i}"}}]}
        for i in range(rounds)
    ]
    steps.append({"text": "All rounds done."})
    return {"steps": steps}


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, object]:
    """Wall seconds, CPU seconds (user + system, children included) and peak RSS (MiB, of the
    largest single process) of one run, in a fresh wrapper so RUSAGE_CHILDREN is its own; with
    its exit code and the tail of its stderr. Under load, CPU time is the steadier figure."""
    done = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], cwd=cwd, env=env, capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def run_once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """``measure``, stopping the benchmark when the run failed."""
    result = measure(cmd, env, cwd)
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}... failed: {result['err']}")
    return result["wall"], result["cpu"], result["peak"]  # type: ignore[return-value]


#: The columns ``run_summary`` fills.
SUMMARY_HEADER = f"{'wall med':>9} {'cpu med':>8} {'cpu min':>8} {'peak MiB':>9}"


def run_summary(rows: list[tuple[float, float, float]]) -> str:
    """Median wall, median and least CPU, and peak memory of ``run_once`` results."""
    cpus = [c for _, c, _ in rows]
    return (
        f"{statistics.median(w for w, _, _ in rows):>9.3f} {statistics.median(cpus):>8.3f} "
        f"{min(cpus):>8.3f} {max(p for _, _, p in rows):>9.1f}"
    )


def compile_bytecode(root: Path) -> None:
    """pip compiles bytecode when it installs a package; an editable checkout under
    PYTHONDONTWRITEBYTECODE would recompile every module at every start, so compile once first."""
    for folder in ("roder_core", "roder_tui", "extensions"):
        compileall.compile_dir(root / folder, quiet=1)


def checkout_env(root: Path) -> dict[str, str]:
    """What runs another checkout of Roder (a baseline, a candidate) instead of the installed
    one: its folders on PYTHONPATH, its bytecode compiled first (see ``compile_bytecode``)."""
    root = root.resolve()
    compile_bytecode(root)
    return {"PYTHONPATH": f"{root}:{root / 'extensions'}"}


def variants_with(baseline: Path | None) -> dict[str, dict[str, str]]:
    """The environments to compare: this checkout (its bytecode compiled first) and, when given,
    a baseline checkout, each run interleaved with the other."""
    compile_bytecode(ROOT)
    found: dict[str, dict[str, str]] = {"this": {}}
    if baseline is not None:
        found["baseline"] = checkout_env(baseline)
    return found


def compile_dependencies() -> None:
    """pip compiles every dependency's bytecode at install; uv does not unless asked
    (``--compile-bytecode``), and under PYTHONDONTWRITEBYTECODE nothing writes it later, so every
    start would compile pydantic, httpx, ... again (about 0.2 s of CPU here). Compile the
    interpreter's site-packages once, as pip would have, and say so."""
    import importlib.util
    import sysconfig

    import pydantic

    if Path(importlib.util.cache_from_source(pydantic.__file__)).exists():
        return
    site = sysconfig.get_paths()["purelib"]
    print(f"dependencies have no bytecode (installed without compiling it?): compiling {site} once, as pip install does")
    compileall.compile_dir(site, quiet=2, workers=2)


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def print_medians(results: dict[str, list[dict[str, float]]], width: int = 20) -> None:
    """A table of each variant's medians, one column per figure of its runs."""
    keys = list(next(iter(results.values()))[0])
    print(f"{'variant':<9} " + " ".join(f"{k:>{width}}" for k in keys))
    for name, rows in results.items():
        print(f"{name:<9} " + " ".join(f"{statistics.median(r[k] for r in rows):>{width}.2f}" for k in keys))


def start_fake_server(steps: list[dict[str, object]], scratch: Path) -> tuple[subprocess.Popen[str], str]:
    path = scratch / "server-script.json"
    path.write_text(json.dumps({"steps": steps}))
    process = subprocess.Popen(
        [sys.executable, "-m", "roder_core.testing.fake_server", "--script", str(path), "--port", "0", "--model", "m"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def write_big_thread(home: Path, cwd: Path, events: int) -> str:
    """A stored thread of ``events`` events, written by bench/sessions.py's writer."""
    sys.path.insert(0, str(ROOT / "bench"))
    os.environ["RODER_HOME"] = str(home)
    from roder_ext_jsonl_store import JsonlThreadStore
    from sessions import write_thread

    from roder_core.settings.paths import RoderPaths

    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    return asyncio.run(write_thread(store, cwd, events, f"{events} events"))


def measure_with_host(
    cases: dict[str, tuple[list[str], dict[str, str]]], variants: dict[str, dict[str, str]], ws: Path, runs: int
) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """The cases while a `roder serve` host of each variant runs in the workspace (each variant
    with its own RODER_HOME, so its own host; cold cases with RODER_NO_HOST), interleaved run
    by run and variant by variant; the hosts are started before and stopped after."""
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with contextlib.ExitStack() as hosts:
        for env in variants.values():
            hosts.enter_context(oneshot_peers.running_host(env, ws))
        for _ in range(runs):
            for name, (cmd, extra) in cases.items():
                cold = {"RODER_NO_HOST": "1"} if "cold" in name else {}
                for variant, env in variants.items():
                    results.setdefault((name, variant), []).append(run_once(cmd, {**env, **extra, **cold}, ws))
    return results


def compare_peers(opts: argparse.Namespace, scratch: Path) -> None:
    """`roder -p` (sandboxed and not) and every installed peer on the same rounds, interleaved run
    by run (roder, roder unsandboxed, codex, claude, pi, roder, ...), each run against a fresh
    scripted server whose request log must show the rounds really happened
    (``oneshot_peers.check_rounds``)."""
    path = oneshot_peers.search_path(opts.peer_bin)
    found = {peer: oneshot_peers.find(peer, path) for peer in oneshot_peers.PEERS}
    for peer, binary in found.items():
        state = f"{binary} ({oneshot_peers.version(binary, path)})" if binary else "NOT INSTALLED"
        print(f"peer {peer.binary}: {state}")
    for name, why in oneshot_peers.UNMEASURED.items():
        print(f"peer {name}: NOT MEASURED ({why})")
    programs = [(r, Path(sys.executable)) for r in oneshot_peers.RODERS] + [(p, b) for p, b in found.items() if b]
    candidate = checkout_env(opts.candidate) if opts.candidate else {}  # roder's rows run --candidate if given
    ws = scratch / "peers-ws"
    ws.mkdir()
    samples: dict[str, list[tuple[float, float, float]]] = {}
    failures: dict[str, list[str]] = {}
    print(f"load average before the comparison: {load_average()}")
    for run in range(opts.runs):
        for index, (program, binary) in enumerate(programs):
            home = scratch / "peers" / f"{index}-{program.binary}-{run}"
            home.mkdir(parents=True)
            with oneshot_peers.ScriptedServer(program.steps(opts.rounds), home / "server") as server:
                cmd, extra = program.configure(binary, server.url, home)
                own = candidate if program in oneshot_peers.RODERS else {}
                env = {**oneshot_peers.clean_env(path, home), **extra, **own}
                with oneshot_peers.running_host(env, ws) if program.hosted else contextlib.nullcontext():
                    result = measure(cmd, env, ws)
            problem = f"exit {result['rc']}: {result['err']}" if result["rc"] != 0 else None
            problem = problem or oneshot_peers.check_rounds(server.log, opts.rounds)
            if problem:
                failures.setdefault(program.label, []).append(problem)
            else:
                samples.setdefault(program.label, []).append((result["wall"], result["cpu"], result["peak"]))  # type: ignore[arg-type]
    print(f"load average after the comparison: {load_average()}")
    print(f"\n{opts.rounds} shell rounds + an answer, loopback server, {opts.runs} interleaved runs:")
    print_comparison(samples, failures, {**{r: Path(sys.executable) for r in oneshot_peers.RODERS}, **found})


def print_comparison(
    samples: dict[str, list[tuple[float, float, float]]],
    failures: dict[str, list[str]],
    programs: dict[oneshot_peers.Program, Path | None],
) -> None:
    """One row per program: runs that passed the check, median wall and CPU, peak RSS, and its
    medians over `codex exec`'s (issue 22's goal: `roder -p` at most 0.4x)."""
    codex = samples.get(oneshot_peers.PEERS[0].label)
    print(f"{'program':<23} {'runs ok':>7} {'wall med':>9} {'CPU med':>8} {'peak MiB':>9} {'wall/codex':>11} {'CPU/codex':>10}")
    for program, binary in programs.items():
        rows = samples.get(program.label, [])
        if binary is None:
            where = f"not on PATH, in --peer-bin nor in {oneshot_peers.PEERS_DIR}; --install-peers installs it"
            print(f"{program.label:<23} NOT INSTALLED ({where})")
            continue
        if not rows:
            print(f"{program.label:<23} FAILED every run: {failures.get(program.label, ['?'])[0][:200]}")
            continue
        wall, cpu = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        ratios = ""
        if codex:
            codex_wall, codex_cpu = statistics.median(r[0] for r in codex), statistics.median(r[1] for r in codex)
            ratios = f"{wall / codex_wall:>10.2f}x {cpu / codex_cpu:>9.2f}x"
        print(f"{program.label:<23} {len(rows):>7} {wall:>9.3f} {cpu:>8.3f} {max(r[2] for r in rows):>9.1f} {ratios}")
        for problem in failures.get(program.label, []):
            print(f"    a failed run, not counted: {problem[:200]}")
    if not codex:
        print("NOTE: no run of codex passed: issue 22's goal (roder -p at most 0.4x `codex exec`) is not checked by this run.")


def measure_roder(opts: argparse.Namespace, scratch: Path) -> None:
    """Roder's own cases (see the module's docstring), against a baseline checkout if given."""
    ws, home = scratch / "ws", scratch / "home"
    ws.mkdir()
    mock_script = scratch / "script.json"
    mock_script.write_text(json.dumps(script(opts.rounds)))
    variants: dict[str, dict[str, str]] = {"this": {}}
    if opts.candidate:
        variants["this"] = checkout_env(opts.candidate)
    if opts.baseline:
        variants["baseline"] = checkout_env(opts.baseline)
    http_runs = opts.runs * len(variants) * (1 if opts.no_host else 4)
    server, url = start_fake_server(script(opts.rounds)["steps"] * http_runs, scratch)  # type: ignore[operator]
    home.mkdir()
    (home / "config.toml").write_text(f'[providers.loop]\ndialect = "chat-completions"\nbase_url = "{url}"\nmodels = ["m"]\n')
    base_env = {k: v for k, v in os.environ.items() if k not in ("RODER_MOCK_SCRIPT", "PYTHONPATH")}
    base_env["RODER_HOME"] = str(home)
    host_env = dict(base_env)
    base_env["RODER_NO_HOST"] = "1"
    roder = [sys.executable, "-m", "roder_tui.cli"]
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass (interpreter floor)": ([sys.executable, "-c", "pass"], {}),
        "roder -p hi (mock, no tools)": ([*roder, "-p", "hi", "--provider", "mock"], {}),
        f"roder -p, {opts.rounds} bash rounds (mock)": (
            [*roder, "-p", "go", "--provider", "mock", "--mode", "bypass"],
            {"RODER_MOCK_SCRIPT": str(mock_script)},
        ),
        f"roder -p, {opts.rounds} bash rounds (HTTP)": (
            [*roder, "-p", "go", "--provider", "loop", "--model", "m", "--mode", "bypass"],
            {},
        ),
    }
    hosted: dict[str, tuple[list[str], dict[str, str]]] = {}
    if not opts.no_host:
        hosted = {
            "roder -p hi (HTTP, with a host)": ([*roder, "-p", "hi", "--provider", "loop", "--model", "m"], {}),
            f"roder -p, {opts.rounds} bash rounds (HTTP, with a host)": (
                [*roder, "-p", "go", "--provider", "loop", "--model", "m", "--mode", "bypass"],
                {},
            ),
            "roder -p hi (HTTP, cold)": ([*roder, "-p", "hi", "--provider", "loop", "--model", "m"], {}),
        }
    for size in [int(s) for s in opts.resume_events.split(",") if s.strip()]:
        thread_id = write_big_thread(home, ws, size)
        cases[f"roder -p hi -r, {size} events (mock)"] = ([*roder, "-p", "hi", "-r", thread_id, "--provider", "mock"], {})
    try:
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        print(f"load average before: {load_average()}")
        for name, (cmd, extra) in cases.items():
            for _ in range(opts.runs):
                for variant, venv in variants.items():
                    sample = run_once(cmd, {**base_env, **extra, **venv}, ws)
                    results.setdefault((name, variant), []).append(sample)
        if hosted:
            host_envs = {}
            for variant, venv in variants.items():  # a home (so a host) of each variant's own
                variant_home = home.with_name(f"home-{variant}")
                shutil.copytree(home, variant_home, dirs_exist_ok=True)
                host_envs[variant] = {**host_env, **venv, "RODER_HOME": str(variant_home)}
            results.update(measure_with_host(hosted, host_envs, ws, opts.runs))
        print(f"load average after: {load_average()}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{'case':<44} {'variant':<9} {'wall med':>9} {'wall min':>9} {'CPU med':>8} {'peak MiB':>9}")
    for (name, variant), rows in results.items():
        walls, cpus = [w for w, _, _ in rows], [c for _, c, _ in rows]
        print(
            f"{name:<44} {variant:<9} {statistics.median(walls):>9.3f} {min(walls):>9.3f} "
            f"{statistics.median(cpus):>8.3f} {max(p for _, _, p in rows):>9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--resume-events", default="10000", help="comma-separated sizes; empty to skip")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to compare, interleaved")
    parser.add_argument("--candidate", type=Path, help="measure this checkout instead of the installed one")
    parser.add_argument("--no-host", action="store_true", help="skip the cases with a running `roder serve` host")
    parser.add_argument("--peer-bin", type=Path, help="a folder holding codex, claude and pi (e.g. an npm prefix's bin)")
    parser.add_argument("--peers-only", action="store_true", help="run only the comparison with the peers")
    parser.add_argument(
        "--install-peers", action="store_true", help=f"npm install the peers into {oneshot_peers.PEERS_DIR} first"
    )
    opts = parser.parse_args()
    if opts.install_peers:
        oneshot_peers.install()
    compile_dependencies()
    compile_bytecode(ROOT)
    if opts.baseline:
        compile_bytecode(opts.baseline)
    with tempfile.TemporaryDirectory(prefix="roder-oneshot-") as tmp:
        scratch = Path(tmp)
        compare_peers(opts, scratch)
        if not opts.peers_only:
            measure_roder(opts, scratch)


if __name__ == "__main__":
    main()
