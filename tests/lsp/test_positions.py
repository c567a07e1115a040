"""Columns between the model and a language server: LSP counts UTF-16 code units, the model and
the files count characters. On lines with emoji (two UTF-16 units each) and CJK (one each),
a diagnostic's column and the lsp tool's positions must be the characters of the line."""

from __future__ import annotations

from pathlib import Path

from tests.lsp.support import edit, need, tool_results


async def test_python_columns_after_emoji_are_characters(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    need("pyright-langserver")
    line = 's = "😀😀漢字"; value: int = double(2)'
    (workspace / "m.py").write_text(f"def double(n: int) -> int:\n    return n * 2\n\n\n{line}\n")
    calls = [
        edit("m.py", "double(2)", 'double("two")'),
        # The model's column of `double` on that line, in characters.
        {"name": "lsp", "arguments": {"operation": "hover", "path": "m.py", "line": 5, "character": line.index("double") + 1}},
        {"name": "lsp", "arguments": {"operation": "references", "path": "m.py", "line": 1, "character": 5}},
    ]
    (broke, hover, references), _ = await tool_results(workspace, tmp_path, calls)
    column = line.index("double") + len("double(") + 1
    assert f"m.py:5:{column} error: " in broke.text, broke.text
    assert "def double(n: int) -> int" in hover.text, hover.text
    assert f"m.py:5:{line.index('double') + 1}" in references.text.splitlines(), references.text


async def test_typescript_columns_after_emoji_are_characters(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    need("typescript-language-server")
    line = "const s = '😀😀漢字'; greet('x');"
    (workspace / "a.ts").write_text(f"export function greet(name: string): string {{\n  return name;\n}}\n{line}\n")
    calls = [
        edit("a.ts", "greet('x');", "greet(42);"),
        {"name": "lsp", "arguments": {"operation": "references", "path": "a.ts", "line": 1, "character": 17}},
    ]
    (broke, references), _ = await tool_results(workspace, tmp_path, calls)
    column = line.index("greet") + len("greet(") + 1
    assert f"a.ts:4:{column} error: Argument of type 'number'" in broke.text, broke.text
    assert f"a.ts:4:{line.index('greet') + 1}" in references.text.splitlines(), references.text
