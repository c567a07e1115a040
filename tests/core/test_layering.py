"""The one dependency rule, checked on the source: roder_core's import graph.

Every import counts, wherever it is written: at module level, inside a function (lazy), or under
``TYPE_CHECKING``. A lazy or type-only import still couples two modules; hiding a circle in a
function only moves it from import time to run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import roder_core

CORE = Path(roder_core.__file__).parent
#: No two core modules may import each other (``RoderExtension.install`` names the narrow
#: ``kernel.services.ServiceRegistrar``, not the registry builder that validates extensions).
ALLOWED_PAIRS: set[frozenset[str]] = set()
#: The layering contract of roder_core's packages, top to bottom (docs/architecture.md draws it).
#: A package may import packages of its own layer and of the layers below; ``roder_core`` itself is
#: a lazy facade outside the layers (modules import ``__version__`` from it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("server",),
    ("batch", "workflows"),
    ("runtime",),
    ("teams",),
    ("turn",),
    ("customization", "plugins"),
    ("policy",),
    ("providers",),
    ("auth",),
    ("kernel",),
    ("threads", "media"),
    ("brokers",),
    ("settings", "testing"),
    ("ir", "errors", "bounded_json", "bounded_log", "modes"),
)
#: The known imports against the layers, each with why it stays for now. A new one fails
#: ``test_no_package_imports_a_higher_layer``: move the shared type down instead, or name a
#: narrow protocol in the lower package.
ALLOWED_BACK_EDGES: dict[tuple[str, str], str] = {
    ("roder_core.brokers.host", "roder_core.plugins.enabled"): "enabled plugins' bin/ folders join the command PATH",
    ("roder_core.brokers.host", "roder_core.runtime.options"): "BrokerScope, the broker factory's argument (type only)",
    ("roder_core.brokers.live_redaction", "roder_core.threads.events"): "redacts the delta events it is handed",
    ("roder_core.brokers.own_folders", "roder_core.server.host_paths"): "the background host's folder is hidden too",
    ("roder_core.customization.mentions", "roder_core.runtime.runtime"): "the Runtime it reads resources through (type only)",
    ("roder_core.customization.slash_commands", "roder_core.runtime.runtime"): "the Runtime it expands for (type only)",
    ("roder_core.kernel.distribution", "roder_core.policy.trust"): "the default distribution loads project items by trust",
    ("roder_core.kernel.teams", "roder_core.teams.model"): "the tools' team channel speaks the team model",
    ("roder_core.kernel.tools", "roder_core.customization.subagents"): "TraceRecord of a child run (type only)",
    ("roder_core.kernel.tools", "roder_core.policy.plan_review"): "PlanVerdict a plan tool returns (type only)",
    ("roder_core.settings.config", "roder_core.brokers.path_rules"): "a project's config is read under the brokers' rules",
    ("roder_core.settings.config", "roder_core.brokers.project_reader"): "a project's config is read by the project reader",
    ("roder_core.teams.manager", "roder_core.runtime.options"): "RuntimeOptions of member threads (type only)",
    ("roder_core.threads.state", "roder_core.kernel.file_ledger"): "a thread's state keeps the ledger of files its tools read",
    (
        "roder_core.threads.events",
        "roder_core.policy.plan_review",
    ): "plan-review events carry the review (imported when one is first built: LateModel)",
    (
        "roder_core.threads.events",
        "roder_core.teams.model",
    ): "team events carry the team (imported when one is first built: LateModel)",
    ("roder_core.threads.trajectory", "roder_core.turn.context"): "a trajectory renders history as the model saw it",
    ("roder_core.turn.host", "roder_core.runtime.options"): "the TurnHost protocol names RuntimeOptions (type only)",
    ("roder_core.turn.host", "roder_core.runtime.pending"): "the TurnHost protocol names the approval table (type only)",
    ("roder_core.turn.tool_host", "roder_core.runtime.options"): "RuntimeOptions of a call's host (type only)",
}
#: What the core must never import: the UI, UI toolkits, extensions, provider SDKs.
FORBIDDEN_ROOTS = ("textual", "rich", "roder_tui", "extensions", "roder_ext_", "openai", "anthropic", "google")


def core_modules() -> dict[str, Path]:
    return package_modules(CORE)


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every module name ``module`` imports, absolute, including ``from pkg import submodule``."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def core_graph() -> dict[str, set[str]]:
    return package_graph(CORE)


def package_graph(root: Path) -> dict[str, set[str]]:
    """Which of the package's own modules each of its modules imports."""
    modules = package_modules(root)
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def test_the_graph_sees_lazy_and_type_only_imports() -> None:
    graph = core_graph()
    # runtime.runtime imports manual compaction inside a method, and turn.runner names its host
    # protocol only under TYPE_CHECKING: both edges must be visible to the checks below.
    assert "roder_core.turn.manual_compaction" in graph["roder_core.runtime.runtime"]
    assert "roder_core.turn.host" in graph["roder_core.turn.runner"]


def test_no_two_core_modules_import_each_other() -> None:
    graph = core_graph()
    pairs = {frozenset({a, b}) for a, targets in graph.items() for b in targets if a in graph.get(b, set())}
    unexpected = sorted(tuple(sorted(pair)) for pair in pairs - ALLOWED_PAIRS)
    assert unexpected == [], f"import circles between core modules: {unexpected}"


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other through imports (Tarjan's strongly connected
    components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, set()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_cycle_finder_sees_long_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_no_import_circle_of_any_length_in_core() -> None:
    """Not only pairs: no chain of imports leads from a core module back to itself (the runtime,
    the turn runner, compaction, the tool host and plan reviews each name a narrow protocol)."""
    allowed = [sorted(pair) for pair in ALLOWED_PAIRS]
    unexpected = [group for group in import_cycles(core_graph()) if group not in allowed]
    assert unexpected == [], f"import circles in roder_core: {unexpected}"


#: Module circles inside the app (roder_tui) that stay for now, each with why.
TUI_ALLOWED_CIRCLES: dict[tuple[str, ...], str] = {
    ("roder_tui.widgets.messages", "roder_tui.widgets.transcript"): (
        "the message views subclass the transcript's EntryWidget, which loads them lazily by kind;"
        " the base class moves out with the streaming-widget work in progress there"
    ),
}


def test_no_import_circle_of_any_length_in_the_app() -> None:
    """The app's helpers (palette, team control, tasks and workflow screens, completion, member
    panes) name a narrow protocol or take callables instead of importing the module that uses
    them, so no chain of imports inside roder_tui leads back to where it started."""
    import roder_tui

    found = import_cycles(package_graph(Path(roder_tui.__file__).parent))
    unexpected = [group for group in found if tuple(group) not in TUI_ALLOWED_CIRCLES]
    assert unexpected == [], f"import circles in roder_tui: {unexpected}"
    stale = [group for group in TUI_ALLOWED_CIRCLES if list(group) not in found]
    assert stale == [], f"allowed circles that are gone (drop them from TUI_ALLOWED_CIRCLES): {stale}"


def package_of(module: str) -> str | None:
    """``roder_core.turn.runner`` -> ``turn``; the facade ``roder_core`` itself has none."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layer_back_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Module imports that reach a package of a higher layer than the importer's."""
    rank = {package: index for index, layer in enumerate(LAYERS) for package in layer}
    edges = set()
    for module, targets in graph.items():
        for target in targets:
            source, dest = package_of(module), package_of(target)
            if source is not None and dest is not None and rank[dest] < rank[source]:
                edges.add((module, target))
    return edges


def test_every_core_package_has_a_layer() -> None:
    packages = {package_of(module) for module in core_graph()} - {None}
    layered = {package for layer in LAYERS for package in layer}
    assert packages == layered, {"without a layer": sorted(packages - layered), "gone": sorted(layered - packages)}


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"roder_core.ir": {"roder_core.server.dispatcher"}, "roder_core.server.dispatcher": {"roder_core.ir"}}
    assert layer_back_edges(graph) == {("roder_core.ir", "roder_core.server.dispatcher")}


def test_no_package_imports_a_higher_layer() -> None:
    """The contract: imports point down the layers, but for the listed, explained exceptions."""
    edges = layer_back_edges(core_graph())
    assert sorted(edges - ALLOWED_BACK_EDGES.keys()) == [], "new imports against the layers (docs/architecture.md)"
    assert sorted(ALLOWED_BACK_EDGES.keys() - edges) == [], "gone: remove them from ALLOWED_BACK_EDGES and the doc"


def render_back_edges() -> str:
    """The back-edge table docs/architecture.md shows (a test checks the page has it verbatim)."""
    rows = ["| import | why it stays |", "|---|---|"]
    for (module, target), why in sorted(ALLOWED_BACK_EDGES.items()):
        rows.append(f"| `{module.removeprefix('roder_core.')}` -> `{target.removeprefix('roder_core.')}` | {why} |")
    return "\n".join(rows) + "\n"


def test_the_architecture_page_draws_the_contract() -> None:
    """The package map lists the packages in layer order, and the exceptions table is current."""
    page = (CORE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = page[page.index("```\nroder_tui") : page.index("```", page.index("```\nroder_tui") + 3)]
    drawn = []
    for line in diagram.splitlines():
        for name in line.split("   ")[0].replace(",", " ").split():
            if name.startswith("roder_core."):
                drawn.append(name.removeprefix("roder_core."))
    assert drawn == [package for layer in LAYERS for package in layer]
    assert render_back_edges() in page, "paste tests.core.test_layering.render_back_edges() into docs/architecture.md"


def test_core_imports_no_ui_extension_or_provider_sdk() -> None:
    offenders = []
    for module, path in core_modules().items():
        for name in imported_names(module, path):
            if name.split(".")[0].startswith(FORBIDDEN_ROOTS):
                offenders.append(f"{module} imports {name}")
    assert offenders == []


def test_core_has_no_loose_top_level_modules() -> None:
    """Modules are grouped by concern; only the shared vocabulary stays at the top."""
    top = sorted(p.stem for p in CORE.glob("*.py") if p.stem != "__init__")
    assert top == ["bounded_json", "bounded_log", "errors", "ir", "modes"]


EXTENSIONS = CORE.parent / "extensions"
#: The runtime's insides (subpackage and modules of roder_core); extensions get what they need
#: through ToolExecutionContext.host.
RUNTIME_INTERNALS = tuple(f"roder_core.{name}" for name in ("runtime", "turn.runner", "turn.host", "turn.tool_host"))


def test_extensions_never_reach_the_runtime() -> None:
    """No back door: an extension imports no runtime internals and reads no runtime out of
    ``ctx.extra`` (the ``ToolHost`` on the context is the only way in)."""
    offenders = []
    for path in sorted(EXTENSIONS.rglob("*.py")):
        module = ".".join(path.relative_to(EXTENSIONS).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in imported_names(module, path):
            if name.startswith(RUNTIME_INTERNALS):
                offenders.append(f"{module} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "Runtime":
                offenders.append(f"{module} names Runtime")
            if isinstance(node, ast.Constant) and node.value in ("runtime", "turn_runner"):
                offenders.append(f"{module} looks up {node.value!r}")
    assert offenders == []
