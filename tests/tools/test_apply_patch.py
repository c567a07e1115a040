"""apply_patch: add, update (with @@ anchors and fuzz), move, delete; all or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from roder_ext_builtin_coding_tools.patch import ApplyPatchTool, PatchError, apply_hunks, parse_patch

from roder_core.kernel.tools import ToolCall, ToolExecutionContext
from tests.tools.harness import context, make_brokers, run_tool


def ctx_for(workspace: Path, tmp_path: Path) -> ToolExecutionContext:
    return context(workspace, make_brokers(workspace, tmp_path / "cache"))


def patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


async def test_add_update_move_delete_in_one_patch(workspace: Path, tmp_path: Path) -> None:
    (workspace / "app.py").write_text("import os\n\ndef main():\n    print('hi')\n    return 0\n")
    (workspace / "old.txt").write_text("bye\n")
    (workspace / "gone.txt").write_text("x\n")
    text = patch(
        "*** Add File: docs/new.md",
        "+# New",
        "+text",
        "*** Update File: app.py",
        "@@ def main():",
        "-    print('hi')",
        "+    print('hello')",
        "     return 0",
        "*** Update File: old.txt",
        "*** Move to: moved/old.txt",
        "-bye",
        "+hello",
        "*** Delete File: gone.txt",
    )
    result = await run_tool(ApplyPatchTool(), ctx_for(workspace, tmp_path), patch=text)
    assert not result.is_error, result.text
    assert (workspace / "docs/new.md").read_text() == "# New\ntext\n"
    assert (workspace / "app.py").read_text() == "import os\n\ndef main():\n    print('hello')\n    return 0\n"
    assert (workspace / "moved/old.txt").read_text() == "hello\n"
    assert not (workspace / "old.txt").exists()
    assert not (workspace / "gone.txt").exists()
    assert "A docs/new.md" in result.text
    assert "R old.txt -> moved/old.txt" in result.text
    assert "D gone.txt" in result.text
    assert [c.kind for c in result.views[0].changes] == ["add", "update", "move", "delete"]


async def test_failing_hunk_changes_nothing(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / "b.txt").write_text("two\n")
    text = patch(
        "*** Update File: a.txt",
        "-one",
        "+ONE",
        "*** Update File: b.txt",
        "-three",
        "+THREE",
        "*** Add File: c.txt",
        "+c",
    )
    result = await run_tool(ApplyPatchTool(), ctx_for(workspace, tmp_path), patch=text)
    assert result.is_error
    assert "b.txt, hunk 1" in result.text
    assert (workspace / "a.txt").read_text() == "one\n"
    assert not (workspace / "c.txt").exists()


async def test_write_failure_midway_restores_earlier_files(workspace: Path, tmp_path: Path) -> None:
    """The second file is protected: the broker refuses it after the first was planned; the
    first must not stay changed (planning catches it here, before any write)."""
    (workspace / "a.txt").write_text("one\n")
    text = patch("*** Update File: a.txt", "-one", "+ONE", "*** Add File: .git/hooks/pre-commit", "+evil")
    result = await run_tool(ApplyPatchTool(), ctx_for(workspace, tmp_path), patch=text)
    assert result.is_error
    assert "refused" in result.text
    assert (workspace / "a.txt").read_text() == "one\n"


async def test_commit_rolls_back_on_a_failed_write(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / "b.txt").write_text("two\n")
    brokers = make_brokers(workspace, tmp_path / "cache")
    real_write = brokers.fs.write_bytes

    def flaky(path: str, data: bytes) -> Path:
        if path == "b.txt":
            raise OSError("disk full")
        return real_write(path, data)

    monkeypatch.setattr(brokers.fs, "write_bytes", flaky)
    text = patch("*** Update File: a.txt", "-one", "+ONE", "*** Update File: b.txt", "-two", "+TWO")
    with pytest.raises(OSError, match="disk full"):
        await ApplyPatchTool().run(context(workspace, brokers), _call(text))
    assert (workspace / "a.txt").read_text() == "one\n"


def _call(text: str) -> ToolCall:
    return ToolCall(id="c", name="apply_patch", arguments={"patch": text})


def test_parse_errors_are_clear() -> None:
    with pytest.raises(PatchError, match="must start"):
        parse_patch("*** Update File: a\n-x\n*** End Patch")
    with pytest.raises(PatchError, match="must end"):
        parse_patch("*** Begin Patch\n*** Update File: a\n-x")
    with pytest.raises(PatchError, match="starts with"):
        parse_patch(patch("*** Add File: a", "no plus"))
    with pytest.raises(PatchError, match="no changes"):
        parse_patch(patch("*** Update File: a"))


def test_hunks_match_with_trailing_whitespace_and_eof() -> None:
    ops = parse_patch(patch("*** Update File: f", "@@", " a", "-b", "+B", "*** End of File"))
    assert apply_hunks("a  \nb\n", ops[0].hunks, "f") == "a  \nB\n"
    ops = parse_patch(patch("*** Update File: f", " x", "-y", "+Y", " z"))
    assert apply_hunks("x\ny\nz\nx\ny\n", ops[0].hunks, "f") == "x\nY\nz\nx\ny\n"


async def test_add_existing_and_duplicate_paths_refused(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    ctx = ctx_for(workspace, tmp_path)
    exists = await run_tool(ApplyPatchTool(), ctx, patch=patch("*** Add File: a.txt", "+b"))
    assert exists.is_error
    assert "already exists" in exists.text
    twice = await run_tool(ApplyPatchTool(), ctx, patch=patch("*** Update File: a.txt", "-a", "+b", "*** Delete File: a.txt"))
    assert twice.is_error
    assert "twice" in twice.text
    assert (workspace / "a.txt").read_text() == "a\n"


async def test_crlf_file_keeps_line_endings(workspace: Path, tmp_path: Path) -> None:
    (workspace / "w.txt").write_bytes(b"a\r\nb\r\n")
    result = await run_tool(
        ApplyPatchTool(), ctx_for(workspace, tmp_path), patch=patch("*** Update File: w.txt", " a", "-b", "+c")
    )
    assert not result.is_error
    assert (workspace / "w.txt").read_bytes() == b"a\r\nc\r\n"
