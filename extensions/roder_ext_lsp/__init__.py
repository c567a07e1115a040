"""Code intelligence from language servers: what an edit broke, in the same tool result.

Servers come from ``[lsp.servers.NAME]`` in config.toml, from enabled plugins' ``.lsp.json``
(``lspServers``), and from a built-in table of well-known servers found on PATH (nothing is
downloaded). A server starts for a language the first time a file of it is edited or asked
about, runs confined like a command (the workspace read-only, no network), and stops when idle
and at exit. Around ``edit``, ``write`` and ``apply_patch`` a hook records the file's diagnostics
before the call and appends, after it, the ones the change introduced (errors first, bounded).
The read-only ``lsp`` tool (definition, references, hover, document symbols) is offered only
while a server runs. A status segment names the running servers. In a folder the user has not
trusted, only servers that can start without running the project's code start (``launch``).

The servers' manager (and the client, the launch plans, the table of servers found on PATH) is
made at the first edit or ``lsp`` call (``ManagerSlot``): a run that edits nothing (``roder -p``
answering a question, running commands) never imports or scans for them.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from roder_core.kernel.distribution import HostContext
from roder_core.kernel.extension import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
)
from roder_core.kernel.services import HookOutcome, HookPoint, ServiceRegistrar, StatusView
from roder_core.kernel.tool_args import PathArgument, ToolArguments, parse_arguments
from roder_core.kernel.tools import Tool, ToolCall, ToolExecutionContext, ToolRegistry, ToolResult

if TYPE_CHECKING:
    from roder_core.plugins.enabled import ActivePlugins
    from roder_ext_lsp.client import Columns, LspClient
    from roder_ext_lsp.manager import LspManager
    from roder_ext_lsp.servers import ServerSpec

log = logging.getLogger(__name__)

EDIT_TOOLS = frozenset({"edit", "write", "apply_patch"})
_PATCH_PATHS = re.compile(r"^\*\*\* (?:Add|Update) File: (.+)$|^\*\*\* Move to: (.+)$|^\+\+\+ (?:b/)?(.+)$", re.MULTILINE)


def edited_paths(tool: str, arguments: dict[str, Any], workspace: Path) -> list[Path]:
    """The files an edit tool call writes (as the model named them)."""
    if tool in ("edit", "write"):
        names = [str(arguments.get("path") or "")]
    elif tool == "apply_patch":
        names = [next(g for g in m.groups() if g) for m in _PATCH_PATHS.finditer(str(arguments.get("patch") or ""))]
    else:
        names = []
    paths = []
    for name in names:
        name = name.strip()
        if name and name != "/dev/null":
            path = Path(name) if Path(name).is_absolute() else workspace / name
            if path not in paths:
                paths.append(path)
    return paths


class ManagerSlot:
    """The extension's ``LspManager``, made when first needed: an edit tool's call, the ``lsp``
    tool. Until then no server runs, so what asks only whether one does gets ``made`` (None)."""

    def __init__(self, make: Callable[[list[ServerSpec]], LspManager], plugins: list[ServerSpec], project: Path) -> None:
        self._make = make
        #: The enabled plugins' servers, the manager is made with (a plugin change replaces them).
        self.plugins = plugins
        self.project = project

    @functools.cached_property
    def manager(self) -> LspManager:
        return self._make(self.plugins)

    @property
    def made(self) -> LspManager | None:
        made: LspManager | None = self.__dict__.get("manager")
        return made


class DiagnosticsHook:
    """Before an edit: remember the files' diagnostics; after it: add what the edit introduced."""

    #: Roder's own code in Roder's process: it reads the edited files by the paths the call names,
    #: so the hook runner hands it the payload unredacted (hooks that leave the process never get that).
    sees_raw_payload = True

    def __init__(self, slot: ManagerSlot, diagnostics_timeout: float, hook_timeout: float) -> None:
        self.slot = slot
        #: What the diagnostics may take of the hook's own deadline (past it the result goes
        #: out without them, saying so, rather than the runner dropping the hook's answer).
        self.budget = max(min(diagnostics_timeout, hook_timeout - 2.0), 1.0)

    def id(self) -> str:
        return "lsp-diagnostics"

    def points(self) -> frozenset[HookPoint]:
        return frozenset({HookPoint.TOOL_CALL_BEFORE, HookPoint.TOOL_RESULT_AFTER})

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        tool = str(payload.get("tool", ""))
        if tool not in EDIT_TOOLS:
            return None
        manager = self.slot.manager
        paths = [p for p in edited_paths(tool, payload.get("arguments") or {}, manager.workspace) if manager.spec_for(p)]
        if not paths:
            return None
        thread = str(payload.get("thread_id", ""))
        if point is HookPoint.TOOL_CALL_BEFORE:
            manager.remember(thread, paths)
            return None
        if payload.get("is_error"):
            for path in paths:
                manager.before.pop((thread, path), None)
            return None
        report = await manager.introduced(thread, paths, self.budget)
        if not report:
            return None
        return HookOutcome(replace={"text": f"{payload.get('text', '')}\n\n{report}"})


class LspArguments(ToolArguments):
    operation: Literal["definition", "references", "hover", "symbols"] = Field(
        description="definition / references / hover of the symbol at line:character, or symbols of the file"
    )
    path: PathArgument = Field(description="file (relative to the workspace)")
    line: int = Field(1, ge=1, description="1-based line (not needed for symbols)")
    character: int = Field(1, ge=1, description="1-based column (not needed for symbols)")


class LspTool(Tool):
    name = "lsp"
    description = (
        "Ask the language server about code: definition, references or hover (type and docs) of the symbol at "
        "path:line:character (1-based), or the symbols of a file. Read-only. Only for languages whose server runs."
    )
    arguments_model = LspArguments
    read_only = True
    kind = "read"

    def __init__(self, slot: ManagerSlot) -> None:
        self.slot = slot

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        from roder_ext_lsp.client import LspError, uri_of

        args = parse_arguments(LspArguments, call)
        path = (ctx.workspace / args.path).resolve() if not Path(args.path).is_absolute() else Path(args.path)
        if not path.is_relative_to(ctx.workspace.resolve()):
            return ToolResult.error(call, f"{args.path} is outside the workspace")
        manager = self.slot.manager
        client = await manager.client_for(path)
        if client is None:
            why = manager.unavailable(path) or f"no language server runs for {path.suffix or args.path} files"
            return ToolResult.error(call, why)
        text = manager._text(path)
        if text is None:
            return ToolResult.error(call, f"{args.path} cannot be read (missing, or withheld from the model)")
        client.sync(path, text)
        line = args.line - 1
        position = {"line": line, "character": client.columns(text).to_units(line, args.character - 1)}
        document = {"uri": uri_of(path)}
        method, params = {
            "definition": ("textDocument/definition", {"textDocument": document, "position": position}),
            "references": (
                "textDocument/references",
                {"textDocument": document, "position": position, "context": {"includeDeclaration": True}},
            ),
            "hover": ("textDocument/hover", {"textDocument": document, "position": position}),
            "symbols": ("textDocument/documentSymbol", {"textDocument": document}),
        }[args.operation]
        try:
            result = await client.request(method, params, 30.0)
        except LspError as exc:
            return ToolResult.error(call, str(exc))
        shown = self._render(args.operation, result, ctx.workspace, lambda uri: self._columns(client, uri))
        return ToolResult(id=call.id, name=call.name, text=shown)

    def _columns(self, client: LspClient, uri: str) -> Columns:
        """The columns of a file a location names: the text the server has, else the file's."""
        from roder_ext_lsp.client import path_of

        text = client.text_of(uri)
        return client.columns(text if text is not None else self.slot.manager._text(path_of(uri)))

    def _render(self, operation: str, result: Any, workspace: Path, columns: Callable[[str], Columns]) -> str:
        if not result:
            return f"the server found no {operation} here"
        if operation == "hover":
            contents = result.get("contents") if isinstance(result, dict) else result
            if isinstance(contents, dict):
                return str(contents.get("value", ""))
            if isinstance(contents, list):
                return "\n".join(str(c.get("value", c)) if isinstance(c, dict) else str(c) for c in contents)
            return str(contents)
        if operation == "symbols":
            return "\n".join(_symbols(result if isinstance(result, list) else [], 0)[:300])
        from roder_ext_lsp.client import path_of

        locations = result if isinstance(result, list) else [result]
        lines = []
        for location in locations[:200]:
            uri = location.get("uri") or location.get("targetUri", "")
            start = (location.get("range") or location.get("targetSelectionRange") or {}).get("start", {})
            shown = path_of(uri)
            with_root = shown.relative_to(workspace).as_posix() if shown.is_relative_to(workspace) else str(shown)
            line = int(start.get("line", 0))
            character = columns(uri).to_characters(line, int(start.get("character", 0)))
            lines.append(f"{with_root}:{line + 1}:{character + 1}")
        more = f"\n(+{len(locations) - 200} more)" if len(locations) > 200 else ""
        return "\n".join(lines) + more


SYMBOL_KINDS = {5: "class", 6: "method", 12: "function", 13: "variable", 14: "constant", 23: "struct", 11: "interface"}


def _symbols(rows: list[dict[str, Any]], depth: int) -> list[str]:
    lines = []
    for row in rows:
        start = (row.get("range") or row.get("location", {}).get("range") or {}).get("start", {})
        kind = SYMBOL_KINDS.get(int(row.get("kind", 0)), "symbol")
        lines.append(f"{'  ' * depth}{kind} {row.get('name')} (line {start.get('line', 0) + 1})")
        lines += _symbols(row.get("children") or [], depth + 1)
    return lines


class LspTools:
    """Offers ``lsp`` while at least one server runs (asked each turn). Also the ``PluginAware``
    face of the language servers: a plugin's server is known from the next edit after it was
    enabled, and stopped when its plugin goes."""

    plugin_parts = frozenset({"lsp_servers"})

    def __init__(self, slot: ManagerSlot) -> None:
        self.slot = slot
        self.tool = LspTool(slot)

    def id(self) -> str:
        return "lsp-tools"

    async def reload_plugins(self, active: ActivePlugins) -> list[str]:
        from roder_ext_lsp.servers import available

        self.slot.plugins = plugin_specs(active, self.slot.project)
        manager = self.slot.made
        if manager is not None:  # else the manager, when first needed, is made with them
            await manager.use_servers(*available(manager.config, self.slot.plugins, manager.env.get("PATH")))
        return []

    def contribute(self, registry: ToolRegistry) -> None:
        manager = self.slot.made
        if manager is not None and manager.running():
            registry.register(self.tool)

    async def aclose(self) -> None:
        manager = self.slot.made
        if manager is not None:
            await manager.aclose()


class LspStatus:
    def __init__(self, slot: ManagerSlot) -> None:
        self.slot = slot

    def id(self) -> str:
        return "lsp"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        manager = self.slot.made
        if manager is None:
            return None
        running = manager.running()
        waiting = [f"{name} (waits for trust)" for name, state in manager.states.items() if state.withheld]
        failed = [f"{name} (failed)" for name, state in manager.states.items() if state.error and state.client is None]
        shown = running + waiting + failed
        return StatusView(text="lsp: " + ", ".join(shown), priority=20) if shown else None


class LspExtension(RoderExtension):
    def __init__(self, slot: ManagerSlot, diagnostics_timeout: float, hook_timeout: float) -> None:
        self.slot = slot
        self.diagnostics_timeout = diagnostics_timeout
        self.hook_timeout = hook_timeout

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-lsp",
            name="Language servers",
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description="Diagnostics after edits and a code-intelligence tool, from language servers",
            provides=[
                ProvidedService.Hook("lsp-diagnostics"),
                ProvidedService.ToolProvider("lsp-tools"),
                ProvidedService.StatusSegment("lsp"),
            ],
            # Language servers are programs Roder starts (confined: the workspace read-only).
            required_capabilities=[CapabilityRequest("process.spawn.lsp"), CapabilityRequest("fs.read.workspace")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.hook(DiagnosticsHook(self.slot, self.diagnostics_timeout, self.hook_timeout))
        registry.tool_contributor(LspTools(self.slot))
        registry.status_segment(LspStatus(self.slot))


def plugin_specs(active: ActivePlugins, project: Path) -> list[ServerSpec]:
    """The language servers of the enabled plugins (``.lsp.json`` / ``lspServers``), with
    ``${CLAUDE_PLUGIN_ROOT}`` and friends filled in their command, arguments and environment as
    whole values (never through a shell), and set in their environment too."""
    specs = []
    for plugin in active.plugins:
        variables = plugin.variables(project)
        for server in plugin.layout.lsp_servers:
            from roder_core.plugins.components import fill_options  # only when a plugin has a server
            from roder_ext_lsp.servers import from_plugin

            raw = {k: fill_options(v, variables, {}) if k in ("command", "args", "env") else v for k, v in server.raw.items()}
            env = raw.get("env")
            raw["env"] = {**variables, **(env if isinstance(env, dict) else {})}
            spec = from_plugin(plugin.name, server.name, raw)
            if spec is not None:
                specs.append(spec)
    return specs


def create(host: HostContext) -> LspExtension | None:
    from roder_core.plugins.enabled import ActivePlugins, active_plugins

    config = host.config.lsp
    if not config.enabled:
        return None
    try:
        active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    except Exception as exc:  # a broken plugin folder must not take the editor tools down
        log.warning("plugins' language servers not read: %s", exc)
        active = ActivePlugins()

    def make(plugins: list[ServerSpec]) -> LspManager:
        from roder_core.brokers.own_folders import OwnFolders
        from roder_ext_lsp.manager import LspManager
        from roder_ext_lsp.servers import available

        specs, hints = available(config, plugins, host.env.get("PATH"))
        hidden = OwnFolders.of(host.paths, host.env).existing()
        return LspManager(config, specs, hints, host.cwd, host.env, host.secrets, hidden, host.trusted)

    slot = ManagerSlot(make, plugin_specs(active, host.cwd), host.cwd)
    return LspExtension(slot, config.diagnostics_timeout, host.config.hook_timeout)
