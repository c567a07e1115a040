"""``glob``, ``grep`` and ``ls`` against the pattern forms models write, through the real loop:
``./`` prefixes, absolute and ``~`` paths inside the workspace, ``**`` forms, brace expansions,
hidden files, case, regular expressions that are invalid or catastrophic (with and without
ripgrep), and results beyond the limit (said, with how many more). The ignore rules themselves
are checked against ``git check-ignore`` in ``tests/brokers/test_ignore_rules_vs_git.py``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tools.harness import call, run_script, write_files

TREE = {
    "src/a.py": "def Foo():\n    return 'needle'\n",
    "src/b.ts": "const needle = 1\n",
    "src/c.tsx": "needle()\n",
    "src/deep/d.py": "needle = 2\n",
    "test/t.py": "assert needle\n",
    ".github/workflows/ci.yml": "needle: 1\n",
    ".env.example": "NEEDLE=1\n",
    "build/out.py": "needle\n",
    ".gitignore": "build/\n",
}
NO_RIPGREP = {"PATH": "/nonexistent"}


@pytest.fixture
def tree(workspace: Path) -> Path:
    return write_files(workspace, TREE)


async def _one(workspace: Path, name: str, env: dict[str, str] | None = None, **arguments: object) -> tuple[bool, str]:
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call(name, **arguments)]}, {"text": "ok"}], env=env)
    return result.is_error, result.text


@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("./src/*.py", {"src/a.py"}),
        ("src/*.{ts,tsx}", {"src/b.ts", "src/c.tsx"}),
        ("*.{ts,tsx}", {"src/b.ts", "src/c.tsx"}),
        ("{src,test}/**/*.py", {"src/a.py", "src/deep/d.py", "test/t.py"}),
        ("src/{a,deep/d}.py", {"src/a.py", "src/deep/d.py"}),
        ("**/*.py", {"src/a.py", "src/deep/d.py", "test/t.py"}),
        ("**/d.py", {"src/deep/d.py"}),
        ("src/**", {"src/a.py", "src/b.ts", "src/c.tsx", "src/deep/d.py"}),
        ("src/**/*.py", {"src/a.py", "src/deep/d.py"}),
        ("*.yml", {".github/workflows/ci.yml"}),
        (".*", {".env.example", ".gitignore"}),
        ("src/[ab].*", {"src/a.py", "src/b.ts"}),
        ("!**/*.{py,ts,tsx}", {".github/workflows/ci.yml", ".env.example", ".gitignore"}),
        ("SRC/*.py", set()),
        ("build/*.py", set()),
    ],
    ids=[
        "dot-slash",
        "braces-in-folder",
        "braces-any-depth",
        "braces-of-folders",
        "braces-with-slash",
        "double-star",
        "double-star-name",
        "folder-double-star",
        "anchored-double-star",
        "hidden-folder",
        "hidden-files",
        "character-class",
        "negated",
        "case-sensitive",
        "ignored-folder",
    ],
)
async def test_glob_forms_find_what_a_shell_would(tree: Path, pattern: str, found: set[str]) -> None:
    error, text = await _one(tree, "glob", pattern=pattern)
    assert not error, text
    listed = set() if text.startswith("no files match") else set(text.splitlines())
    assert listed == found


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_glob_braces_agree_with_ripgreps_own_globs(tree: Path, engine: str) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    done = subprocess.run(["rg", "--files", "--glob", "*.{ts,tsx}"], cwd=tree, capture_output=True, text=True, check=True)
    error, text = await _one(tree, "glob", env=None if engine == "ripgrep" else NO_RIPGREP, pattern="*.{ts,tsx}")
    assert not error, text
    assert set(text.splitlines()) == set(done.stdout.split())


async def test_glob_with_an_absolute_or_tilde_pattern_inside_the_workspace(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tree.parent))
    for pattern in (f"{tree}/src/*.py", "~/ws/src/*.{py,ts}"):
        error, text = await _one(tree, "glob", pattern=pattern)
        assert not error, text
        assert set(text.splitlines()) <= {"src/a.py", "src/b.ts"} and "src/a.py" in text
    error, text = await _one(tree, "glob", pattern="/etc/*.conf")
    assert error
    assert text.startswith("refused: /etc: outside the workspace")


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
@pytest.mark.parametrize(
    ("arguments", "files"),
    [
        ({"pattern": "needle", "glob": "*.{ts,tsx}"}, {"src/b.ts", "src/c.tsx"}),
        ({"pattern": "needle", "path": "./src", "glob": "**/*.py"}, {"src/a.py", "src/deep/d.py"}),
        (
            {"pattern": "NEEDLE", "case_insensitive": "true", "glob": "{test,.github}/**"},
            {"test/t.py", ".github/workflows/ci.yml"},
        ),
        ({"pattern": "needle", "glob": "!*.py"}, {"src/b.ts", "src/c.tsx", ".github/workflows/ci.yml"}),
        ({"pattern": "needle", "path": "src", "glob": "!deep/**"}, {"src/a.py", "src/b.ts", "src/c.tsx"}),
        ({"pattern": "NEEDLE"}, {".env.example"}),
        ({"pattern": "needle", "path": ".github"}, {".github/workflows/ci.yml"}),
        ({"pattern": "needle", "path": "build"}, {"build/out.py"}),
    ],
    ids=[
        "braces",
        "dot-slash-path",
        "case-insensitive-as-string",
        "negated-glob",
        "negated-folder-glob",
        "case-sensitive",
        "hidden-folder",
        "ignored-folder-named",
    ],
)
async def test_grep_forms(tree: Path, engine: str, arguments: dict[str, object], files: set[str]) -> None:
    error, text = await _one(tree, "grep", env=None if engine == "ripgrep" else NO_RIPGREP, **arguments)
    assert not error, text
    assert {line.split(":", 1)[0] for line in text.splitlines() if line} == files


@pytest.mark.parametrize("pattern", ["(a+)+$", "(\\w+\\s?)+$", "(a|aa)+$", "(x+x+)+y", "(a*,a*)*$", "(,a+a?)*$"])
async def test_a_catastrophic_regex_never_hangs_the_session(workspace: Path, pattern: str) -> None:
    """ripgrep's engine is linear; without it, Python's backtracking engine would spin for
    ages on the event loop, so such a pattern is refused there, saying how to write it."""
    (workspace / "a.txt").write_text("a" * 64 + "!\n" + "x" * 64 + "\n")
    error, text = await _one(workspace, "grep", pattern=pattern)
    assert not error, text
    error, text = await _one(workspace, "grep", env=NO_RIPGREP, pattern=pattern)
    assert error
    assert text.startswith(f"the pattern {pattern!r} can take exponential time without ripgrep (not available here), as it ")
    assert "\n" not in text


@pytest.mark.parametrize(
    "pattern",
    [
        "(foo|bar)+",
        "def\\s+\\w+",
        "(ab|cd)*x",
        "[a-z]+_[0-9]+",
        "(?:\\d{1,3}\\.){3}\\d{1,3}",
        "(\\w+)(\\.\\w+)+",
        "(\\d+,)+\\d+",
        "(/[^/]+)+\\.py",
        "(?:\\w+::)+\\w+",
    ],
)
async def test_ordinary_regexes_still_run_without_ripgrep(workspace: Path, pattern: str) -> None:
    """Nested repeats fenced by a literal (a dotted name, a list, a path) are linear: not refused."""
    (workspace / "a.txt").write_text("foobar def go abcdx name_12 10.0.0.1 os.path 1,2,3 /src/x.py std::vec\n")
    error, text = await _one(workspace, "grep", env=NO_RIPGREP, pattern=pattern)
    assert not error, text
    assert text.startswith("a.txt:1:"), text


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_results_beyond_the_limit_say_how_many_more(workspace: Path, engine: str) -> None:
    for n in range(260):
        (workspace / f"f{n:03}.txt").write_text("hit\nhit\n")
    env = None if engine == "ripgrep" else NO_RIPGREP
    error, text = await _one(workspace, "grep", env=env, pattern="hit")
    assert not error
    assert text.endswith(
        "[320 more matching lines not shown (lines 1-200 of 520 shown); to see them call grep again with offset=200, "
        "or narrow the pattern, path or glob]"
    ), text[-300:]
    for n in range(260, 620):
        (workspace / f"f{n:03}.txt").write_text("x\n")
    error, text = await _one(workspace, "glob", env=env, pattern="*.txt")
    assert not error
    assert len(text.split("\n\n")[0].splitlines()) == 500
    assert text.endswith("[120 more files not shown; narrow the pattern]")
    error, text = await _one(workspace, "ls", env=env)
    assert text.endswith("[120 more entries not shown; use glob to narrow down]")


@pytest.mark.parametrize(
    ("arguments", "head", "found"),
    [
        ({"pattern": "src/deep"}, "('src/deep' names a folder, not files; the files in it ('src/deep/**'):)", {"src/deep/d.py"}),
        (
            {"pattern": "deep/", "path": "src"},
            "('deep/' names a folder, not files; the files in it ('deep/**'):)",
            {"src/deep/d.py"},
        ),
        ({"pattern": "./test"}, "('./test' names a folder, not files; the files in it ('test/**'):)", {"test/t.py"}),
        ({"pattern": ".", "path": "test"}, "('.' names a folder, not files; the files in it ('**'):)", {"test/t.py"}),
    ],
    ids=["folder", "folder-slash-under-path", "dot-slash-folder", "dot"],
)
async def test_glob_of_a_folder_name_lists_the_files_in_it_saying_so(
    tree: Path, arguments: dict[str, object], head: str, found: set[str]
) -> None:
    error, text = await _one(tree, "glob", **arguments)
    assert not error, text
    first, *files = text.splitlines()
    assert (first, set(files)) == (head, found)


async def test_glob_of_a_file_or_a_missing_name_is_not_read_as_a_folder(tree: Path) -> None:
    error, text = await _one(tree, "glob", pattern="nope")
    assert (error, text) == (False, "no files match 'nope' in .")
    error, text = await _one(tree, "glob", pattern="src/a.py")
    assert (error, text) == (False, "src/a.py")
