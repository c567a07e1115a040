"""Agent Skills: ``SKILL.md`` folders whose names and descriptions the model always sees, and
whose full instructions it loads on demand with the ``skill`` tool (the user: ``/skill-name``).

Discovered in the user config dir (``skills/``) and, for a trusted folder, in ``.roder/skills``,
``.agents/skills`` and ``.claude/skills``. A skill's ``allowed-tools`` (e.g. ``Read Grep
Bash(git log:*)``) are pre-approved while the skill is active, i.e. for the rest of the turn that
loaded it: calls that would only ask run without asking. Denies (rules, plan mode, protected
paths) still win.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from roder_core import (
    EXTENSION_API_VERSION,
    ContextBlock,
    ContextQuery,
    ExtensionManifest,
    HookOutcome,
    HookPoint,
    ProvidedService,
    RoderExtension,
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    __version__,
)
from roder_core.customization.definitions import DefinitionRoots, Skill
from roder_core.customization.slash_commands import skill_prompt
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tool_args import ToolArguments, arguments_schema, parse_arguments
from roder_core.plugins.components import discover_with_plugins
from roder_core.plugins.enabled import ActivePlugins, active_plugins
from roder_core.plugins.output_styles import OutputStyle, chosen_style, plugin_output_styles, style_instructions
from roder_core.policy.allowed_tools import allowed_by
from roder_core.settings.paths import RoderPaths

_LOADED = re.compile(r'\A<skill name="([^"]+)"')


class SkillCatalog:
    """The skills of one folder, plus which are active (loaded) in which turn."""

    def __init__(self, skills: dict[str, Skill], problems: list[str]) -> None:
        self.skills = skills
        self.problems = problems
        self._active: dict[str, tuple[str, list[Skill]]] = {}  # thread -> (turn, skills)

    def activate(self, thread_id: str, turn_id: str, skill: Skill) -> None:
        turn, active = self._active.get(thread_id, ("", []))
        if turn != turn_id:
            active = []
        self._active[thread_id] = (turn_id, [*active, skill])

    def active(self, thread_id: str, turn_id: str) -> list[Skill]:
        turn, skills = self._active.get(thread_id, ("", []))
        return skills if turn == turn_id else []


class SkillArguments(ToolArguments):
    name: str = Field(description="the skill's name")
    arguments: str = Field("", description="optional: what to apply the skill to")


class SkillTool(Tool):
    name = "skill"
    read_only = True
    kind = "read"

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog
        names = ", ".join(sorted(catalog.skills)) or "none installed"
        self.description = (
            "Load an Agent Skill: its full instructions come back as the result; follow them. Use it when "
            f"a task matches a skill's description. Available: {names}."
        )

    arguments_model = SkillArguments

    def schema(self) -> dict[str, Any]:
        """The installed skills' names are the only valid ``name`` values."""
        return arguments_schema(SkillArguments, choices={"name": sorted(self.catalog.skills)})

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(SkillArguments, call)
        name = args.name
        skill = self.catalog.skills.get(name)
        if skill is None:
            return ToolResult.error(call, f"no skill {name!r}; available: {', '.join(sorted(self.catalog.skills))}")
        self.catalog.activate(ctx.thread_id, ctx.turn_id, skill)
        return ToolResult(
            id=call.id,
            name=call.name,
            text=skill_prompt(skill, args.arguments),
            data={"skill": skill.name, "path": str(skill.path)},
        )


class SkillTools:
    """The ``skill`` tool's contributor; also the extension's ``PluginAware`` service: a plugin
    installed, enabled or disabled while the session runs changes the skills (and output styles)
    of its next turn."""

    def __init__(self, catalog: SkillCatalog, roots: DefinitionRoots, styles: OutputStyleContext) -> None:
        self.catalog = catalog
        self.roots = roots
        self.styles = styles

    #: PluginAware: what of a plugin it takes.
    plugin_parts = frozenset({"skills", "output_styles"})

    def id(self) -> str:
        return "skills"

    async def reload_plugins(self, active: ActivePlugins) -> list[str]:
        found = discover_with_plugins(self.roots, active)
        self.catalog.skills = found.skills
        self.catalog.problems = found.problems
        self.styles.styles = plugin_output_styles(active, found.problems)
        return list(found.problems)

    def contribute(self, registry: ToolRegistry) -> None:
        if self.catalog.skills:
            registry.register(SkillTool(self.catalog))


class SkillsContext:
    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def id(self) -> str:
        return "skills-context"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        if not self.catalog.skills:
            return []
        lines = [
            f"- {s.name}: {' '.join(s.description.split())}" for s in sorted(self.catalog.skills.values(), key=lambda s: s.name)
        ]
        text = (
            "Agent Skills are available. When a task matches one, load it with the skill tool "
            "before starting, then follow its instructions:\n" + "\n".join(lines)
        )
        return [ContextBlock(source="skills", kind="skills", text=text, priority=40)]


class SkillPermissions:
    """While a skill is active, its allowed-tools run without asking (never past a deny)."""

    #: Roder's own code in Roder's process: it matches the call's real arguments against the skill's allowed tools,
    #: so the hook runner hands it the payload unredacted (hooks that leave the process never get that).
    sees_raw_payload = True

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def id(self) -> str:
        return "skill-permissions"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.TOOL_CALL_BEFORE, HookPoint.BEFORE_TURN})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        if point is HookPoint.BEFORE_TURN:  # /skill-name: the prompt starts with the loaded skill
            match = _LOADED.match(str(payload.get("text", "")))
            skill = self.catalog.skills.get(match.group(1)) if match else None
            if skill is not None:
                self.catalog.activate(str(payload.get("thread_id")), str(payload.get("turn_id")), skill)
            return None
        active = self.catalog.active(str(payload.get("thread_id")), str(payload.get("turn_id")))
        tool, arguments = str(payload.get("tool", "")), payload.get("arguments") or {}
        cwd = str(payload.get("cwd", "."))
        if payload.get("permission") is None and any(allowed_by(s.allowed_tools, tool, arguments, cwd) for s in active):
            return HookOutcome(replace={"permission": "allow"})
        return None


class OutputStyleContext:
    """The output style the user chose with ``/output-style`` (``roder_core.plugins.
    output_styles``), as part of the system prompt; the choice is read at every request."""

    def __init__(self, paths: RoderPaths, styles: dict[str, OutputStyle]) -> None:
        self.paths = paths
        self.styles = styles

    def id(self) -> str:
        return "output-style"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        style = self.styles.get(chosen_style(self.paths) or "") if self.styles else None
        if style is None:
            return []
        return [ContextBlock(source="output-style", kind="output-style", priority=15, text=style_instructions(style))]


class SkillsExtension(RoderExtension):
    def __init__(self, catalog: SkillCatalog, styles: OutputStyleContext, roots: DefinitionRoots) -> None:
        self.catalog = catalog
        self.styles = styles
        self.roots = roots

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-skills",
            name="Agent Skills",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="SKILL.md discovery, skills list in context, the skill tool",
            provides=[
                ProvidedService.ToolProvider("skills"),
                ProvidedService.ContextProvider("skills-context"),
                ProvidedService.ContextProvider("output-style"),
                ProvidedService.Hook("skill-permissions"),
            ],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.tool_contributor(SkillTools(self.catalog, self.roots, self.styles))
        registry.context_provider(SkillsContext(self.catalog))
        registry.context_provider(self.styles)
        registry.hook(SkillPermissions(self.catalog))


def create(host: HostContext) -> SkillsExtension:
    active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    roots = DefinitionRoots(host.cwd, host.paths, host.trusted, host.config)
    found = discover_with_plugins(roots, active)
    styles = OutputStyleContext(host.paths, plugin_output_styles(active, found.problems))
    return SkillsExtension(SkillCatalog(found.skills, found.problems), styles, roots)
