"""Language servers through the real loop: pyright and typescript-language-server (from npm),
started by Roder on first use, confined like commands. An edit that breaks types returns the
diagnostic in the same tool result; the read-only lsp tool answers; a plugin's .lsp.json server
serves diagnostics too."""

from __future__ import annotations

from pathlib import Path

from roder_core.policy.trust import TrustStore
from roder_core.settings.paths import RoderPaths
from tests.lsp.support import SLOW_MACHINE, edit, need, tool_results


async def test_an_edit_that_breaks_types_returns_the_diagnostic(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    need("pyright-langserver")
    (workspace / "m.py").write_text(
        "def double(n: int) -> int:\n    return n * 2\n\n\nvalue: int = double(2)\nunused = undefined_name\n"
    )
    calls = [
        edit("m.py", "value: int = double(2)", 'value: int = double("two")'),
        edit("m.py", 'double("two")', "double(3)"),
        {"name": "lsp", "arguments": {"operation": "hover", "path": "m.py", "line": 1, "character": 5}},
    ]
    (broke, fixed, hover), status = await tool_results(workspace, tmp_path, calls)
    assert not broke.is_error, broke.text
    report = broke.text.split("\n\nDiagnostics this change introduced (pyright):\n", 1)
    assert len(report) == 2, broke.text
    first = report[1].splitlines()[0]
    assert first.startswith("  m.py:5:21 error: ") and "\"Literal['two']\"" in first and "int" in first, first
    assert "undefined_name" not in report[1]  # there before the edit: not the edit's doing
    assert "Diagnostics this change introduced" not in fixed.text
    assert "no diagnostics" not in fixed.text  # asked for (pull), so silence never stands in for an answer
    assert "def double(n: int) -> int" in hover.text
    assert status == "lsp: pyright"


async def test_a_typescript_edit_reports_its_type_error(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    need("typescript-language-server")
    (workspace / "a.ts").write_text("export function greet(name: string): string {\n  return `hi ${name}`;\n}\ngreet('x');\n")
    (broke,), _ = await tool_results(workspace, tmp_path, [edit("a.ts", "greet('x');", "greet(42);")])
    assert "Diagnostics this change introduced (typescript):" in broke.text, broke.text
    assert "a.ts:4:7 error: Argument of type 'number' is not assignable to parameter of type 'string'." in broke.text


async def test_a_typescript_edit_that_changes_no_diagnostics_is_answered_and_a_breaking_one_still_reported(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """typescript-language-server publishes nothing when a clean file stays clean, so a client
    that waits for a publication waits out its whole deadline and then cannot say whether the
    change was clean. Asked instead (tsserver's diagnostics, ordered after the change), a clean
    edit is answered as clean, with no note about a silent server, and a breaking one reports
    its error. The deadline here is minutes: a wait on silence would show as that note."""
    need("typescript-language-server")
    (workspace / "clean.ts").write_text("export function add(a: number, b: number): number {\n  return a + b;\n}\nadd(1, 2);\n")
    calls = [
        edit("clean.ts", "add(1, 2);", "// still clean\nadd(3, 4);"),
        edit("clean.ts", "add(3, 4);", "add(5, 6);"),
        edit("clean.ts", "add(5, 6);", "add(5, '6');"),
    ]
    (first, second, broke), status = await tool_results(workspace, tmp_path, calls)
    for clean in (first, second):
        assert not clean.is_error, clean.text
        assert "Diagnostics" not in clean.text and "no diagnostics" not in clean.text, clean.text
    assert "Diagnostics this change introduced (typescript):" in broke.text, broke.text
    assert (
        "clean.ts:5:8 error: Argument of type 'string' is not assignable to parameter of type 'number'. [2345]" in broke.text
    ), broke.text
    assert status == "lsp: typescript"


async def test_a_plugins_lsp_json_server_serves_diagnostics(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    """A server declared only by a plugin (the official pyright-lsp entry's shape), with the
    built-in table switched off so nothing else could have answered."""
    need("pyright-langserver")
    from roder_core.plugins.store import PluginStore
    from tests.plugins.support import copy_official

    root = copy_official(tmp_path / "catalog", ["pyright-lsp"])
    store = PluginStore(RoderPaths.from_env())
    _known, market = store.add_marketplace(str(root), official=True)
    identifier = f"pyright-lsp@{market.name}"
    store.install(identifier, store.preview(identifier).consent)
    (roder_home / "config.toml").write_text(SLOW_MACHINE + "builtin = false\n")
    (workspace / "p.py").write_text("count: int = 1\n")
    # Not trusted yet: a plugin's server may run what the project configures, so it waits.
    (waiting,), status = await tool_results(workspace, tmp_path, [edit("p.py", "count: int = 1", "count: int = 2")])
    assert waiting.text.endswith(
        "\n\n(no diagnostics: pyright starts only in trusted folders (it can run the project's own code): "
        "`roder trust` to allow it)"
    ), waiting.text
    assert status == "lsp: pyright (waits for trust)"
    TrustStore(RoderPaths.from_env()).set(workspace, True)
    (broke,), _ = await tool_results(workspace, tmp_path, [edit("p.py", "count: int = 2", 'count: int = "1"')])
    assert "Diagnostics this change introduced (pyright):" in broke.text, broke.text


async def test_without_a_server_nothing_changes(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    (roder_home / "config.toml").write_text("[lsp]\nbuiltin = false\n")
    (workspace / "m.py").write_text("value: int = 1\n")
    (result,), status = await tool_results(workspace, tmp_path, [edit("m.py", "value: int = 1", 'value: int = "x"')])
    assert "Diagnostics" not in result.text and status == ""
