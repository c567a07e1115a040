"""Projects as users have them, through the real loop with pyright and
typescript-language-server: a monorepo with several pyproject and tsconfig roots below the
workspace, a file that is not UTF-8, and an edit outside the workspace."""

from __future__ import annotations

from pathlib import Path

from tests.lsp.support import edit, need, tool_results

GREET = "export function greet(name: string): string {\n  return name;\n}\ngreet('x');\n"
SOURCE = "def double(n: int) -> int:\n    return n * 2\n\n\nvalue: int = double(2)\n"


async def test_nested_roots_a_latin_1_file_and_a_file_outside_the_workspace(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """Each nested project's edit gets its own type error, at its own path; a Latin-1 file's
    diagnostic lands on the right line and column; an edit outside the workspace is refused in
    one line, naming the path, and starts nothing."""
    need("pyright-langserver")
    need("typescript-language-server")
    for package in ("a", "b"):
        root = workspace / "packages" / package
        (root / "src").mkdir(parents=True)
        (root / "pyproject.toml").write_text(f'[project]\nname = "{package}"\nversion = "0"\n\n[tool.pyright]\n')
        (root / "src" / "m.py").write_text(SOURCE)
    for app in ("app1", "app2"):
        (workspace / "web" / app).mkdir(parents=True)
        (workspace / "web" / app / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}')
        (workspace / "web" / app / "a.ts").write_text(GREET)
    (workspace / "latin.py").write_bytes("# café\n".encode("latin-1") + SOURCE.encode())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.py").write_text(SOURCE)
    calls = [
        edit("packages/b/src/m.py", "double(2)", 'double("two")'),
        edit("web/app2/a.ts", "greet('x');", "greet(42);"),
        edit("latin.py", "double(2)", 'double("two")'),
        edit(str(outside / "o.py"), "double(2)", 'double("two")'),
    ]
    (nested, app2, latin, elsewhere), status = await tool_results(workspace, tmp_path, calls)
    assert "Diagnostics this change introduced (pyright):\n  packages/b/src/m.py:5:21 error: " in nested.text, nested.text
    assert "packages/a/" not in nested.text
    assert (
        "Diagnostics this change introduced (typescript):\n  web/app2/a.ts:4:7 error: "
        "Argument of type 'number' is not assignable to parameter of type 'string'. [2345]"
    ) in app2.text, app2.text
    assert "Diagnostics this change introduced (pyright):\n  latin.py:6:21 error: " in latin.text, latin.text
    assert (elsewhere.is_error, elsewhere.text) == (
        True,
        f"denied by policy: {outside / 'o.py'} is outside the workspace; file tools never write there",
    )
    assert (outside / "o.py").read_text() == SOURCE
    assert status == "lsp: pyright, typescript"
