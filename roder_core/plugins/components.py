"""Enabled plugins' components in the shapes Roder's loaders already use.

Skills, commands and agents become ``Skill``/``CommandTemplate``/``AgentDefinition`` named in
the plugin's namespace (``/plugin:command``, ``plugin:agent``, ``plugin:skill``) and join the
user's own definitions; hooks become command hooks carrying the plugin's variables; MCP servers
become server definitions named ``plugin:<plugin>:<server>`` (tools ``mcp__plugin_<p>_<s>__<tool>``).
Nothing here runs anything. A file that cannot be used is one line in ``problems``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.customization.definitions import (
    AgentDefinition,
    CommandTemplate,
    DefinitionError,
    DefinitionRoots,
    Definitions,
    Skill,
    discover,
    parse_frontmatter,
    read_definition_file,
    tool_list,
)
from roder_core.plugins.enabled import ActivePlugin, ActivePlugins, active_plugins
from roder_core.plugins.options import option_env, options_as_variables, substitute_options
from roder_core.policy.shell_argv import script_index
from roder_core.settings.config import ConfigError, load_config

if TYPE_CHECKING:  # a layout is read (plugins.layout loaded) only for a plugin that applies
    from roder_core.plugins.layout import CommandSpec, HookSpec, ServerSpec

#: Claude Code's model aliases: meaningless to other providers, so such an agent uses the
#: parent's model (as ``inherit`` does).
CLAUDE_MODEL_ALIASES = frozenset({"inherit", "sonnet", "opus", "haiku", "default", "opusplan"})
#: Frontmatter keys a plugin agent may not use (Claude Code ignores them for security).
IGNORED_AGENT_KEYS = ("permissionMode", "mode", "hooks", "mcpServers")
_VARIABLE = re.compile(r"\$\{(CLAUDE_PLUGIN_ROOT|CLAUDE_PLUGIN_DATA|CLAUDE_PROJECT_DIR|CLAUDE_SKILL_DIR)\}")


def substitute(text: str, values: dict[str, str]) -> str:
    """Replace ``${CLAUDE_PLUGIN_ROOT}``-style placeholders whose value is known."""
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def first_paragraph(body: str) -> str:
    """A description for a file without frontmatter: its first paragraph, headings stripped."""
    for block in body.strip().split("\n\n"):
        text = " ".join(line.strip().lstrip("#").strip() for line in block.splitlines() if line.strip())
        if text:
            return text[:200]
    return ""


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return "" if value is None else str(value).strip()


def _scope(plugin: ActivePlugin) -> str:
    return f"plugin:{plugin.id}"


def _body(plugin: ActivePlugin, text: str, values: dict[str, str]) -> str:
    """A command's, skill's or agent's text with its placeholders filled: only non-sensitive
    ``${user_config.KEY}`` values, since the model reads it."""
    return substitute_options(substitute(text, values), plugin.options, allowed=plugin.public_options())


def _skill(plugin: ActivePlugin, folder_name: str, path: Path, values: dict[str, str]) -> Skill:
    meta, body = read_definition_file(path)
    name = _text(meta, "name") or folder_name
    local = {**values, "CLAUDE_SKILL_DIR": str(path.parent)}
    return Skill(
        name=f"{plugin.name}:{name}",
        description=_text(meta, "description") or first_paragraph(body) or name,
        body=_body(plugin, body.strip(), local),
        path=path,
        scope=_scope(plugin),
        allowed_tools=tool_list(meta.get("allowed-tools")),
    )


def _command(plugin: ActivePlugin, spec: CommandSpec, values: dict[str, str]) -> CommandTemplate:
    if spec.content is not None:
        meta, body = parse_frontmatter(spec.content, f"{plugin.id} command {spec.name}")
    else:
        assert spec.path is not None
        meta, body = read_definition_file(spec.path)
    allowed = spec.allowed_tools if spec.allowed_tools is not None else meta.get("allowed-tools")
    return CommandTemplate(
        name=f"{plugin.name}:{spec.name}",
        description=spec.description or _text(meta, "description") or first_paragraph(body),
        template=_body(plugin, body.strip(), values),
        path=spec.path or plugin.root,
        scope=_scope(plugin),
        argument_hint=spec.argument_hint or _text(meta, "argument-hint"),
        model=spec.model or _text(meta, "model") or None,
        allowed_tools=tool_list(allowed),
    )


def _agent(plugin: ActivePlugin, name: str, path: Path, values: dict[str, str], problems: list[str]) -> AgentDefinition:
    meta, body = read_definition_file(path)
    ignored = [key for key in IGNORED_AGENT_KEYS if key in meta]
    if ignored:
        problems.append(
            f"{path}: {', '.join(ignored)} ignored (plugin agents cannot set their own permissions, hooks or servers)"
        )
    own = _text(meta, "name")
    local = name.rpartition(":")[0] + ":" + own if ":" in name and own else own or name
    model = _text(meta, "model") or None
    return AgentDefinition(
        name=f"{plugin.name}:{local}",
        description=_text(meta, "description") or first_paragraph(body) or local,
        prompt=_body(plugin, body.strip(), values),
        scope=_scope(plugin),
        path=path,
        tools=tool_list(meta.get("tools")),
        model=None if model is None or model.lower() in CLAUDE_MODEL_ALIASES else model,
        mode=None,
    )


def plugin_definitions(active: ActivePlugins, project: Path) -> Definitions:
    """Skills, commands and agents of every enabled plugin, namespaced by plugin name. Within
    one plugin a skill wins over a command of the same name."""
    found = Definitions()
    for plugin in active.plugins:
        values = plugin.variables(project)
        loaded: list[tuple[dict[str, Any], Any]] = []
        try_load = _loader(found.problems)
        loaded += [(found.skills, try_load(_skill, plugin, n, p, values)) for n, p in plugin.layout.skills]
        loaded += [(found.commands, try_load(_command, plugin, spec, values)) for spec in plugin.layout.commands]
        loaded += [(found.agents, try_load(_agent, plugin, n, p, values, found.problems)) for n, p in plugin.layout.agents]
        for into, item in loaded:
            if item is not None:
                into.setdefault(item.name, item)
    for name in [n for n in found.commands if n in found.skills]:
        del found.commands[name]
    return found


def _loader(problems: list[str]) -> Any:
    """Call a loader; a ``DefinitionError`` becomes a problem line and None."""

    def load(function: Any, *args: Any) -> Any:
        try:
            return function(*args)
        except DefinitionError as exc:
            problems.append(str(exc))
            return None

    return load


def _config_extra(roots: DefinitionRoots) -> dict[str, Any]:
    try:
        return dict(load_config(roots.paths, roots.cwd, roots.trusted).model_extra or {})
    except ConfigError:
        return {}


def discover_with_plugins(roots: DefinitionRoots, active: ActivePlugins | None = None) -> Definitions:
    """The user's and project's definitions plus enabled plugins' (namespaced, so they never
    replace a user's own definition)."""
    own = discover(roots)
    if active is None:
        active = active_plugins(roots.paths, roots.cwd, roots.trusted, _config_extra(roots))
    plugins = plugin_definitions(active, roots.cwd)
    for kind in ("skills", "commands", "agents"):
        mine: dict[str, Any] = getattr(own, kind)
        for name, item in getattr(plugins, kind).items():
            mine.setdefault(name, item)
    own.problems.extend([*active.problems, *plugins.problems])
    return own


@dataclass(frozen=True)
class PluginHook:
    """A plugin's command hook and its environment. The hook runs through a shell outside the
    sandbox, so ``${CLAUDE_PLUGIN_ROOT}`` and friends stay in the command for the shell to expand
    from the environment: pasted into the text, a folder named ``x$(...)`` (or a plugin version
    holding one) would be parsed as code."""

    plugin: str
    spec: HookSpec
    command: str
    env: dict[str, str]


def plugin_hooks(active: ActivePlugins, project: Path) -> list[PluginHook]:
    """Each enabled plugin's hooks with ``${CLAUDE_PLUGIN_ROOT}``-style and ``${user_config.KEY}``
    placeholders filled (layout refused ``user_config`` in shell-form commands), and its
    variables and options as their environment."""
    hooks = []
    for plugin in active.plugins:
        values = plugin.variables(project)
        env = plugin.process_env(project)
        for spec in plugin.layout.hooks:
            filled = replace(spec, config=fill_options(spec.config, values, plugin.options))
            if spec.argv is not None:
                # Exec form: each argument filled in, then quoted, so a value stays one argument.
                command = shlex.join(substitute_options(substitute(arg, values), plugin.options) for arg in spec.argv)
            else:
                # Shell form: ${CLAUDE_PLUGIN_ROOT} and friends stay in the text for the shell to
                # expand from the hook's environment; pasted in, a folder named x$(...) would run.
                command = spec.command
            hooks.append(PluginHook(plugin.id, filled, command, env))
    return hooks


def fill_options(value: Any, variables: dict[str, str], options: dict[str, Any]) -> Any:
    """``value`` (JSON) with the plugin's placeholders filled in every string."""
    if isinstance(value, str):
        return substitute_options(substitute(value, variables), options)
    if isinstance(value, list):
        return [fill_options(v, variables, options) for v in value]
    if isinstance(value, dict):
        return {k: fill_options(v, variables, options) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class PluginServer:
    """A plugin's MCP server: its id ``plugin:<plugin>:<server>``, definition and variables."""

    id: str
    plugin: str
    spec: ServerSpec
    env: dict[str, str]


#: How a plugin's MCP server id starts: ``plugin:<plugin>:<server>``.
PLUGIN_SERVER_PREFIX = "plugin:"

#: The server fields placeholders are filled in (Claude Code's list).
SERVER_FIELDS = ("command", "args", "env", "url", "headers", "headersHelper")


def plugin_servers(active: ActivePlugins, project: Path) -> list[PluginServer]:
    """Each enabled plugin's MCP servers, ``${user_config.KEY}`` filled in their command, args,
    env, url, headers and headersHelper, with the plugin's variables and options exported."""
    found = []
    for plugin in active.plugins:
        for spec in plugin.layout.mcp_servers:
            raw = {k: fill_options(v, {}, plugin.options) if k in SERVER_FIELDS else v for k, v in spec.raw.items()}
            args = spec.raw.get("args")
            script = script_index([str(spec.raw.get("command") or ""), *map(str, args)]) if isinstance(args, list) else None
            if isinstance(args, list) and script is not None:
                # a shell's -c script reads option values from its environment, never as code
                filled = list(raw["args"])
                filled[script - 1] = options_as_variables(str(args[script - 1]), plugin.options)
                raw["args"] = filled
            found.append(
                PluginServer(
                    f"{PLUGIN_SERVER_PREFIX}{plugin.name}:{spec.name}",
                    plugin.id,
                    replace(spec, raw=raw),
                    plugin.process_env(project),
                )
            )
    return found


@dataclass(frozen=True)
class PluginMonitor:
    """A plugin's monitor: a background command for each session (``when: always``) or from
    the first use of one of its skills (``on-skill-invoke:<skill>``)."""

    plugin: str
    name: str
    command: str
    description: str
    #: None: from the session's first turn; otherwise the skill (``plugin:skill``) that starts it.
    skill: str | None


def plugin_monitors(active: ActivePlugins, project: Path) -> list[PluginMonitor]:
    """Enabled plugins' monitors: a shell command whose placeholders the shell expands from the
    variables exported first (the path variables and the non-sensitive options: the command is
    shown in the task list). Nothing is pasted into the command's text: a folder named
    ``x$(...)`` or an option value holding ``;`` stays a value."""
    found = []
    for plugin in active.plugins:
        public = {k: v for k, v in plugin.options.items() if k in plugin.public_options()}
        values = {**plugin.variables(project), **option_env(plugin.layout.user_config, public)}
        exports = "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(values.items())) + "; "
        for spec in plugin.layout.monitors:
            command = options_as_variables(spec.command, public)
            when = spec.when.strip()
            skill = None
            if when.startswith("on-skill-invoke:"):
                wanted = when.removeprefix("on-skill-invoke:").strip()
                skill = wanted if ":" in wanted else f"{plugin.name}:{wanted}"
            found.append(PluginMonitor(plugin.id, f"{plugin.name}:{spec.name}", exports + command, spec.description, skill))
    return found
