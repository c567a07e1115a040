"""More model habits through the real loop, each answered right or with a plain reason: a
Codex-style patch with a wrong context line, ``edit`` with CRLF against LF (and back), line
numbers in another agent's ``12→`` form, paths written ``./x``, absolute inside the workspace or
with ``~``, ``read`` past the end, and ``grep`` patterns meant as literal text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.harness import call, run_script

SOURCE = "def f():\n    x = 1\n    y = 2\n    return x + y\n"
SEARCHED = "x = foo(bar)\ny = a.b[0]\nz = $HOME\nw = a+b\n"


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


async def test_a_patch_with_a_wrong_context_line_names_it_and_the_closest(workspace: Path) -> None:
    (workspace / "a.py").write_text(SOURCE)
    wrong = patch("*** Update File: a.py", "@@ def f():", "     x = 1", "-    y = 3", "+    y = 5", "     return x + y")
    reordered = patch("*** Update File: a.py", "@@", "     y = 2", "-    x = 1", "+    x = 5")
    _rt, [first, second] = await run_script(
        workspace,
        [
            {"tool_calls": [call("apply_patch", patch=wrong)]},
            {"tool_calls": [call("apply_patch", patch=reordered)]},
            {"text": "ok"},
        ],
    )
    assert first.is_error
    assert first.text == (
        "a.py, hunk 1: these lines were not found (read the file again):\n    x = 1\n    y = 3\n    return x + y\n"
        "The line 'y = 3' is not in the file. The closest line is 3: 'y = 2'; read the file to copy the text exactly."
    )
    assert second.is_error
    assert second.text.endswith("Each of these lines is in the file, but not together in this order.")
    assert (workspace / "a.py").read_text() == SOURCE


async def test_edit_with_crlf_against_lf_and_lf_against_crlf_keeps_the_files_endings(workspace: Path) -> None:
    (workspace / "lf.py").write_bytes(SOURCE.encode())
    (workspace / "crlf.py").write_bytes(SOURCE.replace("\n", "\r\n").encode())
    steps = [
        {
            "tool_calls": [
                call("edit", path="lf.py", old_string="    x = 1\r\n    y = 2\r\n", new_string="    x = 1\r\n    y = 9\r\n")
            ]
        },
        {"tool_calls": [call("edit", path="crlf.py", old_string="    x = 1\n    y = 2\n", new_string="    x = 1\n    y = 9\n")]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False, False]
    assert (workspace / "lf.py").read_bytes() == SOURCE.replace("y = 2", "y = 9").encode()
    assert (workspace / "crlf.py").read_bytes() == SOURCE.replace("y = 2", "y = 9").replace("\n", "\r\n").encode()


async def test_edit_leaves_out_line_numbers_in_the_arrow_form(workspace: Path) -> None:
    (workspace / "a.py").write_text(SOURCE)
    edit = call(
        "edit", path="a.py", old_string="     2→    x = 1\n     3→    y = 2", new_string="     2→    x = 1\n     3→    y = 7"
    )
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert result.text.startswith(
        "edited a.py: 1 replacement (the line numbers copied from read's output were left out; check the diff)"
    )
    assert (workspace / "a.py").read_text() == SOURCE.replace("y = 2", "y = 7")


async def test_paths_with_dot_slash_absolute_inside_and_tilde(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(workspace.parent))  # the workspace is ~/ws
    (workspace / "sub").mkdir()
    (workspace / "sub" / "b.txt").write_text("hi\n")
    steps = [
        {"tool_calls": [call("read", path="./sub/b.txt")]},
        {"tool_calls": [call("edit", path=str(workspace / "sub" / "b.txt"), old_string="hi", new_string="ho")]},
        {"tool_calls": [call("write", path="./sub/c.txt", content="c\n")]},
        {"tool_calls": [call("edit", path="~/ws/sub/c.txt", old_string="c", new_string="d")]},
        {"tool_calls": [call("read", path="~/b.txt")]},
        {"text": "ok"},
    ]
    _rt, [read, edit, write, tilde, home] = await run_script(workspace, steps)
    assert read.text == "     1\thi"
    assert edit.text.startswith("edited sub/b.txt: 1 replacement")
    assert write.text == "created sub/c.txt (1 lines, 2 bytes)"
    assert tilde.text.startswith("edited sub/c.txt: 1 replacement")
    assert home.is_error
    assert home.text == f"refused: ~/b.txt: outside the workspace {workspace}; Roder's file tools only reach the workspace"
    assert (workspace / "sub" / "b.txt").read_text() == "ho\n"
    assert (workspace / "sub" / "c.txt").read_text() == "d\n"


async def test_read_past_the_end_or_from_zero_says_so(workspace: Path) -> None:
    (workspace / "a.py").write_text(SOURCE)
    steps = [
        {"tool_calls": [call("read", path="a.py", offset=100)]},
        {"tool_calls": [call("read", path="a.py", offset=0)]},
        {"text": "ok"},
    ]
    _rt, [past, zero] = await run_script(workspace, steps)
    assert past.is_error
    assert past.text == "offset 100 is past the end of a.py (4 lines)"
    assert zero.is_error
    assert zero.text == "invalid arguments for read: offset: input should be greater than or equal to 1 (got 0)"


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep_patterns_meant_as_text_are_searched_as_text_and_it_says_so(workspace: Path, engine: str) -> None:
    (workspace / "a.py").write_text(SEARCHED)
    patterns = ["foo(bar)", "a.b[0]", "$HOME", "a+b", "foo(", "nothing(here"]
    steps = [{"tool_calls": [call("grep", pattern=p)]} for p in patterns] + [{"text": "ok"}]
    # without ripgrep on PATH, grep's Python search answers
    _rt, results = await run_script(workspace, steps, env=None if engine == "ripgrep" else {"PATH": "/nonexistent"})
    texts = [r.text for r in results]
    assert texts[:4] == [
        f"no matches for the regular expression {p!r}; as literal text it matches:\na.py:{n}:{line}"
        for n, (p, line) in enumerate(zip(patterns[:4], SEARCHED.splitlines(), strict=True), start=1)
    ]
    assert texts[4].startswith("'foo(' is not a valid regular expression (")
    assert texts[4].endswith("); searched for it as literal text:\na.py:1:x = foo(bar)")
    assert "unclosed" in texts[4] or "missing )" in texts[4]
    assert texts[5].endswith("searched for it as literal text:\nno matches for 'nothing(here' in .")
    assert all(r.data["engine"] == engine for r in results)
    assert [r.data["literal"] for r in results] == [True] * 6
    assert not any(r.is_error for r in results)


async def test_grep_regular_expressions_that_match_stay_regular_expressions(workspace: Path) -> None:
    (workspace / "a.py").write_text(SEARCHED)
    steps = [{"tool_calls": [call("grep", pattern=p)]} for p in (r"foo\(bar\)", "a.b", "q{5}")] + [{"text": "ok"}]
    _rt, [escaped, regex, none] = await run_script(workspace, steps)
    assert escaped.text == "a.py:1:x = foo(bar)"
    assert regex.text == "a.py:2:y = a.b[0]\na.py:4:w = a+b"
    assert none.text == "no matches for 'q{5}' in ."
    assert [r.data["literal"] for r in (escaped, regex, none)] == [False, False, False]


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep_with_a_line_break_says_it_matches_line_by_line(workspace: Path, engine: str) -> None:
    (workspace / "a.py").write_text(SOURCE)
    patterns = ["x = 1\n    y = 2", "x = 1\\n", r"x[^\n]*1"]
    steps = [{"tool_calls": [call("grep", pattern=p)]} for p in patterns] + [{"text": "ok"}]
    _rt, [real, escaped, in_class] = await run_script(
        workspace, steps, env=None if engine == "ripgrep" else {"PATH": "/nonexistent"}
    )
    for result in (real, escaped):
        assert result.is_error
        assert result.text == (
            "grep matches one line at a time, so a pattern with a line break (\\n) never matches; search for one "
            "line of it ('x = 1') and read the lines around the match"
        )
    assert in_class.text == "a.py:2:    x = 1", "a class excluding line breaks matches within a line"


async def test_a_patch_in_a_markdown_fence_or_as_a_unified_diff_applies(workspace: Path) -> None:
    (workspace / "a.py").write_text(SOURCE)
    (workspace / "q.sql").write_text("select 1;\n-- old note\nselect 2;\n")
    (workspace / "gone.txt").write_text("bye\n")
    (workspace / "old.txt").write_text("keep\n")
    fenced = "```diff\n" + patch("*** Update File: a.py", "@@", "-    x = 1", "+    x = 5") + "\n```"
    git_diff = "\n".join(
        [
            "diff --git a/a.py b/a.py",
            "index 1111111..2222222 100644",
            "--- a/a.py",
            "+++ b/a.py",
            "@@ -2,3 +2,3 @@ def f():",
            "     x = 5",
            "-    y = 2",
            "+    y = 6",
            "     return x + y",
            "--- q.sql\t2026-11-27 10:00:00",
            "+++ q.sql\t2026-11-27 10:01:00",
            "@@ -1,3 +1,3 @@",
            " select 1;",
            "--- old note",
            "+-- new note",
            " select 2;",
            "--- /dev/null",
            "+++ b/new.txt",
            "@@ -0,0 +1,2 @@",
            "+hello",
            "+world",
            "\\ No newline at end of file",
            "--- a/gone.txt",
            "+++ /dev/null",
            "@@ -1 +0,0 @@",
            "-bye",
            "diff --git a/old.txt b/moved.txt",
            "similarity index 100%",
            "--- a/old.txt",
            "+++ b/moved.txt",
            "@@ -1 +1 @@",
            "-keep",
            "+kept",
        ]
    )
    steps = [
        {"tool_calls": [call("apply_patch", patch=fenced)]},
        {"tool_calls": [call("apply_patch", patch=git_diff)]},
        {"text": "ok"},
    ]
    _rt, [first, second] = await run_script(workspace, steps)
    assert not first.is_error, first.text
    assert not second.is_error, second.text
    assert second.text.startswith("applied the patch:\nM a.py\nM q.sql\nA new.txt\nD gone.txt\nR old.txt -> moved.txt\n")
    assert (workspace / "a.py").read_text() == SOURCE.replace("x = 1", "x = 5").replace("y = 2", "y = 6")
    assert (workspace / "q.sql").read_text() == "select 1;\n-- new note\nselect 2;\n"
    assert (workspace / "new.txt").read_text() == "hello\nworld"  # as its "\\ No newline at end of file" says
    assert not (workspace / "gone.txt").exists()
    assert not (workspace / "old.txt").exists()
    assert (workspace / "moved.txt").read_text() == "kept\n"


async def test_a_unified_diff_asks_approval_for_the_files_it_names(workspace: Path) -> None:
    from roder_ext_builtin_coding_tools.patch import ApplyPatchTool

    diff = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    subjects = ApplyPatchTool().policy_subjects({"patch": diff}, workspace)
    assert [(s.value, s.writes) for s in subjects] == [("src/a.py", True)]
    assert ApplyPatchTool().mutated_paths({"patch": "```\n" + diff + "```"}, workspace) == [str(workspace / "src" / "a.py")]


async def test_glob_and_grep_take_absolute_globs_and_a_glob_given_as_path(workspace: Path) -> None:
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / "a.py").write_text("x = 1\n")
    (workspace / "src" / "deep" / "b.py").write_text("x = 2\n")
    steps = [
        {"tool_calls": [call("glob", pattern=f"{workspace}/src/*.py")]},
        {"tool_calls": [call("glob", pattern="/etc/*.conf")]},
        {"tool_calls": [call("grep", pattern="x", path="src/*.py")]},
        {"tool_calls": [call("grep", pattern="x", glob=f"{workspace}/src/**/*.py")]},
        {"tool_calls": [call("grep", pattern="x", path="nope")]},
        {"text": "ok"},
    ]
    _rt, [absolute, outside, as_path, absolute_glob, missing] = await run_script(workspace, steps)
    assert absolute.text == "src/a.py"
    assert outside.is_error
    assert outside.text == f"refused: /etc: outside the workspace {workspace}; Roder's file tools only reach the workspace"
    assert as_path.text == "(path 'src/*.py' is a glob: searched the files matching 'src/*.py')\nsrc/a.py:1:x = 1"
    assert absolute_glob.text == "src/a.py:1:x = 1\nsrc/deep/b.py:1:x = 2"
    assert missing.is_error
    assert missing.text == "nope: no such file or folder"


async def test_a_location_after_a_path_a_missing_folder_and_a_folder_to_write(workspace: Path) -> None:
    (workspace / "a.py").write_text("".join(f"line {n}\n" for n in range(1, 30)))
    steps = [
        {"tool_calls": [call("read", path="a.py:12")]},
        {"tool_calls": [call("read", path="a.py#L10-L12")]},
        {"tool_calls": [call("ls", path="nope")]},
        {"tool_calls": [call("write", path="sub/", content="x")]},
        {"text": "ok"},
    ]
    _rt, [colon, anchor, folder, write] = await run_script(workspace, steps)
    assert colon.text == "a.py:12: no such file; to read a.py from line 12, send path='a.py' and offset=12"
    assert anchor.text == "a.py#L10-L12: no such file; to read a.py from line 10, send path='a.py' and offset=10"
    assert folder.text == "nope: no such folder"
    assert write.text == "sub/ names a folder (it ends with '/'); give the path of the file to write"
    assert all(r.is_error for r in (colon, anchor, folder, write))
    assert not (workspace / "sub").exists()
