"""Markdown definitions users already write for other agents: skills, slash commands, subagents.

All three are markdown files with a YAML frontmatter block. Skills are ``<dir>/SKILL.md`` folders
(Agent Skills standard), commands are ``*.md`` templates, agents are ``*.md`` files whose body is
the agent's system prompt. They are discovered in the user config dir and, only when the folder
is trusted, in the project (``.roder/``, ``.agents/`` for skills, and ``.claude/`` so existing
Claude Code projects work as they are). Project definitions win over user ones of the same name.

A file that cannot be parsed is reported in ``problems`` and skipped; it never stops startup.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.brokers.project_reader import ProjectFileRefused, ProjectReader
from roder_core.settings.config import RoderConfig, config_reader
from roder_core.settings.paths import RoderPaths

_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class DefinitionError(ValueError):
    """A definition file is malformed; the message names the file and the problem."""


def parse_frontmatter(text: str, source: str = "") -> tuple[dict[str, Any], str]:
    """Split ``---``-fenced YAML frontmatter from the markdown body (no frontmatter: empty dict)."""
    match = _FRONTMATTER.match(text.lstrip("\ufeff"))
    if match is None:
        return {}, text
    import yaml  # lazy: only needed when definitions exist

    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{source}: invalid YAML frontmatter: {exc}") from exc
    if not isinstance(meta, dict):
        raise DefinitionError(f"{source}: frontmatter must be a mapping of keys to values")
    return {str(k): v for k, v in meta.items()}, text[match.end() :]


def tool_list(value: Any) -> list[str] | None:
    """``allowed-tools`` / ``tools`` as a list: YAML list, or a comma/space separated string.

    ``Bash(git status:*)`` style entries keep their parentheses intact.
    """
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value)
    items: list[str] = []
    depth, current = 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        if depth == 0 and (ch == "," or ch.isspace()):
            if current.strip():
                items.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        items.append(current.strip())
    return items


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return "" if value is None else str(value).strip()


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    path: Path
    scope: str
    allowed_tools: list[str] | None = None

    @property
    def directory(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class CommandTemplate:
    name: str
    description: str
    template: str
    path: Path
    scope: str
    argument_hint: str = ""
    model: str | None = None
    allowed_tools: list[str] | None = None


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    prompt: str
    scope: str
    path: Path | None = None
    tools: list[str] | None = None
    model: str | None = None
    #: Policy mode the child thread runs in (None: the parent's mode).
    mode: str | None = None


@dataclass
class Definitions:
    skills: dict[str, Skill] = field(default_factory=dict)
    commands: dict[str, CommandTemplate] = field(default_factory=dict)
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DefinitionRoots:
    """Where definitions come from, lowest precedence first."""

    cwd: Path
    paths: RoderPaths
    trusted: bool
    #: Masks and read rules for the project reader (the defaults when not given).
    config: RoderConfig | None = None

    def reader(self, scope: str) -> ProjectReader:
        """The project reader for a scope's folders: the user's config folder or the project."""
        root = self.paths.config_dir if scope == "user" else self.cwd
        return config_reader(root, self.config or RoderConfig(), self.paths)

    def folders(self, kind: str) -> list[tuple[str, Path]]:
        user = [("user", self.paths.config_dir / kind)]
        if not self.trusted:
            return user
        project_dirs = [".claude", ".agents", ".roder"] if kind == "skills" else [".claude", ".roder"]
        return user + [("project", self.cwd / d / kind) for d in project_dirs]


def read_definition_file(path: Path, reader: ProjectReader | None = None) -> tuple[dict[str, Any], str]:
    """A definition file's frontmatter and body, read through the project reader (a link out of
    its folder, a secret or an oversized file is a problem naming it, never read)."""
    reader = reader or ProjectReader(path.parent)
    try:
        text = reader.read_text(path)
    except (ProjectFileRefused, OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"{path}: cannot read: {exc}") from exc
    return parse_frontmatter(text, str(path))


def _checked_name(name: str, path: Path) -> str:
    if not _NAME.match(name):
        raise DefinitionError(f"{path}: invalid name {name!r}: use letters, digits, - _ . : (max 64)")
    return name


def load_skill(path: Path, scope: str, reader: ProjectReader | None = None) -> Skill:
    meta, body = read_definition_file(path, reader)
    name = _checked_name(_text(meta, "name") or path.parent.name, path)
    description = _text(meta, "description")
    if not description:
        raise DefinitionError(f"{path}: a skill needs a 'description' in its frontmatter")
    return Skill(name, description, body.strip(), path, scope, tool_list(meta.get("allowed-tools")))


def load_command(path: Path, root: Path, scope: str, reader: ProjectReader | None = None) -> CommandTemplate:
    meta, body = read_definition_file(path, reader)
    relative = path.relative_to(root).with_suffix("")
    name = _checked_name(":".join(relative.parts), path)
    description = _text(meta, "description") or (body.strip().splitlines() or [""])[0][:80]
    return CommandTemplate(
        name=name,
        description=description,
        template=body.strip(),
        path=path,
        scope=scope,
        argument_hint=_text(meta, "argument-hint"),
        model=_text(meta, "model") or None,
        allowed_tools=tool_list(meta.get("allowed-tools")),
    )


def load_agent(path: Path, scope: str, reader: ProjectReader | None = None) -> AgentDefinition:
    meta, body = read_definition_file(path, reader)
    name = _checked_name(_text(meta, "name") or path.stem, path)
    description = _text(meta, "description")
    if not description:
        raise DefinitionError(f"{path}: an agent needs a 'description' in its frontmatter")
    model = _text(meta, "model") or None
    return AgentDefinition(
        name=name,
        description=description,
        prompt=body.strip(),
        scope=scope,
        path=path,
        tools=tool_list(meta.get("tools")),
        model=None if model == "inherit" else model,
        mode=_text(meta, "mode") or None,
    )


def _scan(
    roots: DefinitionRoots,
    kind: str,
    pattern: str,
    load: Callable[[Path, Path, str, ProjectReader], Any],
    into: dict[str, Any],
    problems: list[str],
) -> None:
    for scope, folder in roots.folders(kind):
        if not os.path.lexists(folder):
            continue  # nothing there to read or report: no reader (and its content gate) is built
        reader = roots.reader(scope)
        skipped: list[str] = []
        for path in reader.files(folder, pattern, recursive=pattern.startswith("**"), skipped=skipped):
            try:
                found = load(path, folder, scope, reader)
            except DefinitionError as exc:
                problems.append(str(exc))
                continue
            into[found.name] = found
        problems.extend(f"{kind}: skipped {line}" for line in skipped)


def discover(roots: DefinitionRoots) -> Definitions:
    """Scan every folder once. Later (more specific) folders override earlier ones by name."""
    found = Definitions()
    _scan(roots, "skills", "*/SKILL.md", lambda p, _root, scope, r: load_skill(p, scope, r), found.skills, found.problems)
    _scan(roots, "commands", "**/*.md", load_command, found.commands, found.problems)
    _scan(roots, "agents", "*.md", lambda p, _root, scope, r: load_agent(p, scope, r), found.agents, found.problems)
    return found


def split_model(spec: str | None, default_provider: str) -> tuple[str, str | None]:
    """``"openai/gpt-5"`` -> ``("openai", "gpt-5")``; ``"gpt-5"`` keeps the current provider;
    no spec -> ``(default_provider, None)``."""
    if not spec:
        return default_provider, None
    if "/" in spec:
        provider, _, model = spec.partition("/")
        return provider, model
    return default_provider, spec
