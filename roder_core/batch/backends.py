"""Where rollouts run. Both backends hand the same ``worker.run_rollout`` to an existing
scheduler and report each outcome as it arrives; neither schedules anything by hand.

- ``local``: a ``ProcessPoolExecutor`` of N processes on this machine (spawned, so no state
  leaks from the driver; each worker dies with the driver).
- ``ray``: ``run_rollout`` submitted as Ray tasks to ``ray.init(address=...)``, or to a local Ray
  instance with N CPUs when no address is given (extra ``roder[ray]``). Ray is imported only here.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from roder_core.batch.worker import RolloutOutcome, RolloutSpec, run_rollout

BACKENDS = ("local", "ray")

#: Called once per rollout with its outcome, or with the exception that lost it (a crashed
#: worker); a lost rollout is not recorded, so the next run of the batch tries it again.
OnDone = Callable[[RolloutSpec, RolloutOutcome | None, BaseException | None], None]


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot start (Ray not installed, cluster unreachable)."""


def _die_with_parent() -> None:
    """Pool initializer: on Linux, a worker is killed when the driver dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_local(specs: Sequence[RolloutSpec], workers: int, on_done: OnDone) -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_die_with_parent) as pool:
        futures = {pool.submit(run_rollout, spec): spec for spec in specs}
        try:
            for future in as_completed(futures):
                error = future.exception()
                on_done(futures[future], None if error else future.result(), error)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def run_ray(specs: Sequence[RolloutSpec], workers: int, on_done: OnDone, address: str | None = None) -> None:
    try:
        import ray
    except ImportError as exc:
        raise BackendUnavailable('the ray backend needs Ray: pip install "roder[ray]"') from exc
    started_here = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address:
            options["address"] = address
        else:
            options.update(num_cpus=workers, include_dashboard=False)
        try:
            ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BackendUnavailable(f"could not start or reach Ray ({address or 'local instance'}): {exc}") from exc
        started_here = True
    remote_rollout = ray.remote(num_cpus=1)(run_rollout)
    pending = {remote_rollout.remote(spec): spec for spec in specs}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                spec = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # the task's worker died or Ray lost it
                    on_done(spec, None, exc)
                else:
                    on_done(spec, outcome, None)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def run_backend(backend: str, specs: Sequence[RolloutSpec], workers: int, on_done: OnDone,
                ray_address: str | None = None) -> None:
    if backend == "ray":
        run_ray(specs, workers, on_done, ray_address)
    else:
        run_local(specs, workers, on_done)
