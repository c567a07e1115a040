"""``bash {command, timeout?, workdir?, run_in_background?}``: run a shell command through the
process broker, or start it as a background task (the ``shell`` task executor)."""

from __future__ import annotations

import functools
import json
import posixpath
import re
import shlex
import time
from collections.abc import Callable
from pathlib import PurePath
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from roder_core.brokers.command_conditions import CommandConditions, no_network_note
from roder_core.brokers.refusal_notes import refusal_notes
from roder_core.brokers.terminal_text import shown_text
from roder_core.errors import RoderError
from roder_core.ir import CommandExecutionItem, ItemStatus, ToolSpec
from roder_core.kernel.tool_args import NonBlank, PathText, Seconds, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolResult
from roder_core.policy.commandline import background_jobs, shell_subjects, split_command

from .common import BuiltinTool, ToolInputError
from .patch import patch_in_command, rebase_patch

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 3600


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("timeout must be a positive number of seconds")
    return seconds


#: ``bash -c`` / ``sh -lc`` / ``zsh -c``: a shell given the command line as one argument.
_SHELL_C = re.compile(r"^(?:/(?:usr/)?bin/)?(?:ba|z|da)?sh$")
#: ``[ WORD ]``: the shell's test command, its brackets words of their own.
_SHELL_TEST = re.compile(r"\[\s.*\s\]", re.DOTALL)


def _command_line(value: Any) -> Any:
    """A command sent as an argument vector (Codex's ``["bash", "-lc", "ls"]``, or the same
    list as a JSON string) as the command line it stands for: the shell's own command line
    when it is ``SHELL -c LINE``, else the words quoted for the shell. A string that is no
    such list, and anything else, is left to validation. The shell's own test command
    (``[ "$HOME" ]``, ``[ 1 ]``) may read as a JSON list too: a string that is no list of words,
    or one word spaced from its brackets as the test's are, is the command line as written."""
    if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
        try:
            words = json.loads(value)
        except ValueError:
            return value
        if not _words(words) or (len(words) < 2 and _SHELL_TEST.fullmatch(value.strip())):
            return value
        value = words
    if not _words(value):
        return value
    if len(value) == 3 and _SHELL_C.match(value[0]) and value[1] in ("-c", "-lc", "-ic"):
        return value[2]
    return shlex.join(value)


def _words(value: Any) -> bool:
    """Whether ``value`` is an argument vector: a list of one or more strings."""
    return isinstance(value, list) and bool(value) and all(isinstance(word, str) for word in value)


class BashArguments(ToolArguments):
    habit_names = {"cmd": "command", "cwd": "workdir", "working_directory": "workdir", "dir": "workdir"}
    command: Annotated[NonBlank, BeforeValidator(_command_line)] = Field(description="the command line, run with bash -c")
    # A validator rather than ``gt=0``: the schema keeps the keywords every provider accepts.
    timeout: Annotated[Seconds, AfterValidator(_positive)] | None = Field(
        None, description=f"seconds (not milliseconds) before the command is killed (default {DEFAULT_TIMEOUT})"
    )
    workdir: PathText | None = Field(None, description="folder to run in, relative to the workspace")
    run_in_background: bool = Field(
        False, description="start it as a background task and return its task_id at once (default false)"
    )


@functools.cache
def _server_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Commands that serve or watch until stopped (the start of the command, or of a part after &&
    or ;), and what such a program prints. Compiled at the first command that timed out, not at
    start-up (together about 7 ms of every start)."""
    command = re.compile(
        r"(?:^|&&|;|\|\|)\s*(?:\S+=\S*\s+)*(?:"
        r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:dev|start|serve|watch|preview)\b|npx\s+(?:vite|next|serve|nodemon)\b|"
        r"(?:vite|next\s+(?:dev|start)|nodemon|webpack\s+serve|ng\s+serve|serve)\b|"
        r"python3?\s+-m\s+http\.server\b|python3?\s+manage\.py\s+runserver\b|flask\s+run\b|uvicorn\b|gunicorn\b|"
        r"hypercorn\b|rails\s+s(?:erver)?\b|php\s+-S\b|jekyll\s+serve\b|hugo\s+server\b|mkdocs\s+serve\b|"
        r"docker(?:-|\s+)compose\s+up(?![^;&|]*\s-d\b)|tail\s+-[fF]\b|watch\s|cargo\s+watch\b|"
        r"(?:node|deno|bun)\s+\S*(?:server|app|index)\.[cm]?[jt]s\b)"
    )
    output = re.compile(
        r"listening on|listening at|running on https?://|server (?:is )?running|serving (?:http|at|on)|"
        r"local:\s+https?://|started server|development server|watching for (?:file )?changes|press ctrl\+c",
        re.IGNORECASE,
    )
    return command, output


SERVER_NOTE = (
    "[this looks like a server or watcher, which runs until stopped, so it held the call until the timeout: "
    "start it with run_in_background: true, then read its output with task_output and stop it with task_kill]"
)


def looks_like_a_server(command: str, output: str) -> bool:
    server_command, server_output = _server_patterns()
    return bool(server_command.search(command) or server_output.search(output[-4000:]))


#: Commands whose whole effect is on the shell itself, which ends with the call.
_SHELL_STATE = {
    "cd": "the folder cd moved to",
    "pushd": "the folder pushd moved to",
    "source": "what source set up",
    ".": "what . (source) set up",
}


def state_that_ends(command: str) -> str:
    """A note when ``command`` ends by changing only the shell's own state (``cd sub``, ``source
    .venv/bin/activate``, ``export A=1``): the next call starts afresh in the workspace, which a
    model used to a persistent shell does not expect; "" otherwise."""
    split = split_command(command)
    last = split.parts[-1].words if split.parts else []
    if last and last[0] in _SHELL_STATE:
        what = _SHELL_STATE[last[0]]
    elif not split.parts and split.opaque.startswith(("a declaration", "a variable assignment")):
        what = "the variables set here"
    else:
        return ""
    return (
        f"[{what} does not carry over: every bash call starts in a new shell in the workspace; chain the "
        "commands with && in one call (cd sub && make), or pass workdir]"
    )


#: Programs that draw on a terminal's whole screen and wait for keys: with no terminal they fill
#: the output with their screen until the timeout (``vi x`` held a call for its two minutes).
_FULL_SCREEN = {
    "vi": "edit or write",
    "vim": "edit or write",
    "nvim": "edit or write",
    "view": "read",
    "nano": "edit or write",
    "pico": "edit or write",
    "emacs": "edit or write",
    "micro": "edit or write",
    "joe": "edit or write",
    "htop": "ps aux or top -b -n 1",
    "btop": "ps aux or top -b -n 1",
    "nmtui": "nmcli",
    "mc": "ls or glob",
    "ranger": "ls or glob",
}
#: Options that run these programs without a screen (``vim -es``, ``emacs --batch``, ``--version``).
_BATCH_OPTIONS = frozenset({"-es", "-Es", "-e", "--batch", "-batch", "--headless", "+q", "-c", "--version", "--help", "-h"})


#: Names a command-line client with subcommands goes by too: ``mc`` is Midnight Commander
#: (``mc``, ``mc src/ /tmp``) and MinIO's client (``mc cp a.txt play/bucket/``, ``mc alias list``).
_SHARED_NAMES = frozenset({"mc"})


def _subcommand_client(name: str, arguments: list[str]) -> bool:
    """Whether ``name`` with ``arguments`` is the client of ``_SHARED_NAMES``: its first word
    that is no option is a subcommand, not a folder (no ``/``, not ``.``, ``..`` or ``~``)."""
    first = next((word for word in arguments if not word.startswith("-")), None)
    return name in _SHARED_NAMES and first is not None and "/" not in first and first not in (".", "..", "~")


def full_screen_program(command: str) -> str:
    """Why ``command`` is not run, when a part of it starts a full-screen program that waits on a
    terminal (``vim a.py``, ``nano x``; not ``vim -es`` nor ``emacs --batch``); "" otherwise."""
    for part in split_command(command).parts:
        words = part.words
        name = posixpath.basename(words[0]) if words else ""
        if name in _FULL_SCREEN and not _BATCH_OPTIONS.intersection(words[1:]) and not _subcommand_client(name, words[1:]):
            return (
                f"not run: {name} is a full-screen program that waits for a terminal's keys, and commands run "
                f"without a terminal (it would hold the call until the timeout); use {_FULL_SCREEN[name]} instead"
            )
    return ""


def background_note(jobs: list[str]) -> str:
    """What a command that sent jobs to the background with ``&`` is told: what still ran was
    stopped with it (the process group, and the sandbox's process namespace, end with it)."""
    shown = ", ".join(f"`{job}`" if len(job) <= 80 else f"`{job[:77]}...`" for job in jobs[:3])
    more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
    return (
        f"[{shown}{more} ran in the background with &; whatever still ran when this command ended was stopped "
        "then (nothing a command leaves running outlives it). Start a server or watcher with run_in_background: "
        "true, then read its output with task_output]"
    )


def timeout_in_milliseconds(value: float) -> str:
    """The answer to a timeout over the maximum: the unit is seconds. A whole number of seconds
    written in milliseconds (30000, the habit of other agents) gets that reading; a value that
    could be either (7200, also what ``"2h"`` becomes) gets both answers."""
    seconds = value / 1000
    shown = f"{seconds:g}"
    background = f"use run_in_background for commands that run longer than {MAX_TIMEOUT} seconds"
    if seconds > MAX_TIMEOUT:
        hint = background
    elif value % 1000 == 0:
        hint = f"{value:g} looks like milliseconds; for {shown} seconds send timeout={shown}"
    else:
        hint = f"if {value:g} was meant as milliseconds, send timeout={shown}; {background}"
    return f"not run: timeout is in seconds, at most {MAX_TIMEOUT}; {hint}"


class BashTool(BuiltinTool):
    name = "bash"
    description = (
        "Run a bash command in the workspace (or in workdir, a folder inside it). stdout and stderr are "
        f"merged. timeout is in seconds (default {DEFAULT_TIMEOUT}, at most {MAX_TIMEOUT}); on timeout the "
        "command and everything it started are killed, and so are background processes still running when "
        "it ends. Output over 2000 lines or 50 KB keeps the head and tail and the full output is saved to "
        "a file whose path is given. The result states the exit code and duration. {conditions} The commands "
        "of one thread share a private loopback network, so a server started in the background is reachable on "
        "127.0.0.1 by later commands. With run_in_background the command (a dev server, a watcher, a long test "
        "run) starts as a background task and the result gives its task_id at once: read its output with "
        "task_output, stop it with task_kill; it has no timeout and is stopped when the thread is closed."
    )
    arguments_model = BashArguments
    kind = "execute"

    def __init__(self, conditions: Callable[[], CommandConditions] | None = None) -> None:
        #: What commands may do here (sandbox, network), asked once when first needed; None
        #: outside a configured host (the description then names both cases).
        self._conditions_source = conditions
        self._conditions: CommandConditions | None = None

    def conditions(self) -> CommandConditions | None:
        if self._conditions is None and self._conditions_source is not None:
            self._conditions = self._conditions_source()
        return self._conditions

    def spec(self) -> ToolSpec:
        conditions = self.conditions()
        if conditions is None:
            said = (
                "Commands may run in a sandbox without network access where only the workspace is writable "
                "(the turn's environment says which)."
            )
        else:
            said = f"Sandbox {conditions.sandbox_text()}; network: {conditions.network_text()}."
        return ToolSpec(name=self.name, description=self.description.format(conditions=said), parameters=self.schema())

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        return shell_subjects(self.name, str(arguments.get("command", "")), str(arguments.get("workdir") or ""))

    def redirect(self, arguments: dict[str, Any]) -> ToolCall | None:
        """``apply_patch <<'EOF' ... EOF`` (the form Codex-trained models use) runs as the
        apply_patch tool, under its policy and approvals; a ``cd DIR &&`` before it and
        ``workdir`` make the patch's paths relative to that folder."""
        found = patch_in_command(str(arguments.get("command", "")))
        if found is None or not found.is_command:
            return None
        folder = posixpath.join(str(arguments.get("workdir") or ""), found.folder or "")
        patch = rebase_patch(found.patch, folder) if folder.strip("./") else found.patch
        return ToolCall(id="", name="apply_patch", arguments={"patch": patch})

    def _checked(self, ctx: ToolExecutionContext, call: ToolCall) -> BashArguments:
        """The arguments, after the checks that refuse the call before it starts (shared by the
        preview and the run, so nobody is asked to approve a command that would be refused)."""
        args = parse_arguments(BashArguments, call)
        if args.timeout is not None and args.timeout > MAX_TIMEOUT:
            raise ToolInputError(timeout_in_milliseconds(args.timeout))
        refusal = full_screen_program(args.command)
        if refusal:
            raise ToolInputError(refusal)
        if not args.run_in_background and ctx.deadline is not None and ctx.deadline - time.time() <= 1:
            raise ToolInputError("not started: the turn's time budget is used up; give your final answer")
        return args

    async def show(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        args = self._checked(ctx, call)
        return {"command": args.command, "cwd": args.workdir or "."}

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = self._checked(ctx, call)
        command, workdir = args.command, args.workdir or "."
        timeout = args.timeout
        if args.run_in_background:
            return await self._start_background(ctx, call, command, workdir)
        if ctx.deadline is not None:
            timeout = min(timeout or DEFAULT_TIMEOUT, ctx.deadline - time.time())
        fs = ctx.brokers.fs
        cwd = fs.resolve(workdir)
        result = await ctx.brokers.process.run(command, cwd=cwd, timeout=timeout, on_output=ctx.emit_output)
        seconds = result.duration_ms / 1000
        if result.timed_out:
            footer = (
                f"[timed out after {seconds:.1f} s: the command and everything it started were killed; sandbox {result.sandbox}]"
            )
        else:
            footer = f"[exit code {result.exit_code} · {seconds:.2f} s · sandbox {result.sandbox}]"
        if result.quarantined:
            footer += (
                "\n[refused by the sandbox's protected-path guard: the command created or replaced protected "
                "paths (git dirs, .roder, .envrc, .mcp.json, editor and agent folders, at any depth; and, "
                "unless the user approved this command, files that run code at their next action: "
                "virtualenvs, *.pth, pre-commit and lefthook configs, ...), which Roder moved out of the "
                "workspace: " + "; ".join(result.quarantined) + "]"
            )
        for note in refusal_notes(result.output, result.sandbox, result.exit_code):
            footer += "\n" + note
        conditions = self.conditions() or CommandConditions.of(result.sandbox, False)
        network_note = no_network_note(result.output, conditions, result.exit_code)
        if network_note:
            footer += "\n" + network_note
        if result.timed_out and looks_like_a_server(command, result.output):
            footer += "\n" + SERVER_NOTE
        elif not result.timed_out and (jobs := background_jobs(command)):
            footer += "\n" + background_note(jobs)
        if not result.timed_out and result.exit_code == 0 and (state := state_that_ends(command)):
            footer += "\n" + state
        output = shown_text(result.output)
        text = f"{output}\n{footer}" if output else f"(no output)\n{footer}"
        failed = result.timed_out or result.exit_code != 0
        view = CommandExecutionItem(
            call_id=call.id,
            command=command,
            cwd=fs.display(cwd),
            exit_code=result.exit_code,
            output=output,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            status=ItemStatus.FAILED if failed else ItemStatus.COMPLETED,
        )
        return ToolResult(
            id=call.id,
            name=call.name,
            text=text,
            is_error=failed,
            views=[view],
            data={
                "exit_code": result.exit_code,
                "duration_ms": result.duration_ms,
                "timed_out": result.timed_out,
                "truncated": result.truncated,
                "full_output_path": result.full_output_path,
                "sandbox": result.sandbox,
                "quarantined": result.quarantined,
            },
        )

    async def _start_background(self, ctx: ToolExecutionContext, call: ToolCall, command: str, workdir: str) -> ToolResult:
        if ctx.host is None:
            return ToolResult.error(call, "run_in_background needs the runtime's task table; run the command without it")
        ctx.brokers.fs.resolve(workdir)  # a folder outside the workspace is refused here, not in the task
        try:
            info = await ctx.host.tasks.submit("shell", {"command": command, "workdir": workdir})
        except RoderError as exc:
            return ToolResult.error(call, f"could not start the background task: {exc}")
        text = (
            f"started background task {info.id}: {command}\n"
            f"Read its output with task_output {{task_id: {info.id!r}}} (pass since=<next> for new output only); "
            f"stop it with task_kill {{task_id: {info.id!r}}}. It keeps running after this call and is stopped "
            "when the thread is closed."
        )
        return ToolResult(
            id=call.id,
            name=call.name,
            text=text,
            data={"task_id": info.id, "background": True, "output_path": info.output_path},
        )
