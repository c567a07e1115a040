"""bash, grep (ripgrep and the Python fallback), glob, ls and web_fetch."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from roder_ext_builtin_coding_tools.bash import BashTool
from roder_ext_builtin_coding_tools.html_text import html_to_text
from roder_ext_builtin_coding_tools.search import GlobTool, GrepTool, LsTool
from roder_ext_builtin_coding_tools.web import WebFetchTool

from tests.brokers.helpers import QuietHandler, serve
from tests.tools.harness import context, make_brokers, run_tool

# ---------------------------------------------------------------------------- bash


async def test_bash_reports_exit_code_duration_and_view(workspace: Path, tmp_path: Path) -> None:
    live: list[str] = []
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"), output=live)
    result = await run_tool(BashTool(), ctx, command="echo hello; echo oops >&2; exit 2")
    assert result.is_error
    assert "hello" in result.text
    assert "oops" in result.text
    assert "[exit code 2 ·" in result.text
    assert result.data["exit_code"] == 2
    view = result.views[0]
    assert view.command.startswith("echo hello")
    assert view.exit_code == 2
    assert view.status == "failed"
    assert "hello" in "".join(live)


async def test_bash_timeout_in_seconds(workspace: Path, tmp_path: Path) -> None:
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"))
    result = await run_tool(BashTool(), ctx, command="sleep 30", timeout=1)  # read as minutes, the sleep would finish
    assert result.is_error
    assert result.data["timed_out"]
    assert "timed out after" in result.text


async def test_bash_workdir_and_escape(workspace: Path, tmp_path: Path) -> None:
    (workspace / "sub").mkdir()
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"))
    inside = await run_tool(BashTool(), ctx, command="pwd", workdir="sub")
    assert inside.text.startswith(str((workspace / "sub").resolve()))
    outside = await run_tool(BashTool(), ctx, command="pwd", workdir="..")
    assert outside.is_error
    assert outside.text.startswith("refused:")


async def test_bash_spills_long_output_and_says_where(workspace: Path, tmp_path: Path) -> None:
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"))
    result = await run_tool(BashTool(), ctx, command="seq 1 50000")
    path = result.data["full_output_path"]
    assert result.data["truncated"]
    assert path
    assert path in result.text
    assert Path(path).read_text().count("\n") == 50000


async def test_bash_respects_the_turn_deadline(workspace: Path, tmp_path: Path) -> None:
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c"), deadline=time.time() + 2.5)
    result = await run_tool(BashTool(), ctx, command="sleep 30", timeout=60)
    assert result.data["timed_out"]  # only the deadline (2.5 s away) could stop a 30 s sleep given 60 s
    late = context(workspace, make_brokers(workspace, tmp_path / "c"), deadline=time.time() - 1)
    assert "time budget" in (await run_tool(BashTool(), late, command="echo hi")).text


def test_bash_policy_subjects_split_commands_and_redirects(workspace: Path) -> None:
    subjects = BashTool().policy_subjects({"command": "git status && echo x > out.txt | tee log", "workdir": "sub"}, workspace)
    assert [(s.kind, s.value) for s in subjects] == [
        ("command", "git status"),
        ("command", "echo x"),
        ("command", "tee log"),
        ("path", "sub/out.txt"),
    ]


# ---------------------------------------------------------------------------- grep, glob, ls


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / ".gitignore").write_text("dist/\n")
    (workspace / "dist").mkdir()
    (workspace / "dist" / "bundle.js").write_text("needle in build output\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return 'Needle'\n")
    (workspace / "src" / "util.py").write_text("needle = 1\n")
    (workspace / "README.md").write_text("no match here\n")
    (workspace / ".hidden.cfg").write_text("needle hidden\n")
    return workspace


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep_engines_agree(tree: Path, tmp_path: Path, engine: str) -> None:
    if engine == "ripgrep" and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    env = None if engine == "ripgrep" else {"PATH": "/nonexistent"}
    ctx = context(tree, make_brokers(tree, tmp_path / "c", env=env))
    result = await run_tool(GrepTool(), ctx, pattern="needle")
    assert result.data["engine"] == engine
    assert sorted(result.text.splitlines()) == [".hidden.cfg:1:needle hidden", "src/util.py:1:needle = 1"]
    insensitive = await run_tool(GrepTool(), ctx, pattern="needle", case_insensitive=True, glob="*.py")
    assert sorted(insensitive.text.splitlines()) == ["src/app.py:2:    return 'Needle'", "src/util.py:1:needle = 1"]
    scoped = await run_tool(GrepTool(), ctx, pattern="needle", path="src")
    assert scoped.text.splitlines() == ["src/util.py:1:needle = 1"]
    none = await run_tool(GrepTool(), ctx, pattern="absent_word")
    assert none.text.startswith("no matches")


async def test_grep_caps_results(workspace: Path, tmp_path: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * 500)
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c", env={"PATH": "/nonexistent"}))
    result = await run_tool(GrepTool(), ctx, pattern="hit")
    assert len([x for x in result.text.splitlines() if x.startswith("many.txt:")]) == 200
    assert "more matching lines not shown" in result.text


async def test_grep_bad_regex_is_searched_as_text_saying_so(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("call(unclosed\n")
    ctx = context(workspace, make_brokers(workspace, tmp_path / "c", env={"PATH": "/nonexistent"}))
    result = await run_tool(GrepTool(), ctx, pattern="(unclosed")
    assert not result.is_error
    assert result.text.startswith("'(unclosed' is not a valid regular expression (missing ), unterminated subpattern")
    assert result.text.endswith("); searched for it as literal text:\na.txt:1:call(unclosed")


async def test_glob_patterns_newest_first(tree: Path, tmp_path: Path) -> None:
    ctx = context(tree, make_brokers(tree, tmp_path / "c"))
    result = await run_tool(GlobTool(), ctx, pattern="*.py")
    assert sorted(result.text.splitlines()) == ["src/app.py", "src/util.py"]
    anchored = await run_tool(GlobTool(), ctx, pattern="src/**/*.py")
    assert sorted(anchored.text.splitlines()) == ["src/app.py", "src/util.py"]
    assert "bundle.js" not in (await run_tool(GlobTool(), ctx, pattern="**/*.js")).text
    in_src = await run_tool(GlobTool(), ctx, pattern="app.*", path="src")
    assert in_src.text == "src/app.py"


async def test_ls_lists_folders_first_and_hides_ignored(tree: Path, tmp_path: Path) -> None:
    ctx = context(tree, make_brokers(tree, tmp_path / "c"))
    result = await run_tool(LsTool(), ctx)
    lines = result.text.splitlines()
    assert lines[0] == ".:"
    assert lines[1] == "src/"
    assert any(line.startswith("README.md  (") for line in lines)
    assert "dist/" not in result.text
    refused = await run_tool(LsTool(), ctx, path="/etc")
    assert refused.is_error
    assert "outside the workspace" in refused.text


# ---------------------------------------------------------------------------- web_fetch


PAGE = (
    b"<html><head><title>Docs</title><style>p{}</style><script>alert(1)</script></head><body>"
    b"<h1>Install</h1><p>Run <code>pip install roder</code> then read the "
    b"<a href='/guide'>guide</a>.</p><ul><li>one</li><li>two</li></ul><pre>x = 1\n  y = 2</pre></body></html>"
)


class _Site(QuietHandler):
    def do_GET(self) -> None:
        self.reply(*((PAGE, "text/html") if self.path != "/image" else (b"\x89PNG....", "image/png")))


@pytest.fixture
def site() -> Iterator[str]:
    with serve(_Site) as port:
        yield f"http://127.0.0.1:{port}"


def test_html_to_text() -> None:
    text = html_to_text(PAGE.decode(), "http://h/")
    assert text.startswith("# Docs")
    assert "# Install" in text
    assert "alert" not in text
    assert "p{}" not in text
    assert "guide (http://h/guide)" in text
    assert "- one\n- two" in text
    assert "```\nx = 1\n  y = 2\n```" in text


async def test_web_fetch_allowed_and_refused(workspace: Path, tmp_path: Path, site: str) -> None:
    allowed = context(workspace, make_brokers(workspace, tmp_path / "c", allow=["127.0.0.1"]))
    page = await run_tool(WebFetchTool(), allowed, url=f"{site}/docs")
    assert not page.is_error
    assert "(HTTP 200)" in page.text
    assert "pip install roder" in page.text
    image = await run_tool(WebFetchTool(), allowed, url=f"{site}/image")
    assert image.is_error
    assert "image/png" in image.text
    closed = context(workspace, make_brokers(workspace, tmp_path / "c", allow=[]))
    refused = await run_tool(WebFetchTool(), closed, url=f"{site}/docs")
    assert refused.is_error
    assert refused.text.startswith("refused:")
    assert "[network] allow" in refused.text
    no_cap = context(
        workspace, make_brokers(workspace, tmp_path / "c", allow=["*"], capabilities=frozenset({"fs.read.workspace"}))
    )
    assert "network.web" in (await run_tool(WebFetchTool(), no_cap, url=f"{site}/docs")).text
    bad = await run_tool(WebFetchTool(), allowed, url="docs.python.org")
    assert bad.is_error
    assert "include http" in bad.text
