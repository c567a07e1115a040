"""Where rollouts run. Both backends run the same ``worker.run_rollout``, report each outcome
as it arrives and schedule again the rollouts the driver's ``on_done`` hands back (retries of
infrastructure failures).

- ``local``: N worker processes on this machine (``pool``: spawned, so no state leaks from the
  driver; a crashed worker loses only its own rollout; workers stop with the driver, even when
  it is killed).
- ``ray``: ``run_rollout`` submitted as Ray tasks to ``ray.init(address=...)`` (``--ray-address``
  or ``RAY_ADDRESS``), or to a new local Ray instance with N CPUs when no address is given (extra
  the ``ray`` extra). Ray is imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from roder_core.batch.pool import OnDone, run_local
from roder_core.batch.worker import RolloutSpec, run_rollout

BACKENDS = ("local", "ray")


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot start (Ray not installed, cluster unreachable)."""


class RayTaskLost(RuntimeError):
    """A rollout's Ray task ended without an outcome (its worker died, its node went away)."""


def one_line(exc: BaseException) -> str:
    """What went wrong, on one line: Ray's errors carry the remote traceback in their text."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return one_line(cause)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Traceback", "File ", "^"))]
    text = useful[-1] if useful else type(exc).__name__
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"


def _preflight_nodes(ray: Any, specs: Sequence[RolloutSpec]) -> None:
    """Run ``node_preflight`` once on every alive node; refuse the batch if one cannot run it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from roder_core.batch.worker import node_preflight

    declared = dict(specs[0].task.env)
    for spec in specs[1:]:
        declared = {k: v for k, v in declared.items() if spec.task.env.get(k) == v}
    check = ray.remote(num_cpus=0)(node_preflight)
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    refs = [
        check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            specs[0].settings, declared
        )
        for n in nodes
    ]
    try:
        reports = ray.get(refs)
    except Exception as exc:  # the check itself could not run on a node (Ray lost it)
        raise BackendUnavailable(f"preflight could not run on every Ray node: {one_line(exc)}; nothing was run") from None
    failed = [r for r in reports if r["problem"]]
    if failed:
        lines = "; ".join(f"node {r['host']['hostname']} ({r['host'].get('ray_node', '?')[:12]}): {r['problem']}" for r in failed)
        raise BackendUnavailable(
            f"preflight failed on {len(failed)} of {len(nodes)} Ray nodes: {lines}. Set the key in each node's "
            "environment before `ray start` (or store it there with `roder providers login`); nothing was run"
        )


def describe_cluster(ray: Any) -> str:
    """What an existing cluster gives the batch: its CPUs decide how many rollouts run at once."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes))
    return (
        f"Ray cluster with {len(nodes)} node{'s' if len(nodes) != 1 else ''} and {cpus} CPUs: up to {cpus} "
        "rollouts at a time (--workers only sizes a new local instance)"
    )


def run_ray(
    specs: Sequence[RolloutSpec],
    workers: int,
    on_done: OnDone,
    address: str | None = None,
    notice: Callable[[str], None] | None = None,
) -> None:
    try:
        import ray
    except ImportError as exc:
        from roder_core.kernel.install_hints import extra_install_hint

        raise BackendUnavailable(f"the ray backend needs Ray: {extra_install_hint('ray')}") from exc
    started_here = False
    address = address or os.environ.get("RAY_ADDRESS")
    if not ray.is_initialized():
        options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address:
            options["address"] = address
        else:  # a private instance, even when a `ray start` cluster runs on this machine
            options.update(address="local", num_cpus=workers, include_dashboard=False)
        try:
            ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BackendUnavailable(f"could not start or reach Ray ({address or 'local instance'}): {exc}") from exc
        started_here = True
        if address and notice is not None:
            notice(describe_cluster(ray))
    try:
        if specs:
            _preflight_nodes(ray, specs)
    except BaseException:
        if started_here:
            ray.shutdown()
        raise
    # Ray's own retries are off: a retry it made on its own would leave no trace of the lost
    # attempt, so every retry goes through the driver's ``on_done``, which records it first.
    remote_rollout = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(run_rollout)
    pending = {remote_rollout.remote(spec): spec for spec in specs}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                spec = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # the task's worker died or Ray lost it
                    retry = on_done(spec, None, RayTaskLost(one_line(exc)))
                else:
                    retry = on_done(spec, outcome, None)
                if retry is not None:
                    pending[remote_rollout.remote(retry)] = retry
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def run_backend(
    backend: str,
    specs: Sequence[RolloutSpec],
    workers: int,
    on_done: OnDone,
    ray_address: str | None = None,
    notice: Callable[[str], None] | None = None,
) -> None:
    if backend == "ray":
        run_ray(specs, workers, on_done, ray_address, notice)
    else:
        run_local(specs, workers, on_done)
