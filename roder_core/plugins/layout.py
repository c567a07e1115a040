"""What a plugin folder contains: its commands, skills, agents, hooks, MCP and LSP servers.

The default folders (``commands/``, ``agents/``, ``skills/``, ``hooks/hooks.json``, ``.mcp.json``)
are read unless the manifest replaces them; ``skills`` paths add to the default folder; hooks
and MCP servers from files and inline objects are unioned. Everything is found here, nothing
is run: the preview shows this, and ``components`` turns it into loaded definitions. Whatever
cannot be used (a missing folder, an unknown hook event, a path leaving the plugin) becomes one
line in ``problems``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.brokers.project_reader import ProjectReader
from roder_core.customization.injection import injected_commands
from roder_core.plugins.dependencies import Dependency, parse_dependencies
from roder_core.plugins.manifest import ManifestError, MarketplaceEntry, PluginManifest, load_json
from roder_core.plugins.node_deps import install_command
from roder_core.plugins.options import OptionSpec, parse_user_config

#: Claude Code hook events; the ones Roder runs are in ``RUN_EVENTS``.
HOOK_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "SubagentStop",
        "SubagentStart",
        "PreCompact",
        "PostCompact",
        "SessionStart",
        "SessionEnd",
        "Notification",
        "PermissionRequest",
        "Setup",
        "TeammateIdle",
        "TaskCompleted",
        "ConfigChange",
        "WorktreeCreate",
        "WorktreeRemove",
        "InstructionsLoaded",
        "Elicitation",
        "ElicitationResult",
        "CwdChanged",
        "FileChanged",
        "StopFailure",
        "PostToolBatch",
        "UserPromptExpansion",
    }
)
RUN_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionStart", "SessionEnd"}
)
#: A hook timeout at or above this is taken as milliseconds (community plugins write 30000).
MILLISECOND_TIMEOUT = 1000
#: package.json scripts npm runs by itself on install.
_LIFECYCLE_SCRIPTS = ("preinstall", "install", "postinstall", "prepare")


@dataclass(frozen=True)
class CommandSpec:
    """A slash command: a markdown file, or inline content from a ``commands`` object map."""

    name: str
    path: Path | None
    content: str | None = None
    description: str = ""
    argument_hint: str = ""
    model: str | None = None
    allowed_tools: Any = None


#: Hook handler types Roder runs (``mcp_tool`` is not one of them yet).
HOOK_TYPES = ("command", "http", "prompt", "agent")


@dataclass(frozen=True)
class HookSpec:
    event: str
    matcher: str
    #: A command hook's command line; for the other types, what it does in one line.
    command: str
    timeout: float | None
    origin: str
    kind: str = "command"
    #: The handler as written (``url``, ``headers``, ``allowedEnvVars``, ``prompt``, ``model``).
    config: dict[str, Any] = field(default_factory=dict)
    #: An exec-form command hook's program and arguments (``command`` plus ``args``), kept apart
    #: so placeholders are filled per argument and then quoted; ``command`` shows them joined.
    argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ServerSpec:
    name: str
    raw: dict[str, Any]
    origin: str

    def describe(self) -> str:
        if self.raw.get("url") or self.raw.get("type") in ("http", "sse", "ws"):
            return f"{self.raw.get('type') or 'http'} {self.raw.get('url') or '(no url)'}"
        return shlex.join([str(self.raw.get("command") or ""), *(str(a) for a in self.raw.get("args") or [])])


@dataclass(frozen=True)
class MonitorSpec:
    """A background command the plugin runs during a session (``monitors/monitors.json``);
    what it prints reaches the model (``roder_ext_command_hooks.monitors``)."""

    name: str
    command: str
    description: str = ""
    when: str = "always"


@dataclass
class PluginLayout:
    root: Path
    name: str
    commands: list[CommandSpec] = field(default_factory=list)
    #: (skill folder name used when the frontmatter has no name, SKILL.md path)
    skills: list[tuple[str, Path]] = field(default_factory=list)
    #: (name relative to agents/, file)
    agents: list[tuple[str, Path]] = field(default_factory=list)
    hooks: list[HookSpec] = field(default_factory=list)
    mcp_servers: list[ServerSpec] = field(default_factory=list)
    lsp_servers: list[ServerSpec] = field(default_factory=list)
    #: Roder process extensions (``.roder-extensions.json`` / ``roderExtensions``: a Roder key).
    process_extensions: list[ServerSpec] = field(default_factory=list)
    bin: list[str] = field(default_factory=list)
    install_scripts: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    #: (style name, markdown file) from ``output-styles/`` or ``outputStyles``.
    output_styles: list[tuple[str, Path]] = field(default_factory=list)
    #: Theme files (``themes/*.json`` or ``experimental.themes``).
    themes: list[Path] = field(default_factory=list)
    monitors: list[MonitorSpec] = field(default_factory=list)
    #: ``userConfig``: the options the user is asked for at install.
    user_config: dict[str, OptionSpec] = field(default_factory=dict)
    dependencies: list[Dependency] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The components under their namespaced names (``/plugin:command``, ``plugin:server``)."""
        name = self.name
        return {
            "commands": [f"/{name}:{c.name}" for c in self.commands],
            "skills": [f"{name}:{n}" for n, _ in self.skills],
            "agents": [f"{name}:{n}" for n, _ in self.agents],
            "hooks": [
                {"event": h.event, "matcher": h.matcher, "type": h.kind, "command": h.command, "timeout": h.timeout}
                for h in self.hooks
            ],
            "mcpServers": [{"name": s.name, "id": f"plugin:{name}:{s.name}", "target": s.describe()} for s in self.mcp_servers],
            "lspServers": [{"name": s.name, "target": s.describe()} for s in self.lsp_servers],
            "roderExtensions": [{"name": s.name, "target": s.describe()} for s in self.process_extensions],
            "bin": self.bin,
            "unsupported": self.unsupported,
            "outputStyles": [f"{name}:{style}" for style, _ in self.output_styles],
            "themes": [path.stem for path in self.themes],
            "monitors": [{"name": m.name, "command": m.command, "when": m.when} for m in self.monitors],
            "userConfig": [spec.to_json() for spec in self.user_config.values()],
            "dependencies": [d.describe() for d in self.dependencies],
        }

    def runs_code(self) -> list[str]:
        """Every way this plugin would run a program, one line each (shown before installing)."""
        lines = [
            f"{'' if h.kind == 'command' else h.kind + ' '}hook {h.event}{f' [{h.matcher}]' if h.matcher else ''}: {h.command}"
            for h in self.hooks
        ]
        lines += [f"MCP server {s.name}: {s.describe()}" for s in self.mcp_servers]
        started = "started for its languages when a file is edited"
        lines += [f"LSP server {s.name}: {s.describe()} ({started})" for s in self.lsp_servers]
        lines += [f"extension {s.name}: {s.describe()} ({_extension_grants(s)})" for s in self.process_extensions]
        lines += [f"monitor {m.name} ({m.when}): {m.command} (a sandboxed background task)" for m in self.monitors]
        lines += [f"bin/{name} (an executable on the PATH of commands while enabled)" for name in self.bin]
        lines += self.install_scripts
        lines += [f"command {c.name}: !`{cmd}`" for c in self.commands for cmd in _injections(c)]
        return lines


def _injections(command: CommandSpec) -> list[str]:
    text = command.content
    if text is None and command.path is not None:
        try:
            text = ProjectReader(command.path.parent).read_text(command.path)
        except (OSError, UnicodeDecodeError):  # refused (a link out, a FIFO) or unreadable
            return []
    return injected_commands(text or "")


def _inside(root: Path, value: str, what: str, problems: list[str]) -> Path | None:
    """A manifest path resolved in the plugin; None (with a problem line) when it escapes."""
    text = value.strip()
    if not text:
        return None
    if text.startswith("/") or ".." in Path(text).parts:
        problems.append(f"{what} path {value!r} leaves the plugin folder; skipped")
        return None
    target = (root / text).resolve()
    real_root = root.resolve()
    if target != real_root and not target.is_relative_to(real_root):
        problems.append(f"{what} path {value!r} leaves the plugin folder; skipped")
        return None
    return target


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _markdown_files(folder: Path) -> list[tuple[str, Path]]:
    """``(name, file)`` for every ``.md`` below ``folder``; subfolders become ``a:b`` names."""
    found = []
    for path in ProjectReader(folder).files(folder, "**/*.md", recursive=True):
        if not any(part.startswith(".") for part in path.relative_to(folder).parts):
            found.append((":".join(path.relative_to(folder).with_suffix("").parts), path))
    return found


def resolve_layout(
    root: Path,
    name: str,
    manifest: PluginManifest,
    entry: MarketplaceEntry | None = None,
    *,
    marketplace_root: bool = False,
) -> PluginLayout:
    """Find the components of the plugin in ``root`` named ``name`` (the catalog entry's name)."""
    layout = PluginLayout(root=root, name=name)
    layout.problems.extend(manifest.problems)
    declared = dict(manifest.components)
    if entry is not None:
        extra = entry.components()
        if not entry.strict:
            if manifest.present and manifest.components:
                layout.problems.append(
                    f"plugin {name!r}: the marketplace entry is not strict but plugin.json also declares components "
                    "(conflicting manifests); the marketplace entry is used"
                )
            declared = extra
        else:
            for key, value in extra.items():
                declared[key] = _merge(declared.get(key), value) if key in declared else value
    _options_and_dependencies(layout, manifest, entry)
    _commands(layout, declared)
    _agents(layout, declared)
    _skills(layout, declared, replace_default=marketplace_root and "skills" in declared)
    _hooks(layout, declared.get("hooks"))
    _servers(layout, ".mcp.json", "mcpServers", declared.get("mcpServers"), layout.mcp_servers)
    _servers(layout, ".lsp.json", "lspServers", declared.get("lspServers"), layout.lsp_servers)
    _servers(layout, ".roder-extensions.json", "roderExtensions", declared.get("roderExtensions"), layout.process_extensions)
    _bin_and_scripts(layout)
    layout.output_styles = _markdown_folder(layout, declared, "outputStyles", "./output-styles")
    _themes(layout, declared.get("themes"))
    _monitors(layout, declared.get("monitors"))
    if "workflows" in declared or (root / "workflows").is_dir():
        layout.unsupported.append("workflows")
    return layout


def _markdown_folder(layout: PluginLayout, declared: dict[str, Any], key: str, default: str) -> list[tuple[str, Path]]:
    """``(name, file)`` of the markdown files a path key lists (replacing the default folder)."""
    value = declared.get(key)
    found: list[tuple[str, Path]] = []
    for entry in _paths(value) if value is not None else [default]:
        target = _inside(layout.root, entry, key, layout.problems)
        if target is None:
            continue
        if target.is_file():
            found.append((target.stem, target))
        elif target.is_dir():
            found.extend(_markdown_files(target))
        elif value is not None:
            layout.problems.append(f"{key} path {entry!r} does not exist; skipped")
    return found


def _themes(layout: PluginLayout, declared: Any) -> None:
    for entry in _paths(declared) if declared is not None else ["./themes"]:
        target = _inside(layout.root, entry, "themes", layout.problems)
        if target is None:
            continue
        if target.is_file():
            layout.themes.append(target)
        elif target.is_dir():
            layout.themes.extend(ProjectReader(layout.root).files(target, "*.json"))
        elif declared is not None:
            layout.problems.append(f"themes path {entry!r} does not exist; skipped")


def _monitors(layout: PluginLayout, declared: Any) -> None:
    """``monitors/monitors.json`` (or the manifest's path or inline list): ``[{name, command,
    description, when}]``."""
    items: Any = declared
    if declared is None or isinstance(declared, str):
        target = _inside(layout.root, declared or "./monitors/monitors.json", "monitors", layout.problems)
        if target is None or not target.is_file():
            if declared is not None:
                layout.problems.append(f"monitors file {declared!r} does not exist; skipped")
            return
        try:
            items = load_json(target, layout.problems)
        except ManifestError as exc:
            layout.problems.append(f"{exc}; skipped")
            return
    if isinstance(items, dict):
        items = items.get("monitors", [])
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("command"), str):
            layout.monitors.append(
                MonitorSpec(item["name"], item["command"], str(item.get("description") or ""), str(item.get("when") or "always"))
            )
        else:
            layout.problems.append(f"monitor {item!r} needs a name and a command; skipped")


def _options_and_dependencies(layout: PluginLayout, manifest: PluginManifest, entry: MarketplaceEntry | None) -> None:
    """``userConfig`` and ``dependencies``: plugin.json's, with a catalog entry's added (a
    non-strict entry is the whole definition, so only its own count)."""
    sources: list[tuple[str, Any, Any]] = []
    if entry is None or entry.strict:
        sources.append(("plugin.json", manifest.user_config, manifest.dependencies))
    if entry is not None:
        sources.append(("marketplace entry", entry.raw.get("userConfig"), entry.raw.get("dependencies")))
    for where, options, dependencies in sources:
        for key, spec in parse_user_config(options, where, layout.problems).items():
            layout.user_config.setdefault(key, spec)
        for dependency in parse_dependencies(dependencies, where, layout.problems):
            if all(d.name != dependency.name for d in layout.dependencies):
                layout.dependencies.append(dependency)


def _merge(first: Any, second: Any) -> Any:
    """Combine a manifest's and an entry's value of the same component key."""
    if isinstance(first, dict) and isinstance(second, dict):
        return {**first, **second}
    return [*(first if isinstance(first, list) else [first]), *(second if isinstance(second, list) else [second])]


def _commands(layout: PluginLayout, declared: dict[str, Any]) -> None:
    value = declared.get("commands")
    root = layout.root
    if isinstance(value, dict):  # the object map form: {"name": {"source" | "content", ...}}
        for command, spec in value.items():
            if not isinstance(spec, dict):
                layout.problems.append(f"command {command!r}: expected an object with 'source' or 'content'; skipped")
                continue
            source, content = spec.get("source"), spec.get("content")
            if bool(source) == bool(content):
                layout.problems.append(f"command {command!r}: give exactly one of 'source' and 'content'; skipped")
                continue
            path = _inside(root, str(source), f"command {command!r}", layout.problems) if source else None
            if source and (path is None or not path.is_file()):
                if path is not None:
                    layout.problems.append(f"command {command!r}: {source} does not exist; skipped")
                continue
            layout.commands.append(
                CommandSpec(
                    name=str(command).lstrip("/"),
                    path=path,
                    content=str(content) if content else None,
                    description=str(spec.get("description") or ""),
                    argument_hint=str(spec.get("argumentHint") or spec.get("argument-hint") or ""),
                    model=str(spec["model"]) if spec.get("model") else None,
                    allowed_tools=spec.get("allowedTools") or spec.get("allowed-tools"),
                )
            )
        return
    folders = _paths(value) if value is not None else ["./commands"]
    for entry in folders:
        target = _inside(root, entry, "commands", layout.problems)
        if target is None:
            continue
        if target.is_file():
            layout.commands.append(CommandSpec(name=target.stem, path=target))
        elif target.is_dir():
            layout.commands.extend(CommandSpec(name=n, path=p) for n, p in _markdown_files(target))
        elif value is not None:
            layout.problems.append(f"commands path {entry!r} does not exist; skipped")


def _agents(layout: PluginLayout, declared: dict[str, Any]) -> None:
    value = declared.get("agents")
    folders = _paths(value) if value is not None else ["./agents"]
    for entry in folders:
        target = _inside(layout.root, entry, "agents", layout.problems)
        if target is None:
            continue
        if target.is_file():
            layout.agents.append((target.stem, target))
        elif target.is_dir():
            layout.agents.extend(_markdown_files(target))
        elif value is not None:
            layout.problems.append(f"agents path {entry!r} does not exist; skipped")


def _skill_folders(folder: Path) -> list[tuple[str, Path]]:
    if (folder / "SKILL.md").is_file():  # the path names one skill folder
        return [(folder.name, folder / "SKILL.md")]
    return [(p.parent.name, p) for p in ProjectReader(folder).files(folder, "*/SKILL.md")]


def _skills(layout: PluginLayout, declared: dict[str, Any], *, replace_default: bool) -> None:
    root = layout.root
    found: dict[Path, str] = {}
    listed: list[tuple[str, Path]] = []
    for entry in _paths(declared.get("skills")):
        target = _inside(root, entry, "skills", layout.problems) if entry != "." else root.resolve()
        if target is None:
            continue
        if not target.is_dir():
            layout.problems.append(f"skills path {entry!r} does not exist; skipped")
            continue
        listed.extend(_skill_folders(target))
    default = [] if replace_default and listed else _skill_folders(root / "skills") if (root / "skills").is_dir() else []
    if not default and not listed and "skills" not in declared and (root / "SKILL.md").is_file():
        default = [(layout.name, root / "SKILL.md")]
    for name, path in [*default, *listed]:
        found.setdefault(path.resolve(), name)
    layout.skills = [(name, path) for path, name in found.items()]


def _hooks(layout: PluginLayout, declared: Any) -> None:
    sources: list[tuple[str, Any]] = []
    seen: set[Path] = set()
    default = layout.root / "hooks" / "hooks.json"
    values = declared if isinstance(declared, list) else ([declared] if declared is not None else [])
    if default.is_file():
        values = ["./hooks/hooks.json", *values]
    for value in values:
        if isinstance(value, dict):
            sources.append(("plugin.json hooks", value))
            continue
        if not isinstance(value, str):
            layout.problems.append("hooks must be a path, a list of paths or an object; one entry skipped")
            continue
        target = _inside(layout.root, value, "hooks", layout.problems)
        if target is None:
            continue
        if target in seen:
            layout.problems.append(f"hooks file {value} is listed again (hooks/hooks.json loads by itself); loaded once")
            continue
        seen.add(target)
        if not target.is_file():
            layout.problems.append(f"hooks file {value!r} does not exist; skipped")
            continue
        try:
            sources.append((str(target.relative_to(layout.root.resolve())), load_json(target, layout.problems)))
        except ManifestError as exc:
            layout.problems.append(f"{exc}; skipped")
    for origin, data in sources:
        _hook_table(layout, origin, data)


def _hook_table(layout: PluginLayout, origin: str, data: Any) -> None:
    if not isinstance(data, dict):
        layout.problems.append(f"{origin}: hooks must be an object; skipped")
        return
    table = data.get("hooks") if isinstance(data.get("hooks"), dict | list) else data
    tables = table if isinstance(table, list) else [table]  # a duplicated "hooks" key kept both
    for events in tables:
        if not isinstance(events, dict):
            continue
        for event, groups in events.items():
            if event in ("description", "$schema"):
                continue
            if event not in HOOK_EVENTS:
                layout.problems.append(f"{origin}: unknown hook event {event!r}; skipped")
                continue
            if event not in RUN_EVENTS:
                layout.problems.append(f"{origin}: {event} hooks do not run in Roder; skipped")
                continue
            for group in groups if isinstance(groups, list) else [groups]:
                _hook_group(layout, origin, event, group)


def _hook_group(layout: PluginLayout, origin: str, event: str, group: Any) -> None:
    if not isinstance(group, dict):
        layout.problems.append(f"{origin}: a {event} entry is not an object; skipped")
        return
    matcher = str(group.get("matcher") or "")
    handlers = group.get("hooks")
    if handlers is None and group.get("command"):
        handlers = [group]
    for handler in handlers if isinstance(handlers, list) else []:
        if not isinstance(handler, dict):
            layout.problems.append(f"{origin}: a {event} hook is not an object; skipped")
            continue
        kind = str(handler.get("type") or "command")
        if kind not in HOOK_TYPES:
            layout.problems.append(
                f"{origin}: {event} hook of type {kind!r} is not supported (only {', '.join(HOOK_TYPES)}); skipped"
            )
            continue
        if kind != "command":
            _typed_hook(layout, origin, event, matcher, kind, handler, group)
            continue
        command = handler.get("command")
        if not isinstance(command, str) or not command.strip():
            layout.problems.append(f"{origin}: a {event} hook has no command; skipped")
            continue
        args = handler.get("args")
        argv = (command, *(str(a) for a in args)) if isinstance(args, list) else None  # exec form
        if argv is not None:
            command = shlex.join(argv)
        if "${user_config." in command and not isinstance(args, list):
            layout.problems.append(f"{origin}: {event} hook uses ${{user_config.*}} in shell form; skipped")
            continue
        timeout = _timeout(handler, group, origin, layout.problems)
        layout.hooks.append(HookSpec(event, matcher, command, timeout, origin, argv=argv))


def _typed_hook(
    layout: PluginLayout, origin: str, event: str, matcher: str, kind: str, handler: dict[str, Any], group: dict[str, Any]
) -> None:
    """An ``http`` (needs ``url``), ``prompt`` or ``agent`` (need ``prompt``) hook."""
    field_name = "url" if kind == "http" else "prompt"
    value = handler.get(field_name)
    if not isinstance(value, str) or not value.strip():
        layout.problems.append(f"{origin}: a {event} {kind} hook has no {field_name}; skipped")
        return
    if kind == "http":
        shown = f"POST {value}"
    else:
        line = " ".join(value.split())
        shown = f"{'model call' if kind == 'prompt' else 'read-only agent'}: {line[:120]}{'…' if len(line) > 120 else ''}"
    timeout = _timeout(handler, group, origin, layout.problems)
    layout.hooks.append(HookSpec(event, matcher, shown, timeout, origin, kind, dict(handler)))


def _timeout(handler: dict[str, Any], group: dict[str, Any], origin: str, problems: list[str]) -> float | None:
    raw = handler.get("timeout", group.get("timeout"))
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        problems.append(f"{origin}: hook timeout {raw!r} is not a number; the default is used")
        return None
    if value >= MILLISECOND_TIMEOUT:
        problems.append(f"{origin}: hook timeout {raw} looks like milliseconds; {value / 1000:g}s is used")
        value /= 1000
    return value if value > 0 else None


def _servers(layout: PluginLayout, filename: str, key: str, declared: Any, into: list[ServerSpec]) -> None:
    """Servers from the default file and the manifest key (path, list of paths, inline object);
    both shapes of file (``{"mcpServers": {...}}`` and flat ``{"name": {...}}``) are accepted.
    On a name clash the manifest wins, with a problem line."""
    found: dict[str, ServerSpec] = {}
    default = layout.root / filename
    if default.is_file():
        _server_file(layout, default, key, found)
    values = declared if isinstance(declared, list) else ([declared] if declared is not None else [])
    for value in values:
        if isinstance(value, dict):
            _server_table(layout, "plugin.json", key, value, found)
        elif isinstance(value, str):
            target = _inside(layout.root, value, key, layout.problems)
            if target is not None and target != default.resolve():
                if target.is_file():
                    _server_file(layout, target, key, found)
                else:
                    layout.problems.append(f"{key} file {value!r} does not exist; skipped")
    into.extend(found.values())


def _server_file(layout: PluginLayout, path: Path, key: str, found: dict[str, ServerSpec]) -> None:
    try:
        data = load_json(path, layout.problems)
    except ManifestError as exc:
        layout.problems.append(f"{exc}; skipped")
        return
    _server_table(
        layout,
        str(path.relative_to(layout.root.resolve()) if path.is_relative_to(layout.root.resolve()) else path),
        key,
        data,
        found,
    )


def _server_table(layout: PluginLayout, origin: str, key: str, data: Any, found: dict[str, ServerSpec]) -> None:
    if not isinstance(data, dict):
        layout.problems.append(f"{origin}: {key} must be an object; skipped")
        return
    nested = data.get(key)
    table: dict[str, Any] = nested if isinstance(nested, dict) else data
    for name, raw in table.items():
        if name in ("$schema",) or not isinstance(raw, dict):
            if name != "$schema":
                layout.problems.append(f"{origin}: server {name!r} is not an object; skipped")
            continue
        if name in found and found[name].origin != origin:
            layout.problems.append(f"{origin}: server {name!r} is also defined in {found[name].origin}; {origin} is used")
        found[name] = ServerSpec(str(name), raw, origin)


def _extension_grants(spec: ServerSpec) -> str:
    """How a plugin's process extension is shown before install: what it would be granted."""
    granted = ", ".join(str(c) for c in spec.raw.get("capabilities") or []) or "no capabilities"
    return f"a sandboxed process; {granted}"


def _bin_and_scripts(layout: PluginLayout) -> None:
    bin_dir = layout.root / "bin"
    if bin_dir.is_dir():
        reader = ProjectReader(layout.root)
        layout.bin = [name for name in reader.names(bin_dir) if reader.is_file(bin_dir / name)]
    command = install_command(layout.root)
    if command is not None:
        layout.install_scripts.append(f"node dependencies installed at install: {' '.join(command)}")
    package = layout.root / "package.json"
    if package.is_file():
        try:
            scripts = json.loads(ProjectReader(layout.root).read_text(package)).get("scripts") or {}
        except (OSError, ValueError, AttributeError):
            scripts = {}
        for name in _LIFECYCLE_SCRIPTS:
            if isinstance(scripts, dict) and scripts.get(name):
                layout.install_scripts.append(f"package.json {name} script: {scripts[name]} (not run by Roder)")
