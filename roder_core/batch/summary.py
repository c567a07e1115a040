"""Aggregates rollout results into summary.json: pass rate, tokens, cost, time, failures by cause."""

from __future__ import annotations

from collections import Counter
from math import comb
from typing import Any

from roder_core.batch.worker import FAILURE_CAUSES, NOT_RUN, RunSettings


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of pass@k from n rollouts with c passes (Chen et al. 2021):
    1 - C(n-c, k) / C(n, k), the chance that k rollouts drawn without replacement include a pass."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at(by_task: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Mean unbiased pass@k over tasks, for every k up to the fewest rollouts any task has."""
    if not by_task:
        return {}
    most = min(len(rs) for rs in by_task.values())
    return {
        str(k): round(
            sum(pass_at_k(len(rs), sum(1 for r in rs if r.get("passed")), k) for rs in by_task.values()) / len(by_task), 4
        )
        for k in range(1, most + 1)
    }


def summarize(
    results: list[dict[str, Any]], *, settings: RunSettings, repeat: int, wall_time_s: float, ran: int, skipped: int
) -> dict[str, Any]:
    """``results`` are every recorded rollout of the task file (this run's and earlier ones).
    Rollouts that could not run here (no container engine, an image that cannot be built) are
    reported apart, with their reasons, and left out of every rate: they say nothing of the agent."""
    not_run = [r for r in results if r.get("exit_reason") == NOT_RUN]
    results = [r for r in results if r.get("exit_reason") != NOT_RUN]
    rollouts = len(results)
    passed = sum(1 for r in results if r.get("passed"))
    by_task: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        by_task.setdefault(result["task_id"], []).append(result)
    causes = Counter(r.get("failure_cause") for r in results if not r.get("passed"))
    usage_keys = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
    totals = {key: sum(int(r.get("usage", {}).get(key, 0)) for r in results) for key in usage_keys}
    agent_times = [r.get("timings", {}).get("agent_s", 0.0) for r in results]
    rewards = [float(r.get("reward", 1.0 if r.get("passed") else 0.0)) for r in results]
    estimates = pass_at(by_task)
    return {
        "settings": settings.as_dict(),
        "repeat": repeat,
        "tasks": len(by_task),
        "rollouts": rollouts,
        "ran_now": ran,
        "skipped_finished": skipped,
        "passed": passed,
        "failed": rollouts - passed,
        "pass_rate": round(passed / rollouts, 4) if rollouts else 0.0,
        #: Unbiased pass@k for k = repeat (or the fewest rollouts a task has), and for every k below.
        "pass_at_k": estimates[max(estimates, key=int)] if estimates else 0.0,
        "pass_at": estimates,
        "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else 0.0,
        "attempts": {
            "retried_rollouts": sum(1 for r in results if int(r.get("attempts") or 1) > 1),
            "discarded_tokens": sum(int(r.get("discarded_tokens") or 0) for r in results),
        },
        "tokens": {**totals, "total_tokens": totals["input_tokens"] + totals["output_tokens"]},
        "cost_usd": round(sum(float(r.get("cost_usd") or 0.0) for r in results), 6),
        "wall_time_s": round(wall_time_s, 3),
        "agent_time_s": {
            "total": round(sum(agent_times), 3),
            "mean": round(sum(agent_times) / len(agent_times), 3) if agent_times else 0.0,
        },
        "failures_by_cause": {cause: causes.get(cause, 0) for cause in FAILURE_CAUSES},
        "not_run": {
            "rollouts": len(not_run),
            "reasons": {f"{r['task_id']}#{r['rollout']}": (r.get("error") or {}).get("message") for r in not_run},
        },
        "per_task": {
            task_id: {
                "rollouts": len(rs),
                "passed": sum(1 for r in rs if r.get("passed")),
                "pass_rate": round(sum(1 for r in rs if r.get("passed")) / len(rs), 4),
                "mean_reward": round(sum(float(r.get("reward", 1.0 if r.get("passed") else 0.0)) for r in rs) / len(rs), 4),
            }
            for task_id, rs in sorted(by_task.items())
        },
        "failures": [
            {k: r.get(k) for k in ("task_id", "rollout", "failure_cause", "exit_reason")}
            | {"error": (r.get("error") or {}).get("message")}
            for r in sorted(results, key=lambda r: (r["task_id"], r["rollout"]))
            if not r.get("passed")
        ],
    }


#: The columns of ``results.csv``: one row per rollout, for a spreadsheet or a data frame.
TABLE_COLUMNS = (
    "task_id",
    "rollout",
    "passed",
    "reward",
    "failure_cause",
    "exit_reason",
    "score_exit_code",
    "score_refused",
    "tests_resolved",
    "tokens",
    "cost_usd",
    "model_calls",
    "tool_calls",
    "agent_s",
    "score_s",
    "total_s",
    "attempts",
    "error",
)


def result_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each recorded rollout as one flat row of ``TABLE_COLUMNS`` (already redacted, as its
    ``result.json`` is), in task and rollout order."""
    rows = []
    for r in sorted(results, key=lambda r: (str(r.get("task_id")), int(r.get("rollout") or 0))):
        score, timings = r.get("score") or {}, r.get("timings") or {}
        rows.append(
            {
                **{key: r.get(key) for key in ("task_id", "rollout", "passed", "failure_cause", "exit_reason", "tokens")},
                "reward": r.get("reward", 1.0 if r.get("passed") else 0.0),
                "score_exit_code": score.get("exit_code"),
                "score_refused": score.get("refused"),
                "tests_resolved": (r.get("tests") or {}).get("resolved"),
                "cost_usd": r.get("cost_usd"),
                "model_calls": r.get("model_calls"),
                "tool_calls": r.get("tool_calls"),
                **{key: timings.get(key) for key in ("agent_s", "score_s", "total_s")},
                "attempts": r.get("attempts"),
                "error": (r.get("error") or {}).get("message"),
            }
        )
    return rows
