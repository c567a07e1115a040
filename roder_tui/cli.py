"""The ``roder`` command. Parses arguments and hands off; imports nothing heavy up front.

``roder [PROMPT]`` opens the full-screen app; ``roder -p PROMPT`` answers once on stdout; the
subcommands below are loaded only when named, so ``roder -p`` never imports Textual.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from roder_core import __version__
from roder_tui.startup import end_startup

if TYPE_CHECKING:  # argparse loads when a command line is parsed: `roder sessions list` parses none
    import argparse

#: name -> (module with ``add_arguments(parser)`` and ``run(args) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "tools": ("roder_tui.commands.tools", "list every tool (built-in, extension, MCP) with its source"),
    "mcp": ("roder_tui.commands.mcp", "list MCP servers with their status, errors and tools; sign in to (out of) one"),
    "trust": ("roder_tui.commands.trust", "trust a folder: load its config, hooks, skills, commands, agents, MCP"),
    "untrust": ("roder_tui.commands.untrust", "stop loading a folder's own config, hooks and extensions"),
    "extensions": ("roder_tui.commands.extensions", "list installed extensions and their capabilities"),
    "providers": ("roder_tui.commands.providers", "list configured providers, their endpoints and whether keys are set"),
    "models": ("roder_tui.commands.models", "list each provider's models with context window, limits and prices"),
    "audit": ("roder_tui.commands.audit", "verify the audit log's hash chain (tamper check) or show its last records"),
    "sessions": ("roder_tui.commands.sessions", "list, show, fork, export (markdown, JSON trajectory) or delete threads"),
    "replay": ("roder_tui.commands.replay", "re-run a thread's user turns on another provider/model and compare"),
    "app-server": ("roder_tui.commands.app_server", "JSON-RPC control plane on stdio or an authenticated WebSocket"),
    "serve": ("roder_tui.commands.serve", "a background host that outlives the terminal (--status, --stop)"),
    "attach": ("roder_tui.commands.attach", "open the app on a running host (this user's, or ws://HOST:PORT)"),
    "web": ("roder_tui.commands.web", "serve the app to browsers (phones too) as clients of the host"),
    "acp": ("roder_tui.commands.acp", "run as an Agent Client Protocol agent on stdio (Zed, Toad, ...)"),
    "batch": ("roder_tui.commands.batch", "run a JSONL file of tasks (evals, RL rollouts) locally or on Ray, resumably"),
    "doctor": ("roder_tui.commands.doctor", "show what the command sandbox enforces here: capabilities, seccomp, masks, limits"),
    "exec": ("roder_tui.commands.exec", "run one task (fresh workspace, setup, score) with JSONL events on stdout"),
    "plugin": (
        "roder_tui.commands.plugin",
        "Claude Code plugins: marketplace add|list|remove|refresh, search, preview, install, list, enable, disable, "
        "configure, uninstall, import-claude",
    ),
    "dev": ("roder_tui.commands.dev", "developer tools: `roder dev fake-server` (a loopback model server)"),
}

OUTPUT_FORMATS = ("text", "json", "stream-json")


def add_runtime_flags(parser: argparse.ArgumentParser, *, trust_flag: bool = True) -> None:
    """Flags shared by the app, one-shot mode, servers and batch runs (which never trust a folder)."""
    from roder_core.modes import Mode

    parser.add_argument("--provider", help="inference provider id (see `roder providers list`)")
    parser.add_argument("--model", help="model id for the provider")
    # The values, not the members: argparse prints choices with repr() in its error.
    parser.add_argument("--mode", choices=[mode.value for mode in Mode], help="policy mode")
    parser.add_argument("--sandbox", choices=("workspace-write", "read-only", "off"), help="sandbox level for commands")
    parser.add_argument("--profile", default="developer", help="capability profile (developer, eval-sandbox, offline)")
    if trust_flag:
        parser.add_argument("--trust", action="store_true", help="load this folder's own config, hooks and extensions")
    parser.add_argument("--max-iterations", type=int, help="stop a turn after this many model calls")


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="roder",
        description="Roder: a terminal coding agent. `roder` opens the app; `roder -p PROMPT` answers once.",
        epilog="subcommands: " + "; ".join(f"{name}: {help_}" for name, (_, help_) in SUBCOMMANDS.items()),
    )
    parser.add_argument("prompt", nargs="*", help="initial prompt")
    parser.add_argument(
        "-p",
        "--print",
        dest="print_prompt",
        nargs="?",
        const="",
        default=None,
        metavar="PROMPT",
        help="answer once and exit (stdin is attached when piped)",
    )
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text", help="one-shot output format")
    parser.add_argument(
        "-c", "--continue", dest="continue_last", action="store_true", help="continue the latest thread of this workspace"
    )
    parser.add_argument(
        "-r", "--resume", nargs="?", const="", default=None, metavar="ID", help="resume a thread (a picker opens without ID)"
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run the app on a background host that outlives this terminal (started if none runs; see `roder attach`)",
    )
    parser.add_argument("--version", action="version", version=f"roder {__version__}")
    add_runtime_flags(parser)
    return parser


#: Exit status after the reader of stdout went away (128 + SIGPIPE, what a shell reports for
#: ``yes | head``).
EXIT_BROKEN_PIPE = 141
#: Exit status after Ctrl+C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130
#: Exit status of a configuration no command can run with (a config.toml that cannot be read or
#: names something wrong, an extension the registry refused): the same for every command, as
#: for a command line argparse refuses.
EXIT_CONFIG = 2
#: Subcommands that never touch Roder's folders (the loopback model server).
NO_HOME_SUBCOMMANDS = frozenset({"dev"})
#: Subcommands that leave no thread, child process or server behind when they return, so the
#: process may skip the interpreter's teardown (see ``exit_now``).
FAST_EXIT_SUBCOMMANDS = frozenset(
    {"tools", "extensions", "providers", "models", "audit", "sessions", "trust", "untrust", "plugin"}
)
#: Subcommands whose stdio carries a protocol (JSON-RPC, ACP) for a program, not text for a person.
PROTOCOL_SUBCOMMANDS = frozenset({"app-server", "acp"})


def main(argv: Sequence[str] | None = None) -> int:
    return _guarded(list(sys.argv[1:] if argv is None else argv))[0]


def _guarded(args_list: list[str]) -> tuple[int, bool]:
    """Run one command; a closed stdout (``roder ... | head``) ends it quietly, as Unix tools do."""
    # before logging holds on to stderr: nothing printed to a terminal goes raw. A protocol
    # subcommand's stdout is its JSON-RPC channel, left as it is; its stderr (warnings that
    # quote an MCP server's output, the listen banner) is for a person like any other
    protocol = bool(args_list) and args_list[0] in PROTOCOL_SUBCOMMANDS
    _guard_terminals(("stderr",) if protocol else ("stdout", "stderr"))
    try:
        status = _listed_from_index(args_list)
        if status is None:
            # Log records (warnings from extensions, MCP servers) reach stderr once, with one prefix.
            import logging

            logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="roder: %(message)s")
            status, fast = _dispatch(args_list)
        else:
            fast = True
        sys.stdout.flush()  # a pipe closed after the last write fails here, not at interpreter exit
        return status, fast
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE, False
    except KeyboardInterrupt:  # Ctrl+C before a command could handle it (start-up): one line, no traceback
        print("\nroder: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED, False
    except Exception as exc:
        if not _is_configuration_error(exc):
            raise
        print(f"roder: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG, False


def _is_configuration_error(exc: Exception) -> bool:
    """Whether ``exc`` says the configuration is wrong: the one place that decides, so every
    command reports one the same way (commands let these errors rise rather than catch them).
    Their classes load only when something was raised, not on every start."""
    from roder_core.kernel.registry import RegistryError
    from roder_core.settings.config import ConfigError

    return isinstance(exc, (ConfigError, RegistryError))


def one_line(message: str) -> str:
    """A message's lines joined with "; ": a configuration error is one line on stderr."""
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def _guard_terminals(names: tuple[str, ...]) -> None:
    """``guard_stdio`` of these streams, whose module (and its sanitizer's pattern) is loaded
    only when one of them is a terminal: a command whose output goes to pipes or files needs
    neither."""
    for name in names:
        stream = getattr(sys, name)
        try:
            tty = stream is not None and stream.isatty()
        except (OSError, ValueError):  # closed, or not a real stream
            continue
        if tty:
            from roder_tui.terminal_text import guard_stdio

            guard_stdio(names)
            return


def _listed_from_index(args_list: list[str]) -> int | None:
    """``roder sessions list`` answered from the thread index before any command line is parsed
    or logging is set up (``session_listing.quick_list``); None for every other command, and
    for a listing only a full start can answer (it then runs as any subcommand)."""
    if args_list[:2] != ["sessions", "list"]:
        return None
    from roder_tui.commands.session_listing import quick_list

    return quick_list(args_list[2:])


def _home_problem() -> str | None:
    """Why Roder's folders cannot be used (see ``RoderPaths.unusable_reason``), or None."""
    from roder_core.settings.paths import RoderPaths

    return RoderPaths.from_env().unusable_reason()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _dispatch(args_list: list[str]) -> tuple[int, bool]:
    """Run the command; returns its exit code and whether a fast exit is safe afterwards."""
    if args_list and args_list[0] in SUBCOMMANDS:
        module_name, help_ = SUBCOMMANDS[args_list[0]]
        module = importlib.import_module(module_name)
        end_startup()
        import argparse

        sub = argparse.ArgumentParser(prog=f"roder {args_list[0]}", description=help_)
        module.add_arguments(sub)
        if (noun := bare_noun(sub, args_list[1:])) is not None:
            noun.print_help()  # `roder tools`, `roder plugin marketplace`: what it can do, as `gh repo` shows
            return 0, True
        sub_args = sub.parse_args(args_list[1:])
        if args_list[0] not in NO_HOME_SUBCOMMANDS and (problem := _home_problem()):
            print(f"roder: {problem}", file=sys.stderr)
            return 1, False
        return int(module.run(sub_args) or 0), args_list[0] in FAST_EXIT_SUBCOMMANDS
    args = build_parser().parse_args(args_list)
    if problem := _home_problem():
        print(f"roder: {problem}", file=sys.stderr)
        return 1, False
    if args.print_prompt is not None:
        from roder_tui.ask import run_ask

        return run_ask(args), True
    if args.detach:
        from roder_tui.commands.attach import detach

        end_startup()
        return detach(args), False
    from roder_tui.app import run_app

    # The app turns the collector back on itself, once its runtime is up (``RoderApp._boot``).
    return run_app(args), False


def bare_noun(parser: argparse.ArgumentParser, args: list[str]) -> argparse.ArgumentParser | None:
    """The parser of a command named without the action it needs (``roder tools``, ``roder
    plugin marketplace``), or None when an action (or anything else) follows.

    Such a command prints its usage with its actions and exits 0, as ``gh repo`` and ``docker
    container`` do, for every subcommand alike, rather than argparse's "the following arguments
    are required" and exit 2; an action still has to be named to act, so nothing runs unasked.
    """
    import argparse

    while True:
        actions = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        if not actions:
            return None
        if not args:
            return parser
        named = actions[0].choices.get(args[0])
        if named is None:
            return None
        parser, args = named, args[1:]


def exit_now(code: int) -> NoReturn:
    """Flush what the user is owed, then end the process without the interpreter's teardown.

    Tearing down a process that imported pydantic, asyncio and every extension (freeing each
    module and object, running the garbage collector over them) took 70-130 ms after the
    answer was printed. By the time a one-shot command returns, its runtime is closed: the
    thread files are fsynced and closed, child processes are gone. What remains is flushing
    stdio and logging's handlers, done here before ``os._exit``.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: the reader went away
            code = code or 1
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    os._exit(code)


def run() -> None:
    """The ``roder`` console script: ``main``, then a fast exit where nothing is left running."""
    from roder_core.settings import code_cache

    gc.disable()  # until end_startup()
    code_cache.install()  # start-up's compiled snippets, kept between runs
    code, fast = _guarded(sys.argv[1:])
    code_cache.save()
    # A profiler or coverage tracer writes its data at interpreter exit: let it.
    if fast and sys.getprofile() is None and sys.gettrace() is None:
        exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
