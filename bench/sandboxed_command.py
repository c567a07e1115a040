"""What one sandboxed command costs against the same command unsandboxed and a bare spawn.

    python bench/sandboxed_command.py [--runs 40] [--rounds 3] [--baseline DIR] [--oneshot 3]

Each checkout (this one, and with ``--baseline DIR`` another, e.g. ``git archive main | tar -x -C
DIR``) runs in a process of its own; rounds alternate between the checkouts (A, B, A, B...) so
both see the same machine load. In every round a checkout runs ``true`` ``--runs`` times in each
case, interleaved command by command:

- ``sandboxed``: through the real process broker, ``workspace-write``, bound to a thread's
  loopback network (as every command of a `roder -p` is), with the default limits (a cgroup
  where one is writable);
- ``--sandbox off``: the same broker with the sandbox off;
- ``bare spawn``: ``subprocess.run(["true"])``, the floor.

A checkout that makes a thread's next command ahead (its cgroup, its held shell, the move into
the cgroup: ``roder_core.brokers.next_start``) does it after each command, as it would while the
model thinks: the script waits for it outside the command's wall time and counts its CPU in the
command's.

Printed per case: median wall per command and CPU per command. CPU is that of every process
involved, the sandbox's included, read from a cgroup's CPU accounting that the measuring process
joins (root, or a delegated cgroup); elsewhere it falls back to ``getrusage``, which misses what
runs inside bubblewrap's PID namespace, and the table says so. The load average is printed with
each table. The workspace is a small git repository (the tree guard walks it before and after).

``--oneshot N`` adds the whole-process view: `roder -p`, `roder -p --sandbox off` and `roder -p`
handed to a running `roder serve` host (started before each run, not counted; CPU is then the
client's alone) of each checkout play 10 shell rounds and an answer against a fresh loopback
model server (as in ``bench/oneshot.py``'s comparison with the peers), N interleaved runs; the
difference between the first two, divided by the rounds, is what the sandbox costs a real
command. ``bench/oneshot.py`` puts the same programs beside `codex exec`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Runs inside each checkout's process: prints one JSON object of samples per case.
WORKER = r"""
import asyncio, json, os, subprocess, sys, tempfile, time
from pathlib import Path

root, runs = Path(sys.argv[1]), int(sys.argv[2])
sys.path[:0] = [str(root), str(root / "extensions")]
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.netns import ThreadNetwork
from roder_core.brokers.process import HostProcessBroker
from roder_core.brokers.sandbox import sandbox_status


sys.path.insert(0, sys.argv[3])
from sandboxed_command import CpuAccount

account = CpuAccount.create()
account.join(os.getpid())


async def main():
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        for index in range(20):
            (ws / f"mod{index}.py").write_text("x = 1\n")

        networks = {}

        def broker(name, level):
            plain = HostProcessBroker(
                WorkspaceFileSystem(ws), sandbox=sandbox_status(level), spill_dir=Path(tmp) / "spill",
                quarantine_dir=Path(tmp) / "quarantine",
            )
            networks[name] = ThreadNetwork("thr_bench")
            return plain.for_thread("thr_bench", networks[name])

        cases = {"sandboxed": broker("sandboxed", "workspace-write"), "--sandbox off": broker("--sandbox off", "off")}
        try:
            await measure(cases, networks)
        finally:
            for network in networks.values():
                network.close()


async def measure(cases, networks):
    for process in cases.values():
        result = await process.run("true")
        assert result.exit_code == 0, result.output
    wall = {name: [] for name in [*cases, "bare spawn"]}
    used = dict.fromkeys(wall, 0.0)
    for _ in range(runs):
        for name, process in cases.items():
            before, started = account.used(), time.perf_counter()
            await process.run("true")
            wall[name].append(time.perf_counter() - started)
            # A checkout that makes the thread's next command ahead (while the model would
            # think) does it here: its CPU is this command's, its wall is not.
            ahead = getattr(networks[name], "next_start", None)
            if ahead is not None:
                await ahead.ready()
            used[name] += account.used() - before
        before, started = account.used(), time.perf_counter()
        subprocess.run(["true"], check=True)
        wall["bare spawn"].append(time.perf_counter() - started)
        used["bare spawn"] += account.used() - before
    print(json.dumps({"wall": wall, "cpu": {k: v / runs for k, v in used.items()}, "cgroup": account.folder is not None}))


try:
    asyncio.run(main())
finally:
    account.remove()
"""


class CpuAccount:
    """CPU time of a set of processes and all they start, the sandbox's included: a cgroup with
    CPU accounting of its own (v1 ``cpuacct`` or v2 ``cpu.stat``). Where none can be made (no
    writable hierarchy), ``getrusage`` of this process and its reaped children instead, which
    misses what runs inside bubblewrap's PID namespace."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @classmethod
    def create(cls) -> CpuAccount:
        name = f"roder-bench-{os.getpid()}-{time.monotonic_ns()}"
        for mount in (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
            folder = mount / name
            try:
                folder.mkdir()
            except OSError:
                continue
            if (folder / "cpuacct.usage").exists() or (folder / "cpu.stat").exists():
                return cls(folder)
            folder.rmdir()
        return cls(None)

    def join(self, pid: int) -> None:
        if self.folder is not None:
            (self.folder / "cgroup.procs").write_text(str(pid))

    def used(self) -> float:
        """CPU seconds so far."""
        if self.folder is None:
            own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        usage = self.folder / "cpuacct.usage"
        if usage.exists():
            return int(usage.read_text()) / 1e9
        stat = dict(line.split() for line in (self.folder / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def discard(self) -> None:
        """Remove the group, which holds no process (any it held have ended)."""
        if self.folder is not None:
            self.folder.rmdir()

    def remove(self) -> None:
        """Move this process back out (its children are gone) and remove the group."""
        if self.folder is not None:
            (self.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.folder.rmdir()


def accounted_run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str | None]:
    """Wall and CPU seconds of one run of ``cmd`` and everything it starts, and what went wrong."""
    account = CpuAccount.create()
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        started = time.perf_counter()
        child = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=(lambda: account.join(os.getpid())) if account.folder is not None else None,
        )
        _, err = child.communicate()
        wall = time.perf_counter() - started
        if account.folder is None:
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = now.ru_utime + now.ru_stime - reaped.ru_utime - reaped.ru_stime
        else:
            cpu = account.used()
    finally:
        account.discard()
    problem = f"exit {child.returncode}: {err.decode(errors='replace')[-400:]}" if child.returncode else None
    return wall, cpu, problem


def run_checkout(root: Path, runs: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(root), str(runs), str(ROOT / "bench")],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    if done.returncode != 0:
        raise SystemExit(f"{root}: the measurement failed:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def oneshot(checkouts: dict[str, Path], runs: int, rounds: int = 10) -> None:
    """`roder -p` sandboxed and not, per checkout, interleaved run by run (see the docstring)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import oneshot as whole  # the bench's sibling scripts
    import oneshot_peers

    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    probe = CpuAccount.create()
    counted = probe.folder is not None
    probe.discard()
    loads = [os.getloadavg()[0]]
    path = oneshot_peers.search_path(None)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        ws = scratch / "ws"
        ws.mkdir()
        envs = {name: whole.checkout_env(root) for name, root in checkouts.items()}
        for run in range(runs):
            for name in checkouts:
                for program in oneshot_peers.RODERS:
                    home = scratch / f"{name}-{program.label}-{run}".replace(" ", "_")
                    home.mkdir()
                    with oneshot_peers.ScriptedServer(program.steps(rounds), home / "server") as server:
                        cmd, extra = program.configure(Path(sys.executable), server.url, home)
                        env = {**oneshot_peers.clean_env(path, home), **extra, **envs[name]}
                        # hosted: the host starts (not counted) and takes the turn; CPU is the client's
                        with oneshot_peers.running_host(env, ws) if program.hosted else contextlib.nullcontext():
                            wall, cpu, problem = accounted_run(cmd, env, ws)
                    problem = problem or oneshot_peers.check_rounds(server.log, rounds)
                    if problem:
                        raise SystemExit(f"{name}, {program.label}: {problem}")
                    samples.setdefault((name, program.label), []).append((wall, cpu))
                    loads.append(os.getloadavg()[0])
    span = f"load average {min(loads):.1f}-{max(loads):.1f}"
    print(f"\n`roder -p`, {rounds} shell rounds + an answer over HTTP, {runs} interleaved runs; {span}")
    if not counted:
        print("(CPU: getrusage of the process tree, which misses what runs inside bubblewrap's PID namespace)")
    print("| checkout | program | wall median s | CPU median s |")
    print("| --- | --- | --- | --- |")
    for (name, label), rows in samples.items():
        print(f"| {name} | {label} | {statistics.median(r[0] for r in rows):.3f} | {statistics.median(r[1] for r in rows):.3f} |")
    for name in checkouts:
        sandboxed, off = (statistics.median(r[0] for r in samples[(name, p.label)]) for p in oneshot_peers.RODERS[:2])
        print(f"{name}: the sandbox costs {(sandboxed - off) / rounds * 1000:+.1f} ms wall per command in `roder -p`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="commands per case per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per checkout, interleaved")
    parser.add_argument("--baseline", type=Path, help="another checkout of Roder to measure in the same run")
    parser.add_argument("--oneshot", type=int, default=0, metavar="N", help="also N interleaved runs of `roder -p`, 10 rounds")
    args = parser.parse_args()
    checkouts = {"this checkout": ROOT}
    if args.baseline is not None:
        checkouts["baseline"] = args.baseline.resolve()
    loads = [os.getloadavg()[0]]
    walls: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    cpus: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    counted = True
    for _round in range(args.rounds):
        for name, root in checkouts.items():
            result = run_checkout(root, args.runs)
            counted = counted and bool(result["cgroup"])
            for case, samples in result["wall"].items():  # type: ignore[attr-defined]
                walls[name].setdefault(case, []).extend(samples)
            for case, value in result["cpu"].items():  # type: ignore[attr-defined]
                cpus[name].setdefault(case, []).append(value)
            loads.append(os.getloadavg()[0])
    print(f"`true` per command, {args.rounds} rounds x {args.runs} runs per case; load average {min(loads):.1f}-{max(loads):.1f}")
    if not counted:
        print("CPU from getrusage: no writable cgroup, so what runs inside bubblewrap's PID namespace is NOT counted")
    print("| checkout | case | wall median ms | CPU ms per command | wall over bare spawn ms |")
    print("| --- | --- | --- | --- | --- |")
    for name in checkouts:
        bare = statistics.median(walls[name]["bare spawn"])
        for case, samples in walls[name].items():
            wall = statistics.median(samples)
            cpu = statistics.median(cpus[name][case])
            print(f"| {name} | {case} | {wall * 1000:.2f} | {cpu * 1000:.2f} | {(wall - bare) * 1000:+.2f} |")
    for name in checkouts:
        sandboxed = statistics.median(walls[name]["sandboxed"])
        off = statistics.median(walls[name]["--sandbox off"])
        print(f"{name}: the sandbox costs {(sandboxed - off) * 1000:+.2f} ms wall per command over --sandbox off")
    if args.oneshot:
        oneshot(checkouts, args.oneshot)


if __name__ == "__main__":
    main()
