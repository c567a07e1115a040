"""The slash-command registry: built-in commands, custom markdown templates and skills.

One registry answers the TUI's ``/`` completion and the app server's ``commands/list``,
``commands/expand`` and ``commands/run``. Three kinds of command live in it:

- ``builtin``: /new, /resume, /fork, /compact, /model, /mode, ... Most are client actions (the
  client performs them through its own methods); /compact, /mode, /model, /plan and /help change
  runtime state directly, so ``run`` performs them for any client.
- ``custom``: markdown templates (``.roder/commands/*.md``, user config dir) expanded with
  ``$ARGUMENTS`` and ``$1``...``$9`` and sent as a turn; frontmatter ``model`` picks the model.
- ``skill``: ``/skill-name`` loads an Agent Skill into the conversation as a turn.
- ``prompt``: commands offered by extensions through ``CommandSource`` (MCP servers' prompts, as
  ``/mcp__server__prompt args``), whose text the source produces when the command is expanded.
"""

from __future__ import annotations

import builtins
import functools
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from roder_core.customization.definitions import CommandTemplate, DefinitionRoots, Definitions, Skill, split_model
from roder_core.customization.injection import injected_commands, render
from roder_core.errors import RoderError
from roder_core.plugins.components import discover_with_plugins
from roder_core.plugins.enabled import active_plugins
from roder_core.plugins.output_styles import OutputStyleError, choose_style, chosen_style, plugin_output_styles
from roder_core.settings.paths import RoderPaths

if TYPE_CHECKING:
    from roder_core.ir import Turn
    from roder_core.runtime.runtime import Runtime
    from roder_core.settings.config import RoderConfig

CommandKind = Literal["builtin", "custom", "skill", "prompt"]


class CommandError(RoderError):
    """Unknown command or bad arguments; the message says what is available."""


def unknown_command(name: str, known: Sequence[str]) -> str:
    """One short line for a name no command has: the closest names, not every command (a list of
    every command, plugins' included, ran past a narrow screen's notice and was cut there)."""
    import difflib

    wanted = name.lstrip("/")
    close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.6)
    if wanted:  # "/comp" names "/compact" even when it is not among the closest spellings
        close += [c for c in known if c.startswith(wanted) and c not in close]
    close = close[:3]
    hint = f"did you mean {', '.join('/' + c for c in close)}? " if close else ""
    return f"unknown command /{wanted}; {hint}/help lists the {len(known)} commands"


@dataclass(frozen=True)
class CommandInfo:
    """One row of ``commands/list``."""

    name: str
    description: str
    kind: CommandKind
    argument_hint: str = ""
    scope: str = "builtin"
    model: str | None = None
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "argumentHint": self.argument_hint,
            "scope": self.scope,
        }
        if self.model:
            data["model"] = self.model
        if self.path:
            data["path"] = self.path
        return data


BUILTIN_COMMANDS: tuple[CommandInfo, ...] = tuple(
    CommandInfo(name, description, "builtin", hint)
    for name, description, hint in (
        ("new", "start a new thread", ""),
        ("clear", "start a new thread (alias of /new)", ""),
        ("resume", "resume an earlier thread (a picker opens without an id)", "[thread-id]"),
        ("fork", "fork this thread into a new one, up to the last turn", ""),
        ("rewind", "go back to an earlier prompt: restore the conversation, the code, or both", ""),
        ("undo", "revert the last turn's file changes and its messages", ""),
        ("redo", "re-apply what /undo reverted", ""),
        ("compact", "summarize older turns to free context", "[instructions]"),
        ("model", "switch the model of this thread (a picker opens without an argument)", "[provider/]model"),
        ("mode", "show or switch the policy mode", "plan|ask|auto-edit|bypass"),
        ("plan", "switch to plan mode (read-only until you approve a plan)", ""),
        ("export", "export the thread as markdown or JSON", "[md|json] [path]"),
        ("cost", "show this thread's tokens, cost, context and time so far", ""),
        ("usage", "show this thread's tokens, cost, context and time so far (alias of /cost)", ""),
        ("tools", "list available tools and MCP servers", ""),
        ("mcp", "show MCP servers, their status and tools; sign in to or out of one over HTTP", "[login|logout NAME]"),
        ("skills", "list Agent Skills", ""),
        ("agents", "list subagents", ""),
        ("paste-image", "attach the image on the system clipboard to the next prompt", ""),
        ("plugin", "browse marketplaces, preview and install plugins", ""),
        ("output-style", "show or choose the output style enabled plugins offer", "[plugin:style|default]"),
        (
            "team",
            "agent teams: start, add, msg, stop, focus, list, cleanup, hide (no argument: show the team)",
            "[start NAME[=AGENT],... TASK|add|msg|stop|focus|list|cleanup|hide]",
        ),
        ("plan-review", "open this thread's plan review", ""),
        ("login", "sign in to a provider with OAuth ([auth.NAME] in config.toml)", "codex|supergrok [device|browser]"),
        ("trust", "trust this folder (loads its config, hooks, skills, commands, agents, MCP servers)", ""),
        ("help", "list commands", ""),
        ("quit", "leave Roder", ""),
    )
)

#: Built-ins that change runtime state, so ``run`` performs them for every client.
RUNTIME_BUILTINS = frozenset({"mode", "model", "plan", "help", "compact", "output-style", "cost", "usage"})


@dataclass
class Expansion:
    """What a command turns into: a prompt for a turn, or an action for the client."""

    name: str
    kind: CommandKind
    text: str = ""
    model: str | None = None
    action: str | None = None
    arguments: str = ""
    skill: Skill | None = None
    command: CommandTemplate | None = None

    @property
    def injections(self) -> list[str]:
        """The ``!`cmd``` lines running this command would execute first: the template's own
        (never a ``!`...``` inside the arguments), placeholders and all: that is the code that
        runs, the arguments reach it as data (``run_injected``)."""
        if self.command is None:
            return []
        return injected_commands(self.command.template)


@dataclass
class CommandOutcome:
    """Result of ``commands/run``: a started turn, a performed built-in, or a client action."""

    kind: Literal["turn", "done", "action"]
    name: str
    turn: Turn | None = None
    message: str = ""
    action: str | None = None
    arguments: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "name": self.name, "message": self.message}
        if self.turn is not None:
            data["turn"] = self.turn.wire()
        if self.action is not None:
            data["action"] = self.action
            data["arguments"] = self.arguments
        if self.data:
            data["data"] = self.data
        return data


@runtime_checkable
class CommandSource(Protocol):
    """An extension service (found among the tool contributors) that offers slash commands whose
    text it produces itself: the MCP extension offers each server's prompts this way."""

    def source_commands(self) -> list[CommandInfo]: ...

    async def expand_command(self, name: str, arguments: str) -> str: ...


def split_arguments(arguments: str) -> list[str]:
    """Shell-like split for ``$1``...; unbalanced quotes fall back to whitespace."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


#: ``$ARGUMENTS`` or ``$1``...``$9``.
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")


def _fill(text: str, arguments: str, positional: list[str]) -> str:
    """The placeholders of ``text`` filled in one pass (a ``$1`` inside the arguments stays)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "ARGUMENTS":
            return arguments
        index = int(name)
        return positional[index - 1] if index <= len(positional) else ""

    return _PLACEHOLDER.sub(value, text)


def _with_unused_arguments(template: str, arguments: str, text: str) -> str:
    """A template without placeholders gets the arguments appended, so nothing the user typed
    is silently dropped."""
    if _PLACEHOLDER.search(template) is None and arguments.strip():
        return f"{text.rstrip()}\n\nARGUMENTS: {arguments.strip()}"
    return text


def expand_template(template: str, arguments: str) -> str:
    """Fill ``$ARGUMENTS`` and ``$1``...``$9`` (text for the model: no command runs)."""
    return _with_unused_arguments(template, arguments, _fill(template, arguments, split_arguments(arguments)))


def skill_prompt(skill: Skill, arguments: str = "") -> str:
    """The text that loads a skill into the conversation (used by /skill-name and the skill tool)."""
    text = (
        f'<skill name="{skill.name}" directory="{skill.directory}">\n{skill.body}\n</skill>\n'
        f"Files the skill mentions are relative to {skill.directory}."
    )
    if arguments.strip():
        text += f"\n\n{arguments.strip()}"
    return text


def parse_invocation(line: str) -> tuple[str, str]:
    """``"/review src/x.py"`` -> ``("review", "src/x.py")``."""
    stripped = line.strip()
    if stripped.startswith("/"):
        stripped = stripped[1:]
    name, _, rest = stripped.partition(" ")
    return name, rest.strip()


class CommandRegistry:
    """Built-ins plus the custom commands and skills visible from one folder."""

    def __init__(
        self,
        cwd: Path,
        paths: RoderPaths,
        trusted: bool,
        definitions: Definitions | None = None,
        sources: Sequence[CommandSource] = (),
        config: RoderConfig | None = None,
    ) -> None:
        self.cwd = cwd
        roots = DefinitionRoots(cwd, paths, trusted, config)
        self.definitions = definitions if definitions is not None else discover_with_plugins(roots)
        self.sources = list(sources)

    @classmethod
    def for_runtime(cls, runtime: Runtime, cwd: Path | None = None) -> CommandRegistry:
        opts = runtime.options
        sources = [c for c in runtime.registry.tools if isinstance(c, CommandSource)]
        return cls((cwd or opts.cwd).resolve(), opts.paths, opts.trusted, sources=sources, config=opts.config)

    @property
    def problems(self) -> list[str]:
        return self.definitions.problems

    def list(self) -> list[CommandInfo]:
        """Built-ins first, then custom commands and skills by name. A custom command never
        shadows a built-in; a skill never shadows a command."""
        rows = list(BUILTIN_COMMANDS)
        taken = {c.name for c in rows}
        for command in sorted(self.definitions.commands.values(), key=lambda c: c.name):
            if command.name not in taken:
                rows.append(_command_info(command))
                taken.add(command.name)
        for skill in sorted(self.definitions.skills.values(), key=lambda s: s.name):
            if skill.name not in taken:
                rows.append(CommandInfo(skill.name, skill.description, "skill", "[request]", skill.scope, path=str(skill.path)))
                taken.add(skill.name)
        for source in self.sources:
            for info in source.source_commands():
                if info.name not in taken:
                    rows.append(info)
                    taken.add(info.name)
        return rows

    def get(self, name: str) -> CommandInfo | None:
        """A command by name; a plugin's ``/plugin:name`` also answers to a bare ``/name`` when
        nothing else is called that and only one plugin has it."""
        rows = self.list()
        wanted = name.lstrip("/")
        found = next((c for c in rows if c.name == wanted), None)
        if found is None and ":" not in wanted:
            namespaced = [c for c in rows if c.kind in ("custom", "skill") and c.name.endswith(f":{wanted}")]
            if len(namespaced) == 1:
                return namespaced[0]
        return found

    def complete(self, prefix: str) -> builtins.list[CommandInfo]:
        """Commands whose name starts with ``prefix`` (the TUI's ``/`` completion)."""
        prefix = prefix.lstrip("/")
        return [c for c in self.list() if c.name.startswith(prefix)]

    async def expand(self, name: str, arguments: str = "") -> Expansion:
        info = self.get(name)
        if info is None:
            raise CommandError(unknown_command(name, [c.name for c in self.list()]))
        if info.kind == "builtin":
            return Expansion(info.name, "builtin", action=info.name, arguments=arguments)
        if info.kind == "custom":
            command = self.definitions.commands[info.name]
            return Expansion(
                info.name,
                "custom",
                expand_template(command.template, arguments),
                model=command.model,
                arguments=arguments,
                command=command,
            )
        if info.kind == "prompt":
            source = next(s for s in self.sources if any(c.name == info.name for c in s.source_commands()))
            return Expansion(info.name, "prompt", await source.expand_command(info.name, arguments), arguments=arguments)
        skill = self.definitions.skills[info.name]
        return Expansion(info.name, "skill", skill_prompt(skill, arguments), arguments=arguments, skill=skill)

    async def run(self, runtime: Runtime, thread_id: str | None, name: str, arguments: str = "") -> CommandOutcome:
        """Run a command on a thread: templates and skills start a turn; runtime built-ins act
        at once; other built-ins come back as an action for the client to perform."""
        expansion = await self.expand(name, arguments)
        if expansion.kind == "builtin":
            if expansion.name == "compact":
                if thread_id is None:
                    raise CommandError("/compact needs a thread")
                turn = await runtime.compact(thread_id, arguments.strip() or None)
                return CommandOutcome("turn", "compact", turn=turn, message="compacted")
            if expansion.name in RUNTIME_BUILTINS:
                return await self._run_builtin(runtime, expansion.name, arguments, thread_id)
            return CommandOutcome("action", expansion.name, action=expansion.name, arguments=arguments)
        if thread_id is None:
            raise CommandError(f"/{expansion.name} needs a thread to run in")
        text = expansion.text
        command = expansion.command
        if command is not None and expansion.injections:
            cwd = Path(runtime.thread(thread_id).cwd)
            positional = split_arguments(arguments)
            run_line = functools.partial(
                run_injected, runtime, thread_id, cwd, allowed=command.allowed_tools, arguments=arguments, name=command.name
            )
            filled = await render(command.template, lambda part: _fill(part, arguments, positional), run_line)
            text = _with_unused_arguments(command.template, arguments, filled)
        provider, model = split_model(expansion.model, runtime.thread(thread_id).provider)
        turn = await runtime.start_turn(thread_id, text, provider=provider if model else None, model=model)
        return CommandOutcome("turn", expansion.name, turn=turn)

    async def _run_builtin(self, runtime: Runtime, name: str, arguments: str, thread_id: str | None) -> CommandOutcome:
        value = arguments.strip()
        if name == "help":
            lines = [f"/{c.name}{' ' + c.argument_hint if c.argument_hint else ''}  {c.description}" for c in self.list()]
            return CommandOutcome("done", name, message="\n".join(lines))
        if name == "plan" or (name == "mode" and value):
            mode = "plan" if name == "plan" else value
            await runtime.set_mode(mode, reason=f"/{name}")
            return CommandOutcome("done", name, message=f"mode: {mode}", data={"mode": mode})
        if name == "mode":
            return CommandOutcome("done", name, message=f"mode: {runtime.mode}", data={"mode": runtime.mode})
        if name == "output-style":
            return self._output_style(runtime, value)
        if name in ("cost", "usage"):
            return self._usage(runtime, name, thread_id)
        provider, model = runtime.provider, runtime.model
        if value:
            # The open thread switches too: its next request goes to the model chosen here.
            provider, chosen = split_model(value, runtime.thread(thread_id).provider if thread_id else runtime.provider)
            if thread_id is not None:
                await runtime.set_thread_model(thread_id, provider, chosen)
            runtime.select(provider, chosen)
            provider, model = runtime.provider, runtime.model
        elif thread_id is not None:
            thread = runtime.thread(thread_id)
            provider, model = thread.provider, thread.model
        text = f"model: {provider}/{model}"
        return CommandOutcome("done", name, message=text, data={"provider": provider, "model": model})

    @staticmethod
    def _usage(runtime: Runtime, name: str, thread_id: str | None) -> CommandOutcome:
        """``/cost`` and ``/usage``: the open thread's usage report (``usage_report``)."""
        from roder_core.threads.usage_report import usage_report

        thread = runtime.thread(thread_id) if thread_id is not None else None
        if thread is None or not thread.turns:
            return CommandOutcome("done", name, message="nothing used yet in this thread: no prompt has been sent")
        try:
            profile = runtime.model_profile(thread.provider, thread.model) if thread.provider else None
        except RoderError:  # a provider no longer configured: the tokens are still known
            profile = None
        return CommandOutcome("done", name, message=usage_report(thread, profile))

    @staticmethod
    def _output_style(runtime: Runtime, value: str) -> CommandOutcome:
        """``/output-style``: list the enabled plugins' styles, or choose one (applies from the
        next request on, and to later sessions)."""
        options = runtime.options
        active = active_plugins(options.paths, options.cwd, options.trusted, options.config.model_extra)
        styles = plugin_output_styles(active)
        if value:
            try:
                chosen = choose_style(options.paths, styles, value)
            except OutputStyleError as exc:
                raise CommandError(str(exc)) from None
            return CommandOutcome("done", "output-style", message=f"output style: {chosen or 'default'}", data={"style": chosen})
        current = chosen_style(options.paths)
        lines = [f"{'* ' if current is None else '  '}default  (no style)"]
        lines += [f"{'* ' if n == current else '  '}{n}  {s.description}" for n, s in sorted(styles.items())]
        if not styles:
            lines.append("(no enabled plugin offers an output style)")
        return CommandOutcome("done", "output-style", message="\n".join(lines), data={"style": current})


#: The broker identity ``!`cmd``` lines of slash commands run under.
INJECTION_EXTENSION_ID = "roder-slash-commands"
INJECTION_TIMEOUT = 30.0
_INJECTION_OUTPUT_CHARS = 20_000


async def run_injected(
    runtime: Runtime, thread_id: str, cwd: Path, line: str, allowed: list[str] | None, *, arguments: str = "", name: str = ""
) -> str:
    """Run one ``!`cmd``` of a command like the model's own ``bash`` call: policy first (the
    command's ``allowed-tools`` turn an "ask" into "allow"; a deny always wins), then the process
    broker's sandbox. What is not run is replaced by a line saying why.

    The template's ``line`` is the only code: ``$1``...``$9`` are the shell's positional
    parameters (``bash -c line /name arg1 arg2 ...``) and ``$ARGUMENTS`` an environment
    variable, so an argument holding ``$(...)``, backticks, ``;`` or a newline stays data.
    Policy judges that line: the code that runs."""
    from roder_core.ir import new_id
    from roder_core.kernel.services import PolicyVerdict
    from roder_core.kernel.tools import ToolCall, ToolExecutionContext
    from roder_core.policy.allowed_tools import allowed_by

    tool = runtime.registry.tool_registry(on_error=lambda _source, _exc: None).get("bash")
    if tool is None:
        return f"[`{line}` not run: no bash tool is installed]"
    call = ToolCall(id=new_id("inject"), name="bash", arguments={"command": line})
    brokers = runtime.brokers_for(cwd, INJECTION_EXTENSION_ID, frozenset({"process.spawn.shell", "fs.read.workspace"}))
    ctx = ToolExecutionContext(
        thread_id=thread_id, turn_id="", call_id=call.id, workspace=cwd, mode=runtime.mode, brokers=brokers
    )
    decision = await runtime.policy.evaluate(tool, call, ctx)
    if decision.verdict is PolicyVerdict.DENY:
        return f"[`{line}` not run: {decision.reason}]"
    if decision.verdict is PolicyVerdict.ASK and not allowed_by(allowed, "bash", call.arguments, str(cwd)):
        return f"[`{line}` not run: it needs approval and the command's allowed-tools do not cover it]"
    shell = "bash" if brokers.process.which("bash") else "sh"
    argv = [shell, "-c", line, f"/{name or 'command'}", *split_arguments(arguments)]
    try:
        result = await brokers.process.run(argv, cwd=cwd, timeout=INJECTION_TIMEOUT, env={"ARGUMENTS": arguments})
    except (OSError, PermissionError) as exc:
        return f"[`{line}` failed: {exc}]"
    output = runtime.redact(result.output).rstrip("\n")[:_INJECTION_OUTPUT_CHARS]
    if result.exit_code not in (0, None):
        output += f"\n[exit code {result.exit_code}]"
    return output


def _command_info(command: CommandTemplate) -> CommandInfo:
    return CommandInfo(
        command.name, command.description, "custom", command.argument_hint, command.scope, command.model, str(command.path)
    )
