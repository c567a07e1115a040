"""write and edit: parents created, diff summaries, exact/unique matching, whitespace fallback,
no-op refusal, CRLF and BOM kept, atomic writes."""

from __future__ import annotations

from pathlib import Path

from roder_ext_builtin_coding_tools.edit import EditTool
from roder_ext_builtin_coding_tools.write import WriteTool

from roder_core.kernel.tools import ToolExecutionContext
from tests.tools.harness import context, make_brokers, run_tool


def ctx_for(workspace: Path, tmp_path: Path) -> ToolExecutionContext:
    return context(workspace, make_brokers(workspace, tmp_path / "cache"))


async def test_write_creates_parents_and_summarizes(workspace: Path, tmp_path: Path) -> None:
    result = await run_tool(WriteTool(), ctx_for(workspace, tmp_path), path="a/b/c.txt", content="x\ny\n")
    assert (workspace / "a/b/c.txt").read_text() == "x\ny\n"
    assert result.text == "created a/b/c.txt (2 lines, 4 bytes)"
    change = result.views[0].changes[0]
    assert change.kind == "add"
    assert "+x" in change.diff


async def test_write_update_reports_diff_stats_and_keeps_mode(workspace: Path, tmp_path: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("a\nb\nc\n")
    script.chmod(0o755)
    result = await run_tool(WriteTool(), ctx_for(workspace, tmp_path), path="run.sh", content="a\nB\nc\nd\n")
    assert result.text == "updated run.sh: +2 -1 lines (now 4 lines)"
    assert script.stat().st_mode & 0o777 == 0o755
    assert not list(workspace.glob(".run.sh.*"))  # no temporary file left behind


async def test_write_keeps_crlf_of_existing_file(workspace: Path, tmp_path: Path) -> None:
    (workspace / "w.txt").write_bytes(b"a\r\nb\r\n")
    await run_tool(WriteTool(), ctx_for(workspace, tmp_path), path="w.txt", content="a\nc\n")
    assert (workspace / "w.txt").read_bytes() == b"a\r\nc\r\n"


async def test_edit_exact_unique_returns_unified_diff(workspace: Path, tmp_path: Path) -> None:
    (workspace / "m.py").write_text("def f():\n    return 1\n")
    result = await run_tool(EditTool(), ctx_for(workspace, tmp_path), path="m.py", old_string="return 1", new_string="return 2")
    assert not result.is_error
    assert (workspace / "m.py").read_text() == "def f():\n    return 2\n"
    assert "-    return 1\n+    return 2" in result.text
    assert "--- a/m.py" in result.text


async def test_edit_not_unique_and_replace_all(workspace: Path, tmp_path: Path) -> None:
    (workspace / "d.txt").write_text("x = 1\nx = 1\n")
    ctx = ctx_for(workspace, tmp_path)
    refused = await run_tool(EditTool(), ctx, path="d.txt", old_string="x = 1", new_string="x = 2")
    assert refused.is_error
    assert "occurs 2 times" in refused.text
    assert (workspace / "d.txt").read_text() == "x = 1\nx = 1\n"
    done = await run_tool(EditTool(), ctx, path="d.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert "2 replacements" in done.text
    assert (workspace / "d.txt").read_text() == "x = 2\nx = 2\n"


async def test_edit_whitespace_normalized_match_is_reported(workspace: Path, tmp_path: Path) -> None:
    (workspace / "s.py").write_text("if  a   and b:\n\tgo()\n")
    result = await run_tool(
        EditTool(), ctx_for(workspace, tmp_path), path="s.py", old_string="if a and b:\n    go()", new_string="if a:\n    go()"
    )
    assert not result.is_error
    assert "only up to indentation and spacing" in result.text
    assert result.data["tolerance"].startswith("old_string matched lines 1-2")
    assert (workspace / "s.py").read_text() == "if a:\n\tgo()\n"  # the file's tab, not the model's spaces


async def test_edit_refuses_noop_missing_and_empty(workspace: Path, tmp_path: Path) -> None:
    (workspace / "n.txt").write_text("alpha beta\n")
    ctx = ctx_for(workspace, tmp_path)
    same = await run_tool(EditTool(), ctx, path="n.txt", old_string="alpha", new_string="alpha")
    assert same.is_error
    assert "change nothing" in same.text
    absent = await run_tool(EditTool(), ctx, path="n.txt", old_string="alphx bet", new_string="z")
    assert absent.is_error
    assert "not found" in absent.text
    assert "closest line is 1" in absent.text
    empty = await run_tool(EditTool(), ctx, path="n.txt", old_string="", new_string="z")
    assert empty.is_error
    assert "use write" in empty.text
    new_file = await run_tool(EditTool(), ctx, path="other.txt", old_string="a", new_string="b")
    assert new_file.is_error
    assert "does not exist" in new_file.text
    assert (workspace / "n.txt").read_text() == "alpha beta\n"


async def test_edit_keeps_crlf_and_bom(workspace: Path, tmp_path: Path) -> None:
    target = workspace / "win.txt"
    target.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\n")
    result = await run_tool(
        EditTool(), ctx_for(workspace, tmp_path), path="win.txt", old_string="line one\nline two", new_string="line 1\nline 2"
    )
    assert not result.is_error
    assert target.read_bytes() == b"\xef\xbb\xbfline 1\r\nline 2\r\n"


async def test_edit_binary_file_refused(workspace: Path, tmp_path: Path) -> None:
    (workspace / "b.bin").write_bytes(b"\x00abc")
    result = await run_tool(EditTool(), ctx_for(workspace, tmp_path), path="b.bin", old_string="abc", new_string="x")
    assert result.is_error
    assert "binary" in result.text
