"""read: numbered lines, windows, limits, binary refusal, images as attachments."""

from __future__ import annotations

import base64
from pathlib import Path

from roder_ext_builtin_coding_tools.read import ReadTool

from roder_core.kernel.tools import CLIENT_TEXT_READER, ToolExecutionContext
from tests.tools.harness import context, make_brokers, run_tool

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def ctx_for(workspace: Path, tmp_path: Path, images: bool = True) -> ToolExecutionContext:
    return context(workspace, make_brokers(workspace, tmp_path / "cache"), images=images)


async def test_numbered_lines(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.py").write_text("one\ntwo\nthree\n")
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="a.py")
    assert not result.is_error
    assert result.text == "     1\tone\n     2\ttwo\n     3\tthree"
    assert result.data["total_lines"] == 3


async def test_offset_and_limit_window_with_continuation_hint(workspace: Path, tmp_path: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="big.txt", offset=10, limit=5)
    lines = result.text.splitlines()
    assert lines[0] == "    10\tline 10"
    assert lines[4] == "    14\tline 14"
    assert "showing lines 10-14 of 100" in result.text
    assert "offset=15" in result.text


async def test_default_limit_is_2000_lines(workspace: Path, tmp_path: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 3001)))
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="long.txt")
    numbered = [line for line in result.text.splitlines() if "\t" in line]
    assert len(numbered) == 2000
    assert numbered[-1].endswith("\t2000")
    assert "of 3000" in result.text
    assert "offset=2001" in result.text


async def test_50kb_cap(workspace: Path, tmp_path: Path) -> None:
    (workspace / "wide.txt").write_text("".join(("x" * 999) + "\n" for _ in range(200)))
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="wide.txt")
    assert len(result.text.encode()) < 52_000
    assert "50 KB" in result.text
    assert result.data["truncated"]


async def test_long_lines_are_cut(workspace: Path, tmp_path: Path) -> None:
    (workspace / "min.js").write_text("a" * 5000 + "\nshort\n")
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="min.js")
    first = result.text.splitlines()[0]
    assert len(first) < 2100
    assert "line cut at 2000 characters" in first
    assert "\tshort" in result.text


async def test_binary_refused_with_hint(workspace: Path, tmp_path: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="blob.bin")
    assert result.is_error
    assert "binary" in result.text
    assert "xxd" in result.text


async def test_image_attached_when_model_accepts_images(workspace: Path, tmp_path: Path) -> None:
    (workspace / "dot.png").write_bytes(PNG)
    result = await run_tool(ReadTool(), ctx_for(workspace, tmp_path), path="dot.png")
    assert not result.is_error
    assert result.attachments[0].mime_type == "image/png"
    assert base64.b64decode(result.attachments[0].data_base64 or "") == PNG
    refused = await run_tool(ReadTool(), ctx_for(workspace, tmp_path, images=False), path="dot.png")
    assert refused.is_error
    assert "does not accept images" in refused.text


async def test_missing_empty_and_past_end(workspace: Path, tmp_path: Path) -> None:
    ctx = ctx_for(workspace, tmp_path)
    missing = await run_tool(ReadTool(), ctx, path="nope.txt")
    assert missing.is_error
    assert "no such file" in missing.text
    (workspace / "empty.txt").write_text("")
    assert (await run_tool(ReadTool(), ctx, path="empty.txt")).text == "empty.txt is empty"
    (workspace / "two.txt").write_text("a\nb\n")
    past = await run_tool(ReadTool(), ctx, path="two.txt", offset=9)
    assert past.is_error
    assert "past the end" in past.text


async def test_folder_and_bad_arguments(workspace: Path, tmp_path: Path) -> None:
    (workspace / "dir").mkdir()
    ctx = ctx_for(workspace, tmp_path)
    folder = await run_tool(ReadTool(), ctx, path="dir")
    assert folder.is_error
    assert "folder" in folder.text
    bad = await run_tool(ReadTool(), ctx, path="a", offset=0)
    assert bad.is_error
    assert "offset" in bad.text


def with_reader(ctx: ToolExecutionContext, texts: dict[Path, str | None], asked: list[Path]) -> ToolExecutionContext:
    async def reader(path: Path) -> str | None:
        asked.append(path)
        return texts.get(path)

    ctx.extra[CLIENT_TEXT_READER] = reader
    return ctx


async def test_client_reader_supplies_the_text_with_the_same_windowing(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("on disk\n")
    buffer = "".join(f"buffer {i}\n" for i in range(1, 11)) + "no newline"
    asked: list[Path] = []
    ctx = with_reader(ctx_for(workspace, tmp_path), {(workspace / "a.txt").resolve(): buffer}, asked)
    result = await run_tool(ReadTool(), ctx, path="a.txt", offset=3, limit=2)
    assert result.text.splitlines()[:2] == ["     3\tbuffer 3", "     4\tbuffer 4"]
    assert "showing lines 3-4 of 11" in result.text
    assert result.data["total_lines"] == 11
    assert asked == [(workspace / "a.txt").resolve()]
    whole = await run_tool(ReadTool(), ctx, path="a.txt")
    assert whole.text.splitlines()[-1] == "    11\tno newline"
    assert "on disk" not in whole.text


async def test_client_reader_none_falls_back_to_disk_and_scope_is_checked_first(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("on disk\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    asked: list[Path] = []
    ctx = with_reader(ctx_for(workspace, tmp_path), {outside: "secret\n"}, asked)
    result = await run_tool(ReadTool(), ctx, path="a.txt")
    assert result.text == "     1\ton disk"
    assert asked == [(workspace / "a.txt").resolve()]
    asked.clear()
    for path in (str(outside), "link.txt", "../outside.txt"):
        refused = await run_tool(ReadTool(), ctx, path=path)
        assert refused.is_error
        assert refused.data == {"refused": True}
    binary = await run_tool(ReadTool(), ctx, path="blob.bin")
    assert binary.is_error
    assert "binary" in binary.text
    assert asked == []
