"""Model habits with edit, write and apply_patch, through the real loop: tolerant matches that
re-indent (or refuse), typographic punctuation, and changes that break a parsable file."""

from __future__ import annotations

from pathlib import Path

from tests.tools.harness import call, run_script

NESTED = "class A:\n    def f(self):\n        if x:\n            return 1\n        return 2\n"


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


async def test_edit_quoted_with_less_indentation_is_reindented(workspace: Path) -> None:
    (workspace / "a.py").write_text(NESTED)
    edit = call("edit", path="a.py", old_string="if x:\n    return 1\n", new_string="if x:\n    log()\n    return 1\n")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error
    assert (workspace / "a.py").read_text() == (
        "class A:\n    def f(self):\n        if x:\n            log()\n            return 1\n        return 2\n"
    )
    assert result.text.startswith(
        "edited a.py: 1 replacement (old_string matched lines 3-4 only up to indentation and spacing; "
        "new_string was re-indented to the file's indentation; check the diff)"
    )


async def test_edit_with_spaces_into_a_tab_indented_file_uses_tabs(workspace: Path) -> None:
    (workspace / "t.py").write_text("def f():\n\tif a  and b:\n\t\tgo()\n")
    edit = call("edit", path="t.py", old_string="if a and b:\n    go()", new_string="if a:\n    go()\n    stop()")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error
    assert (workspace / "t.py").read_text() == "def f():\n\tif a:\n\t\tgo()\n\t\tstop()\n"


async def test_edit_two_space_quote_into_four_space_file_keeps_relative_levels(workspace: Path) -> None:
    (workspace / "b.py").write_text("def g():\n    for i in r:\n        if i:\n            yield i\n")
    edit = call(
        "edit",
        path="b.py",
        old_string="for i in r:\n  if i:\n    yield i",
        new_string="for i in r:\n  if i:\n    yield i\n  else:\n    yield -i",
    )
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "b.py").read_text() == (
        "def g():\n    for i in r:\n        if i:\n            yield i\n        else:\n            yield -i\n"
    )


async def test_edit_refuses_a_match_whose_indentation_cannot_be_mapped(workspace: Path) -> None:
    original = "def f():\n    a = 1\n        b = 2\n"
    (workspace / "c.py").write_text(original)
    edit = call("edit", path="c.py", old_string="a = 1\nb = 2", new_string="a = 3\nb = 4")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert result.is_error
    assert result.text == (
        "old_string matches line 2 only up to indentation and spacing, and was not changed: line 2 of old_string "
        "is indented not at all and the matching file line with 8 spaces, which does not fit how the other lines "
        "map. Read the file and copy the lines exactly."
    )
    assert (workspace / "c.py").read_text() == original


async def test_edit_typographic_punctuation_keeps_the_files_characters(workspace: Path) -> None:
    (workspace / "p.py").write_text("msg = \u201chello\u201d  # caf\u00e9 \u2014 done\nother = 1\n")
    edit = call(
        "edit", path="p.py", old_string='msg = "hello"  # caf\u00e9 - done', new_string='msg = "hello world"  # caf\u00e9 - done'
    )
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error
    assert (workspace / "p.py").read_text() == "msg = \u201chello world\u201d  # caf\u00e9 \u2014 done\nother = 1\n"
    assert "typographic punctuation read as ASCII" in result.text.splitlines()[0]


async def test_edit_ascii_file_matched_by_curly_quotes_and_nbsp(workspace: Path) -> None:
    (workspace / "q.txt").write_text('say "it\'s" -- ok\n')
    edit = call("edit", path="q.txt", old_string="say \u201cit\u2019s\u201d\u00a0-- ok", new_string="say \u201cit is\u201d -- ok")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "q.txt").read_text() == 'say "it is" -- ok\n'


async def test_edit_that_breaks_python_says_so_first(workspace: Path) -> None:
    (workspace / "m.py").write_text("def f():\n    return 1\n")
    edit = call("edit", path="m.py", old_string="return 1", new_string="return (1")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert result.text.splitlines()[0] == (
        "WARNING: m.py is no longer valid Python after this change ('(' was never closed at line 2, column 12). "
        "The change was written; fix the file."
    )
    assert result.text.splitlines()[1] == "edited m.py: 1 replacement"
    assert result.data["invalid_after"] is True


async def test_write_and_patch_that_break_json_toml_yaml_say_so_first(workspace: Path) -> None:
    (workspace / "c.json").write_text('{"a": 1}\n')
    (workspace / "p.toml").write_text('[tool]\nname = "x"\n')
    (workspace / "w.yaml").write_text("a: 1\nb: [1, 2]\n")
    (workspace / "ok.py").write_text("x = 1\n")
    steps = [
        {"tool_calls": [call("read", path="c.json"), call("read", path="w.yaml")]},
        {"tool_calls": [call("write", path="c.json", content='{"a": 1,}\n')]},
        {"tool_calls": [call("apply_patch", patch=patch("*** Update File: p.toml", " [tool]", '-name = "x"', "+name = x"))]},
        {"tool_calls": [call("write", path="w.yaml", content="a: 1\nb: [1, 2\n")]},
        {"tool_calls": [call("apply_patch", patch=patch("*** Update File: ok.py", "-x = 1", "+x = 2"))]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    _reads = results[:2]
    json_write, toml_patch, yaml_write, fine = results[2:]
    first = json_write.text.splitlines()[0]
    assert first.startswith("WARNING: c.json is no longer valid JSON after this change (")  # the message is Python's
    assert " at line 1, column " in first
    assert first.endswith("). The change was written; fix the file.")
    assert toml_patch.text.startswith("WARNING: p.toml is no longer valid TOML after this change (")
    assert toml_patch.text.splitlines()[1] == "applied the patch:"
    assert yaml_write.text.startswith("WARNING: w.yaml is no longer valid YAML after this change (")
    assert not fine.text.startswith("WARNING")
    assert (workspace / "c.json").read_text() == '{"a": 1,}\n'  # written all the same


async def test_already_invalid_or_new_files_get_no_warning(workspace: Path) -> None:
    (workspace / "bad.py").write_text("def f(:\n    pass\n")
    steps = [
        {"tool_calls": [call("edit", path="bad.py", old_string="pass", new_string="return")]},
        {"tool_calls": [call("write", path="new.py", content="def g(:\n")]},
        {"text": "ok"},
    ]
    _rt, [edit, write] = await run_script(workspace, steps)
    assert edit.text.startswith("edited bad.py")
    assert write.text.startswith("created new.py")


async def test_patch_quoted_with_other_indentation_reindents_added_lines(workspace: Path) -> None:
    (workspace / "a.py").write_text(NESTED)
    text = patch("*** Update File: a.py", " if x:", "-    return 1", "+    log()", "+    return 1")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=text)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "a.py").read_text() == (
        "class A:\n    def f(self):\n        if x:\n            log()\n            return 1\n        return 2\n"
    )


async def test_patch_with_typographic_quotes_keeps_file_context(workspace: Path) -> None:
    (workspace / "d.md").write_text("Title \u2014 \u201cquoted\u201d\nold line\n")
    text = patch("*** Update File: d.md", ' Title - "quoted"', "-old line", "+new line")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=text)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "d.md").read_text() == "Title \u2014 \u201cquoted\u201d\nnew line\n"


async def test_edit_with_line_numbers_copied_from_read(workspace: Path) -> None:
    (workspace / "n.py").write_text("def f():\n    return 1\n")
    edit = call("edit", path="n.py", old_string="     2\t    return 1", new_string="     2\t    return 2")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [edit]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "n.py").read_text() == "def f():\n    return 2\n"
    assert result.text.startswith(
        "edited n.py: 1 replacement (the line numbers copied from read's output were left out; check the diff)"
    )


async def test_patch_hunk_headers_with_unified_diff_ranges(workspace: Path) -> None:
    (workspace / "u.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    text = patch("*** Update File: u.py", "@@ -5,2 +5,2 @@ def g():", "-    return 1", "+    return 2")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=text)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "u.py").read_text() == "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
