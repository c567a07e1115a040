"""grep's results are capped in total, counted truly (or "at least"), and paged by ``offset``;
glob starts at the pattern's literal folder and keeps its order, limit and notice. Both grep
engines (ripgrep through the process broker, the Python walk) answer the same."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from roder_ext_builtin_coding_tools import search
from roder_ext_builtin_coding_tools.search import GlobTool, GrepTool

from roder_core.brokers import file_glob
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.kernel.tools import ToolExecutionContext
from tests.brokers.helpers import needs_bwrap
from tests.tools.harness import context, make_brokers, run_tool

ENGINES = ["ripgrep", "python"]


def engine_context(workspace: Path, cache: Path, engine: str) -> ToolExecutionContext:
    if engine == "ripgrep" and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    env = None if engine == "ripgrep" else {"PATH": "/nonexistent"}
    return context(workspace, make_brokers(workspace, cache, env=env))


def matches(text: str) -> list[str]:
    return re.findall(r"^.+?:\d+:.*$", text, re.MULTILINE)


@needs_bwrap
async def test_grep_runs_ripgrep_read_only_under_the_sandbox(workspace: Path, tmp_path: Path) -> None:
    """grep's commands only read: under bubblewrap each runs at the read-only level (so the tree
    is not walked around it), whatever level the session's commands get."""
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    (workspace / "a.txt").write_text("needle\n")
    records: list[tuple[str, dict[str, object]]] = []
    brokers = make_brokers(workspace, tmp_path / "c", sandbox="workspace-write", audit=lambda k, f: records.append((k, f)))
    result = await run_tool(GrepTool(), context(workspace, brokers), pattern="needle")
    assert result.data["engine"] == "ripgrep" and "a.txt:1:needle" in result.text, result.text
    started = [fields for kind, fields in records if kind == "process.start"]
    assert started and all(fields["sandbox"] == "read-only" for fields in started), started


@pytest.mark.parametrize("engine", ENGINES)
async def test_one_file_with_5000_matches_is_capped_in_total_and_paged(workspace: Path, tmp_path: Path, engine: str) -> None:
    (workspace / "many.txt").write_text("hit\n" * 5000)
    ctx = engine_context(workspace, tmp_path / "c", engine)
    first = await run_tool(GrepTool(), ctx, pattern="hit")
    assert first.data["engine"] == engine
    assert matches(first.text) == [f"many.txt:{n}:hit" for n in range(1, 201)]
    assert first.text.endswith(
        "\n\n[4800 more matching lines not shown (lines 1-200 of 5000 shown); to see them call grep again "
        "with offset=200, or narrow the pattern, path or glob]"
    )
    assert (first.data["matches"], first.data["complete"], first.data["shown"]) == (5000, True, 200)
    second = await run_tool(GrepTool(), ctx, pattern="hit", offset=200)
    assert matches(second.text) == [f"many.txt:{n}:hit" for n in range(201, 401)]
    last = await run_tool(GrepTool(), ctx, pattern="hit", offset=4900)
    assert matches(last.text)[-1] == "many.txt:5000:hit"
    assert last.text.endswith("\n\n[lines 4901-5000 of 5000 shown; this is the last page]")
    past = await run_tool(GrepTool(), ctx, pattern="hit", offset=6000)
    assert past.text == "no matching lines past offset 6000; there are 5000 in all (offsets 0-4999)"


@pytest.mark.parametrize("engine", ENGINES)
async def test_true_count_across_3000_files(workspace: Path, tmp_path: Path, engine: str) -> None:
    for n in range(3000):
        (workspace / f"f{n:04d}.txt").write_text(f"match {n}\nother\n")
    ctx = engine_context(workspace, tmp_path / "c", engine)
    result = await run_tool(GrepTool(), ctx, pattern="match")
    assert matches(result.text) == [f"f{n:04d}.txt:1:match {n}" for n in range(200)]
    assert "[2800 more matching lines not shown (lines 1-200 of 3000 shown)" in result.text


@pytest.mark.parametrize("engine", ENGINES)
async def test_counting_stops_and_says_at_least(
    workspace: Path, tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "COUNT_CAP", 50)
    (workspace / "many.txt").write_text("hit\n" * 1000)
    ctx = engine_context(workspace, tmp_path / "c", engine)
    result = await run_tool(GrepTool(), ctx, pattern="hit")
    assert len(matches(result.text)) == 200
    assert "[at least 50 more matching lines not shown (lines 1-200 of at least 250 shown)" in result.text
    assert result.data["complete"] is False


@pytest.mark.parametrize("engine", ENGINES)
async def test_pages_of_long_lines_stay_small_and_join_up(workspace: Path, tmp_path: Path, engine: str) -> None:
    lines = [f"needle {n:03d} " + "x" * 300 for n in range(300)]
    (workspace / "wide.txt").write_text("\n".join(lines) + "\n")
    ctx = engine_context(workspace, tmp_path / "c", engine)
    seen: list[str] = []
    offset = 0
    while True:
        page = await run_tool(GrepTool(), ctx, pattern="needle", offset=offset)
        got = matches(page.text)
        assert got, page.text
        assert len(page.text.encode()) < 50_000  # under the process broker's cut
        seen += got
        offset += len(got)
        if "this is the last page" in page.text or "more matching lines" not in page.text:
            break
        assert f"offset={offset}" in page.text
    assert seen == [f"wide.txt:{n + 1}:{line}" for n, line in enumerate(lines)]


@pytest.mark.parametrize("engine", ENGINES)
async def test_grep_glob_forms(workspace: Path, tmp_path: Path, engine: str) -> None:
    for name in ("src/a/x.py", "src/a/b/x.py", "src/x.py", "x.py", "src/a/y.ts", "lib/a/x.py"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("needle\n")
    ctx = engine_context(workspace, tmp_path / "c", engine)

    async def files(glob: str, path: str | None = None) -> list[str]:
        result = await run_tool(GrepTool(), ctx, pattern="needle", glob=glob, **({"path": path} if path else {}))
        return [line.split(":")[0] for line in matches(result.text)]

    assert await files("*.py") == ["lib/a/x.py", "src/a/b/x.py", "src/a/x.py", "src/x.py", "x.py"]
    assert await files("src/**/*.py") == ["src/a/b/x.py", "src/a/x.py", "src/x.py"]
    assert await files("src/*.py") == ["src/x.py"]
    assert await files("*/a/x.py") == ["lib/a/x.py", "src/a/x.py"]  # not a folder + name: a file list
    assert await files("a/*.py", path="src") == ["src/a/x.py"]  # relative to path
    assert await files("missing/**/*.py") == []


async def test_glob_starts_at_the_literal_folder_with_the_same_order_limit_and_notice(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        for m in range(4):
            folder = workspace / f"pkg{n}" / f"mod{m}"
            (folder / "deeper").mkdir(parents=True)
            for k in range(3):
                (folder / f"f{k}.py").write_text("x")
            (folder / "deeper" / "d.py").write_text("x")
    os.utime(workspace / "pkg1/mod2/f1.py", (2_000_000_000, 2_000_000_000))  # newest
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"))
    one = await run_tool(GlobTool(), ctx, pattern="pkg1/mod2/*.py")
    assert one.text.splitlines()[0] == "pkg1/mod2/f1.py"  # newest first
    assert sorted(one.text.splitlines()) == ["pkg1/mod2/f0.py", "pkg1/mod2/f1.py", "pkg1/mod2/f2.py"]
    deep = await run_tool(GlobTool(), ctx, pattern="pkg1/**/d.py")
    assert sorted(deep.text.splitlines()) == [f"pkg1/mod{m}/deeper/d.py" for m in range(4)]
    monkeypatch.setattr(search, "MAX_FILES", 10)
    capped = await run_tool(GlobTool(), ctx, pattern="**/*.py")
    assert capped.text.splitlines()[0] == "pkg1/mod2/f1.py"
    assert capped.text.endswith("\n\n[38 more files not shown; narrow the pattern]")
    assert capped.data["count"] == 48
    monkeypatch.setattr(file_glob, "ripgrep", lambda: None)  # the broker's own walk answers the same
    assert (await run_tool(GlobTool(), ctx, pattern="**/*.py")).text == capped.text
    assert (await run_tool(GlobTool(), ctx, pattern="pkg1/**/d.py")).text == deep.text


async def test_glob_names_with_special_characters_and_unfollowed_symlinks(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a{b}.txt").write_text("x")
    (workspace / "ab.txt").write_text("x")
    (workspace / "real").mkdir()
    (workspace / "real" / "f.py").write_text("x")
    os.symlink("real", workspace / "alias")
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"))
    assert (await run_tool(GlobTool(), ctx, pattern="a{b}.txt")).text == "a{b}.txt"
    assert (await run_tool(GlobTool(), ctx, pattern="a[b].txt")).text == "ab.txt"
    assert (await run_tool(GlobTool(), ctx, pattern="alias/*.py")).text.startswith("no files match")
    assert (await run_tool(GlobTool(), ctx, pattern="**/f.py")).text == "real/f.py"


def test_roder_own_folders_inside_the_workspace_are_not_listed(workspace: Path) -> None:
    (workspace / "home" / "threads").mkdir(parents=True)
    (workspace / "home" / "threads" / "t.jsonl").write_text("{}")
    (workspace / "code.py").write_text("x")
    fs = WorkspaceFileSystem(workspace, hidden=[workspace / "home"])
    found, total = fs.find_files(".", "**", limit=100)
    assert [info.display for info in found] == ["code.py"]
    assert total == 1
