"""``roder batch TASKS.jsonl --out DIR``: run every task (K times each), resumably, and report.

The heavy lifting is in ``roder_core.batch``; this module parses flags, shows a progress bar
and prints the summary table. Exit codes: 0 every rollout was recorded (pass or fail is in the
summary), 1 some rollouts were lost to crashed workers (re-run to retry them), 2 usage error,
130 interrupted (re-run to resume).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_tui.cli import add_runtime_flags
from roder_tui.docs_links import docs_page

if TYPE_CHECKING:
    from roder_core.batch.outputs import BatchFolder
    from roder_core.batch.tasks import Task
    from roder_core.batch.worker import RunSettings

EXIT_OK, EXIT_LOST, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roder_core.batch.backends import BACKENDS

    parser.add_argument("tasks", type=Path, help=f"task file: one JSON object per line (see {docs_page('batch.md')})")
    parser.add_argument("--out", type=Path, required=True, help="output folder (re-run with the same one to resume)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="rollouts at a time (default: CPUs)")
    parser.add_argument("--backend", choices=BACKENDS, default="local", help="local process pool or Ray")
    parser.add_argument("--ray-address", help="Ray cluster to submit to (default: $RAY_ADDRESS, else a new local Ray instance)")
    parser.add_argument("--repeat", type=int, default=1, metavar="K", help="rollouts per task")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--repo-cache",
        type=Path,
        metavar="DIR",
        help="SWE-bench instances: clone owner/name from DIR/owner__name instead of GitHub",
    )
    rerun = parser.add_mutually_exclusive_group()
    rerun.add_argument("--retry-failed", action="store_true", help="run recorded rollouts that failed again")
    rerun.add_argument("--redo", action="store_true", help="run every selected rollout again, recorded or not")
    parser.add_argument("--filter", metavar="REGEX", help="only tasks whose id matches (re.search)")
    parser.add_argument("--slice", metavar="A:B", help="only tasks A to B-1 of the (shuffled, filtered) list")
    parser.add_argument("--shuffle", action="store_true", help="shuffle the tasks (fixed seed 42) before --filter/--slice")
    parser.add_argument(
        "--attempts",
        type=int,
        default=3,
        metavar="N",
        help="tries per rollout when infrastructure fails (worker death, provider unreachable)",
    )
    add_rollout_flags(parser)


def add_rollout_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of ``roder batch`` and ``roder exec`` alike: how each agent run is set up."""
    parser.add_argument("--deadline", type=float, help="seconds per agent turn (for tasks without their own)")
    parser.add_argument(
        "--task-ledger", action="store_true", help="ask the model to checkpoint in its task ledger before the deadline reserve"
    )
    parser.add_argument(
        "--runner", metavar="NAME", help="run the agent's tools in this runner ([runners.NAME] of config.toml: ssh, container)"
    )
    add_runtime_flags(parser, trust_flag=False)
    parser.set_defaults(profile="eval-sandbox")


def _usage(message: str) -> int:
    sys.stderr.write(f"roder batch: {message}\n")
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from roder_core.batch.backends import BackendUnavailable
    from roder_core.batch.outputs import BatchFolder, BatchFolderError
    from roder_core.batch.tasks import TaskFileError, load_tasks, select_tasks

    if args.workers < 1 or args.repeat < 1 or args.attempts < 1:
        return _usage("--workers, --repeat and --attempts must be at least 1")
    if args.deadline is not None and args.deadline <= 0:
        return _usage("--deadline must be a positive number of seconds")
    try:
        tasks = select_tasks(
            load_tasks(args.tasks, args.repo_cache), pattern=args.filter, window=args.slice, shuffle=args.shuffle
        )
    except TaskFileError as exc:
        return _usage(str(exc))
    if args.backend == "local" and tasks:
        from roder_core.batch.pool import start_worker_server

        start_worker_server()  # the workers' server loads the runtime while the preflight runs
    settings = preflight(settings_from_args(args), "roder batch")
    if isinstance(settings, str):
        return _usage(settings)
    folder = BatchFolder(args.out)
    try:
        with folder.locked():
            folder.claim(settings, str(args.tasks.resolve()))
            return _drive(args, tasks, settings, folder)
    except BrokenPipeError:
        raise  # stdout's reader left: the CLI entry ends quietly
    except (BatchFolderError, BackendUnavailable, OSError) as exc:
        return _usage(str(exc))


def _drive(args: argparse.Namespace, tasks: list[Task], settings: RunSettings, folder: BatchFolder) -> int:
    """Run what is not recorded yet, record each outcome as it arrives, then summarize."""
    from roder_core.batch.backends import run_backend
    from roder_core.batch.retries import Retries
    from roder_core.batch.summary import result_rows, summarize
    from roder_core.batch.worker import RolloutOutcome, RolloutSpec, forwarded_env

    rerun = "all" if args.redo else "failed" if args.retry_failed else None
    todo, done = folder.plan(tasks, args.repeat, settings, forwarded_env(), rerun=rerun)
    retries = Retries(args.attempts)
    existing_cluster = args.backend == "ray" and bool(args.ray_address or os.environ.get("RAY_ADDRESS"))
    where = "an existing Ray cluster" if existing_cluster else f"{args.backend} with {args.workers} workers"
    sys.stderr.write(
        f"roder batch: {len(tasks)} tasks x {args.repeat} = {len(todo) + len(done)} rollouts; {len(done)} already "
        f"recorded, {len(todo)} to run on {where} ({settings.provider}/{settings.model})\n"
    )
    results: list[dict[str, Any]] = list(done)
    lost: list[str] = []
    started = time.monotonic()
    status = EXIT_OK
    with ProgressBar(len(todo), disabled=args.no_progress) as advance:

        def on_done(spec: RolloutSpec, outcome: RolloutOutcome | None, error: BaseException | None) -> RolloutSpec | None:
            retry, final = retries.judge(spec, outcome, error)
            if retry is not None:
                folder.record_attempts(retry)  # on disk before the retry can run
                sys.stderr.write(
                    f"roder batch: rollout {spec.task.id}#{spec.index} attempt {spec.attempt} "
                    f"failed ({retries.describe(outcome, error)}); trying again\n"
                )
                return retry
            assert final is not None
            if error is not None:
                lost.append(f"{spec.task.id}#{spec.index}: {type(error).__name__}: {error}")
                sys.stderr.write(f"roder batch: rollout {spec.task.id}#{spec.index} lost: {error}\n")
            folder.record(final)
            results.append(final.result)
            advance(bool(final.result.get("passed")))
            return None

        def notice(text: str) -> None:
            sys.stderr.write(f"roder batch: {text}\n")

        try:
            run_backend(args.backend, todo, args.workers, on_done, ray_address=args.ray_address, notice=notice)
        except KeyboardInterrupt:
            sys.stderr.write("roder batch: interrupted; run the same command again to resume\n")
            status = EXIT_INTERRUPTED
    summary = summarize(
        results,
        settings=settings,
        repeat=args.repeat,
        wall_time_s=time.monotonic() - started,
        ran=len(results) - len(done),
        skipped=len(done),
    )
    summary["lost"] = lost
    folder.write_summary(summary, result_rows(results))
    folder.write_predictions(tasks, settings)
    print_summary(summary, folder.summary_file)
    return EXIT_LOST if status == EXIT_OK and lost else status


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """Batch-wide settings from the flags ``roder batch`` and ``roder exec`` share."""
    from roder_core.batch.worker import RunSettings

    return RunSettings(
        provider=args.provider,
        model=args.model,
        mode=args.mode or "bypass",
        profile=args.profile,
        sandbox=args.sandbox,
        deadline=args.deadline,
        task_ledger_required=args.task_ledger,
        max_iterations=args.max_iterations,
        runner=args.runner,
    )


def preflight(settings: RunSettings, prog: str) -> RunSettings | str:
    """Pinned settings, or an error line for a provider, model or profile that cannot work."""
    from roder_core.batch.worker import resolve_settings
    from roder_core.errors import RoderError
    from roder_core.settings.config import ConfigError

    try:
        pinned, notices = resolve_settings(settings)
    except ConfigError:  # a ValueError, but one the CLI's one handler reports
        raise
    except (RoderError, ValueError) as exc:
        return str(exc)
    for notice in notices:
        sys.stderr.write(f"{prog}: {notice}\n")
    return pinned


class ProgressBar:
    """A rich progress bar on stderr (only on a terminal); ``advance(passed)`` counts one rollout."""

    def __init__(self, total: int, *, disabled: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from roder_tui.terminal_text import rich_console

        console = rich_console(sys.stderr)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=disabled or not console.is_terminal,
        )
        self._task = self._progress.add_task("rollouts", total=total)
        self._passed = self._failed = 0

    def __enter__(self) -> Any:
        self._progress.start()
        return self.advance

    def advance(self, passed: bool | None) -> None:
        if passed:
            self._passed += 1
        elif passed is not None:
            self._failed += 1
        description = f"rollouts [green]{self._passed} passed[/] [red]{self._failed} failed[/]"
        self._progress.update(self._task, advance=1, description=description)

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def print_summary(summary: dict[str, Any], path: Path) -> None:
    from rich.markup import escape
    from rich.table import Table

    from roder_tui.terminal_text import rich_console

    console = rich_console(sys.stdout)
    table = Table(title="roder batch", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    tokens = summary["tokens"]
    rows = [
        ("rollouts", f"{summary['rollouts']} ({summary['ran_now']} now, {summary['skipped_finished']} recorded before)"),
        ("passed", f"{summary['passed']} / {summary['rollouts']}"),
        ("pass rate", f"{summary['pass_rate']:.1%}"),
    ]
    if summary["repeat"] > 1:
        rows.append((f"pass@{summary['repeat']}", f"{summary['pass_at_k']:.1%}"))
    rows += [
        ("tokens", f"{tokens['total_tokens']:,} ({tokens['input_tokens']:,} in, {tokens['output_tokens']:,} out)"),
        ("cost", f"${summary['cost_usd']:.4f}"),
        ("wall time", f"{summary['wall_time_s']:.1f} s"),
        ("agent time", f"{summary['agent_time_s']['mean']:.1f} s mean per rollout"),
    ]
    for cause, count in summary["failures_by_cause"].items():
        if count:
            rows.append((f"failed: {cause.replace('_', ' ')}", str(count)))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    failures = summary["failures"]
    for failure in failures[:20]:
        reason = failure.get("error") or failure.get("exit_reason")
        console.print(
            f"  [red]x[/] {escape(failure['task_id'])}#{failure['rollout']}: {failure['failure_cause']} ({escape(str(reason))})",
            highlight=False,
        )
    if len(failures) > 20:
        console.print(f"  ... and {len(failures) - 20} more in {path}")
    console.print(f"summary: {path}", highlight=False)
