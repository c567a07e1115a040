"""The ignore rules of every listing agree with ``git check-ignore`` on the same tree.

Each case is a real git repository with one or more ignore files. git decides, per file,
whether it is ignored; then the broker's own walk (``ls``' rules, the runner's, the fallback),
ripgrep's walker (``find_files``, the ``glob`` tool), the ``glob`` tool started at a literal
subfolder, and the ``grep`` tool (ripgrep engine, plain and with a path and a glob) must each
show exactly the files git does not ignore.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from roder_ext_builtin_coding_tools.search import GlobTool, GrepTool, LsTool

from roder_core.brokers import file_glob
from roder_core.brokers.fs import WorkspaceFileSystem
from tests.tools.harness import context, make_brokers, run_tool

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

#: (ignore files, files in the tree). Negations, anchored patterns and the ``**`` forms.
CASES: list[tuple[dict[str, str], str]] = [
    ({".gitignore": "*.log\n!keep.log\n"}, "keep.log drop.log sub/x.log"),
    ({".gitignore": "*.txt\n!dir/\n"}, "dir/a.txt dir/b.md b.txt"),
    ({".gitignore": "out/\n!out/keep.txt\n"}, "out/keep.txt out/other.txt"),
    ({".gitignore": "foo/*\n!foo/bar\n!foo/baz/\n"}, "foo/bar foo/x foo/baz/q.txt"),
    ({".gitignore": "dir\n!dir/keep\n"}, "dir/keep dir/drop"),
    ({".gitignore": "*\n!*/\n!*.py\n"}, "a/b.py a/c.txt d.py"),
    ({".gitignore": "/build\n"}, "build/a.txt sub/build/b.txt"),
    ({".gitignore": "/*\n!/src/\n"}, "src/a.txt top.txt other/b.txt"),
    ({".gitignore": "sub/deep/\ndocs/*.tmp\n"}, "sub/deep/f.txt sub/f.txt docs/x.tmp docs/deep/y.tmp"),
    ({".gitignore": "a/**/b\n"}, "a/b a/x/y/b/c.txt a/x/c.txt q/a/b"),
    ({".gitignore": "**/cache\n"}, "cache/z.txt src/cache/w.txt src/cached.txt"),
    ({".gitignore": "logs/**\n!logs/important.txt\n"}, "logs/one.txt logs/important.txt logs/deep/two.txt"),
    ({".gitignore": "abc/**/ghi.txt\nz/**/*.py\n"}, "abc/ghi.txt abc/def/ghi.txt z/r.py z/q/r.py y/r.py"),
    ({".gitignore": "**foo\nbar**\n"}, "xfoo a/yfoo barx a/bary"),
    ({".gitignore": "[!a]*.c\nfile[0-9].txt\n"}, "a1.c b1.c sub/b2.c file7.txt filex.txt"),
    ({".gitignore": "a[\n\\#hash\nsp\\ ace.txt\n"}, "a[ #hash ab"),
    (
        {"sub/.gitignore": "/local.txt\n!*.log\n**/gen\nd/e\n", ".gitignore": "*.log\n"},
        "sub/local.txt sub/deep/local.txt sub/s.log sub/gen/a sub/x/gen/b sub/d/e d/e top.log",
    ),
    ({".git/info/exclude": "secret.*\n", ".gitignore": "!secret.keep\n"}, "secret.txt secret.keep plain.txt"),
    ({".gitignore": "trail.txt   \nesc\\ \n# comment.txt\n\\!bang.txt\n"}, "trail.txt esc\\  comment.txt !bang.txt other.txt"),
    ({".gitignore": "build/\n"}, "build/a.txt sub/build/b.txt buildfile"),
    ({".gitignore": ".*\n!.gitignore\n!.github/\n"}, ".env .hidden/x.txt .github/w.yml visible.txt"),
    ({".gitignore": "*.py[cod]\n__pycache__/\n"}, "a.pyc a.pyo a.py b/__pycache__/c.txt"),
    ({".gitignore": "*.tmp\r\n/dist\r\n"}, "a.tmp dist/x.js src/dist/y.js keep.txt"),
    ({".gitignore": "*.gen\n", "pkg/.gitignore": "!keep.gen\n"}, "a.gen pkg/keep.gen pkg/drop.gen"),
    ({".gitignore": "docs/**/*.md\n!docs/README.md\n"}, "docs/README.md docs/a/b.md docs/c.md notes.md"),
]


def build(root: Path, ignore_files: dict[str, str], files: str) -> list[str]:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    names = files.split()
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("needle\n")
    for name, text in ignore_files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return names + [name for name in ignore_files if not name.startswith(".git/")]


def kept_by_git(root: Path, names: list[str]) -> set[str]:
    done = subprocess.run(
        ["git", "-c", "core.excludesFile=/dev/null", "check-ignore", "--stdin"],
        cwd=root,
        input="\n".join(names) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return set(names) - set(done.stdout.splitlines())


def grep_paths(text: str) -> set[str]:
    """The files named by grep's ``path:line:text`` lines."""
    return {match.group(1) for match in re.finditer(r"^(.+?):\d+:", text, re.MULTILINE)}


@pytest.fixture(params=range(len(CASES)), ids=[repr(case[0]) for case in CASES])
def case(request: pytest.FixtureRequest, workspace: Path) -> tuple[Path, set[str]]:
    ignore_files, files = CASES[request.param]
    names = build(workspace, ignore_files, files)
    return workspace, kept_by_git(workspace, names)


def test_broker_walk_and_ls_agree_with_git(case: tuple[Path, set[str]]) -> None:
    root, kept = case
    fs = WorkspaceFileSystem(root)
    assert {info.display for info in fs.walk(".")} == kept
    for folder in {name.rsplit("/", 1)[0] for name in kept if "/" in name}:
        listed = {info.display for info in fs.list_dir(folder) if info.kind == "file"}
        assert listed == {name for name in kept if name.rsplit("/", 1)[0] == folder}


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
async def test_ripgrep_walker_and_tools_agree_with_git(case: tuple[Path, set[str]], tmp_path: Path) -> None:
    root, kept = case
    fs = WorkspaceFileSystem(root)
    found, total = fs.find_files(".", "**", limit=10_000)
    assert {info.display for info in found} == kept
    assert total == len(kept)
    ctx = context(root, make_brokers(root, tmp_path / "c"))
    grep = await run_tool(GrepTool(), ctx, pattern="needle")
    assert grep.data["engine"] == "ripgrep"
    searched = {name for name in kept if not name.endswith(".gitignore")}  # the ignore files hold no needle
    assert grep_paths(grep.text) == searched
    for folder in sorted({name.split("/")[0] for name in kept if "/" in name} | {"sub", "a", "logs", "out"}):
        below = {name for name in kept if name.startswith(folder + "/")}
        searched_below = below & searched
        # the literal folder is where the walk starts; the rules above it still apply
        started = await run_tool(GlobTool(), ctx, pattern=f"{folder}/**")
        assert set(started.text.splitlines()) - {""} == below or (not below and started.text.startswith("no files"))
        scoped = await run_tool(GrepTool(), ctx, pattern="needle", path=folder)
        if (root / folder).is_dir() and kept_by_git(root, [folder]):
            assert grep_paths(scoped.text) == searched_below
        texts = await run_tool(GrepTool(), ctx, pattern="needle", glob=f"{folder}/**/*.txt")
        assert grep_paths(texts.text) == {name for name in below if name.endswith(".txt")}


async def test_glob_without_ripgrep_agrees(case: tuple[Path, set[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_glob, "ripgrep", lambda: None)
    root, kept = case
    ctx = context(root, make_brokers(root, tmp_path / "c"))
    result = await run_tool(GlobTool(), ctx, pattern="**")
    assert set(result.text.splitlines()) == kept
    listing = await run_tool(LsTool(), ctx)
    top = {line.split("  (")[0] for line in listing.text.splitlines()[1:] if "  (" in line}
    assert top == {name for name in kept if "/" not in name}
