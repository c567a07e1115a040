"""``roder exec PROMPT``: one batch task from the command line, for other harnesses to call.

It runs exactly what a ``roder batch`` rollout runs (fresh workspace copy, setup, agent under
the eval-sandbox profile with a deadline, diff, score) and prints the runtime's events as JSON
Lines on stdout, in the same projection as ``roder -p --output-format stream-json``, followed by
one ``{"type": "result", ...}`` line holding the rollout record. Exit codes: 0 passed, 1 failed,
2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from roder_tui.commands.batch import add_rollout_flags, preflight, settings_from_args

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="*", help="the task (read from stdin when omitted)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--workspace", type=Path, help="folder to copy for the run (default: the current folder)")
    source.add_argument("--git", help="git repository (URL or path) to clone for the run")
    parser.add_argument("--ref", help="commit, tag or branch to check out with --git")
    parser.add_argument("--in-place", action="store_true", help="work in the folder itself instead of a copy")
    parser.add_argument("--setup", action="append", default=[], metavar="CMD", help="run before the agent (repeatable)")
    parser.add_argument("--score", metavar="CMD", help="run after the agent; exit code 0 means passed")
    parser.add_argument("--id", default="exec", help="task id recorded in the result")
    parser.add_argument("--out", type=Path, help="also write the rollout files (thread, trajectory, diff, logs) here")
    add_rollout_flags(parser)


def _task_line(args: argparse.Namespace, prompt: str) -> dict[str, object]:
    line: dict[str, object] = {"id": args.id, "prompt": prompt, "setup": args.setup}
    if args.git:
        line["workspace"] = {"git": args.git, **({"ref": args.ref} if args.ref else {})}
    else:
        line["workspace"] = str((args.workspace or Path.cwd()).resolve())
    if args.score:
        line["score"] = args.score
    return line


def _usage(message: str) -> int:
    sys.stderr.write(f"roder exec: {message}\n")
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from roder_core.batch.outputs import RESULT_FILE, write_rollout
    from roder_core.batch.tasks import TaskFileError, parse_tasks
    from roder_core.batch.worker import RolloutSpec, forwarded_env, run_rollout
    from roder_tui.ask_turn import Printer

    prompt = " ".join(args.prompt).strip()
    if not prompt and not sys.stdin.isatty():
        prompt = sys.stdin.read().strip()
    if not prompt:
        return _usage("needs a prompt (as arguments or on stdin)")
    if args.ref and not args.git:
        return _usage("--ref needs --git")
    if args.in_place and args.git:
        return _usage("--in-place works on a folder, not on --git")
    if args.out is not None and args.out.exists() and any(args.out.iterdir()) and not (args.out / RESULT_FILE).exists():
        return _usage(f"--out {args.out} is a non-empty folder that holds no earlier rollout; choose another")
    try:
        [task] = parse_tasks([json.dumps(_task_line(args, prompt))], "command line", Path.cwd())
    except TaskFileError as exc:
        return _usage(str(exc))
    settings = preflight(settings_from_args(args), "roder exec")
    if isinstance(settings, str):
        return _usage(settings)
    printer = Printer("stream-json", sys.stdout, sys.stderr)
    spec = RolloutSpec(task=task, index=0, settings=settings, env=forwarded_env(), in_place=args.in_place)
    outcome = run_rollout(spec, on_event=lambda event: printer.on_event(event.method, event.params()))
    if args.out is not None:
        write_rollout(args.out, outcome)
    sys.stdout.write(json.dumps({"type": "result", **outcome.result}, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    if not outcome.result.get("passed"):
        reason = (outcome.result.get("error") or {}).get("message") or outcome.result.get("failure_cause")
        sys.stderr.write(f"roder exec: failed: {reason}\n")
        return EXIT_FAILED
    return EXIT_PASSED
