"""The local backend: worker processes on this machine, where a crash costs one rollout.

``concurrent.futures.ProcessPoolExecutor`` marks the whole pool broken when one worker dies, and
every rollout queued or running in it is lost with it. Here each worker is a process of its own
with its own pipe: the driver hands it one rollout at a time and waits on the pipes and on the
processes' sentinels together, so a worker that dies (``kill -9``, the OOM killer, a segfault)
is noticed at once, only the rollout it held is reported lost (and retried, if the driver
says so), its scratch folder is removed, and a fresh worker takes its place.

Workers are forked from a fork server (``multiprocessing``'s ``forkserver``, a clean process
started once per batch) that imported the rollout code, the runtime and the extensions first
(``batch.preload``): a worker costs a fork, not an interpreter start and a full import as a
spawned one did. Each worker takes the driver's environment and working folder when it starts,
as a spawned one would (the server's are those of the moment it started). Where there is no fork
server, workers are spawned.

Workers never outlive the driver: the kernel sends them SIGTERM when it dies (Linux's
``PR_SET_PDEATHSIG``), and a thread waiting on the driver's sentinel does the same wherever that
signal is not available or was lost; SIGTERM unwinds the running rollout (so the commands it
started are killed) and a worker still unwinding after ``UNWIND_GRACE`` seconds exits anyway.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from roder_core.batch.worker import RolloutOutcome, RolloutSpec, remove_scratch_of, run_rollout

#: Seconds a worker whose driver died may spend unwinding its rollout before it just exits.
UNWIND_GRACE = 3.0

#: Called once per rollout with its outcome, or with the exception that lost it; returns the
#: rollout to run again (an infrastructure failure with attempts left), or None.
OnDone = Callable[[RolloutSpec, RolloutOutcome | None, BaseException | None], RolloutSpec | None]


class WorkerCrashed(RuntimeError):
    """A worker process died while it ran a rollout."""


# ------------------------------------------------------------------------------- worker side

_stopping = threading.Event()


def _stop(signum: int, _frame: object) -> None:
    if _stopping.is_set():
        return  # already unwinding; a second signal must not interrupt the cleanup
    _stopping.set()
    threading.Timer(UNWIND_GRACE, os._exit, args=(128 + signum,)).start()
    raise SystemExit(128 + signum)


def _die_with_driver() -> None:
    """SIGTERM this worker when the driver dies: from the kernel, and from a thread that waits
    on the driver's sentinel (which becomes ready when the driver is gone, however it died)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    if wait([parent.sentinel], timeout=0):  # the driver died while this worker was starting
        os._exit(1)

    def watch() -> None:
        wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="roder-driver-watch", daemon=True).start()


def _serve(conn: Connection, environ: dict[str, str], cwd: str) -> None:
    """A worker's life: run the rollouts the driver sends until it sends None or goes away.
    Ctrl-C is the driver's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    _die_with_driver()
    os.environ.clear()  # the driver's, as now: a forked worker has the fork server's
    os.environ.update(environ)
    os.chdir(cwd)
    try:
        while True:
            spec = conn.recv()
            if spec is None:
                return
            conn.send(run_rollout(spec))
    except (EOFError, OSError, SystemExit):
        os._exit(1)  # the driver is gone or stopped us: nothing is left to report to


# ------------------------------------------------------------------------------- driver side


class _Worker:
    def __init__(self, context: Any) -> None:
        self.conn, child = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child, dict(os.environ), os.getcwd()), name="roder-rollout-worker", daemon=True
        )
        self.process.start()
        child.close()
        self.pid = self.process.pid

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()  # SIGTERM: the rollout unwinds, its commands are killed
        self.process.join()
        self.conn.close()

    def crash_message(self) -> str:
        self.process.join()
        code = self.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return f"worker process {self.pid} died ({how})"


def worker_context() -> Any:
    """Forked from a fork server that imported the runtime once (``batch.preload``), or
    spawned where the platform has no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["roder_core.batch.preload"])
    return context


def start_worker_server() -> None:
    """Start the fork server now, so its import of the runtime runs beside the driver's own
    start (the preflight) instead of after it; ``run_local`` forks from the same server."""
    if worker_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def run_local(specs: Sequence[RolloutSpec], workers: int, on_done: OnDone) -> None:
    context = worker_context()
    queue = deque(specs)
    idle: list[_Worker] = []
    busy: dict[_Worker, RolloutSpec] = {}
    try:
        while queue or busy:
            while queue and len(busy) < workers:
                worker = idle.pop() if idle else _Worker(context)
                spec = queue.popleft()
                worker.conn.send(spec)
                busy[worker] = spec
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for worker in [w for w in busy if w.conn in ready or w.process.sentinel in ready]:
                spec = busy.pop(worker)
                retry = on_done(spec, *_receive(worker, idle))
                if retry is not None:
                    queue.append(retry)
    except BaseException:
        # Interrupted: stop the running rollouts now, all at once (each unwinds, commands included).
        for worker in busy:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in busy:
            worker.stop()
        raise
    finally:
        for worker in idle:
            try:
                worker.conn.send(None)
            except OSError:
                pass
            worker.process.join()
            worker.conn.close()


def _receive(worker: _Worker, idle: list[_Worker]) -> tuple[RolloutOutcome | None, BaseException | None]:
    """The worker's outcome (the worker goes back to ``idle``), or the crash that lost it."""
    try:
        if worker.conn.poll():
            outcome = worker.conn.recv()
            idle.append(worker)
            return outcome, None
    except (EOFError, OSError):
        pass
    error = WorkerCrashed(worker.crash_message())
    worker.stop()
    remove_scratch_of(worker.pid)
    return None, error
