"""The ``roder`` subcommands are clients of the control plane (issue 14, "one typed client"): no
CLI module imports a service the control plane owns, so a subcommand can do nothing an
app-server client cannot, and calls the same methods (``client.call(SPEC, params)``).

Read from the source (every import, lazy or not, and any ``importlib`` string), like the
layering test."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI_MODULES = [
    ROOT / "roder_tui" / "cli.py",
    ROOT / "roder_tui" / "ask.py",
    *sorted((ROOT / "roder_tui" / "commands").glob("*.py")),
]
#: Services behind control-plane methods: plugins and marketplaces, the runtime and its parts,
#: teams, workflows, media, and the handlers themselves.
OWNED = (
    "roder_core.plugins",
    "roder_core.runtime.runtime",
    "roder_core.runtime.thread_table",
    "roder_core.runtime.pending",
    "roder_core.runtime.tasks",
    "roder_core.runtime.runners",
    "roder_core.kernel.distribution",
    "roder_core.teams",
    "roder_core.workflows",
    "roder_core.media",
    "roder_core.server.methods",
)
#: Handler functions a command may call directly because they need no runtime at all:
#: `roder trust` decides about a folder without loading anything of it, and `roder audit`
#: reads a file. Both say so in their docstrings.
NO_RUNTIME = {
    "roder_tui/commands/trust.py": {"roder_core.server.methods.trust"},
    "roder_tui/commands/audit.py": {"roder_core.server.methods.audit"},
}
OWNED_NAMES = ("PluginService", "PluginStore", "claude_import", "make_host", "build_distribution")


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    """Every imported module (``from a import b`` counts ``a`` and ``a.b``) and every
    ``importlib.import_module("...")`` / ``__import__("...")`` string."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def _owned(module: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in OWNED)


def test_no_cli_module_imports_a_service_the_control_plane_owns() -> None:
    assert len(CLI_MODULES) > 20 and all(path.is_file() for path in CLI_MODULES)
    problems = []
    for path in CLI_MODULES:
        relative = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        allowed = NO_RUNTIME.get(relative, set())
        for line, module in _imports(ast.parse(source)):
            if _owned(module) and not any(module == a or module.startswith(a + ".") for a in allowed):
                problems.append(f"{relative}:{line} imports {module}")
        problems += [f"{relative} names {name}" for name in OWNED_NAMES if name in source]
    assert not problems, "call the control-plane method instead (client.call(SPEC, params)):\n" + "\n".join(problems)


def test_the_check_sees_lazy_and_dynamic_imports() -> None:
    """The check above would catch the old ``roder plugin`` and its hiding places."""
    old = (
        "from roder_core.plugins.service import PluginService\n"
        "def run():\n    from roder_core.kernel.distribution import make_host\n"
        "    import importlib\n    importlib.import_module('roder_core.plugins.claude_import')\n"
    )
    modules = [module for _, module in _imports(ast.parse(old)) if _owned(module)]
    assert modules == [
        "roder_core.plugins.service",
        "roder_core.plugins.service.PluginService",
        "roder_core.kernel.distribution",
        "roder_core.kernel.distribution.make_host",
        "roder_core.plugins.claude_import",
    ]
