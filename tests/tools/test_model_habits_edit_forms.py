"""``edit`` against many forms of one habit each, through the real loop: every call either
changes exactly what was meant (keeping the file's BOM, line endings, encoding and untouched
characters) or fails with one plain sentence and leaves the file as it was."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import call, run_script

PY = "def f(a):\n    if a:\n        return 1\n    return 2\n"
TABS = PY.replace("        ", "\t\t").replace("    ", "\t")
CAFE = "name = 'caf\u00e9'  # r\u00e9sum\u00e9\n"


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


async def _edit(workspace: Path, name: str, data: bytes, **arguments: Any) -> tuple[bool, str, bytes]:
    (workspace / name).write_bytes(data)
    step = {"tool_calls": [call("edit", path=name, **arguments)]}
    _rt, [result] = await run_script(workspace, [step, {"text": "ok"}])
    return result.is_error, result.text, (workspace / name).read_bytes()


# (file bytes, old_string, new_string, file bytes after)
APPLIES: dict[str, tuple[bytes, str, str, bytes]] = {
    "indent-off-by-2": (
        PY.encode(),
        "  if a:\n      return 1",
        "  if a:\n      return 3",
        PY.replace("return 1", "return 3").encode(),
    ),
    "indent-off-by-4-deeper": (
        PY.encode(),
        "        if a:\n            return 1",
        "        if a:\n            return 3\n        print(a)",
        PY.replace("        return 1\n", "        return 3\n    print(a)\n").encode(),
    ),
    "spaces-for-tabs": (
        TABS.encode(),
        "    if a:\n        return 1",
        "    if a:\n        log(a)\n        return 1",
        TABS.replace("\t\treturn 1", "\t\tlog(a)\n\t\treturn 1").encode(),
    ),
    "tabs-for-spaces": (
        PY.encode(),
        "\tif a:\n\t\treturn 1",
        "\tif a:\n\t\treturn 5",
        PY.replace("return 1", "return 5").encode(),
    ),
    "trailing-whitespace-in-file": (b"x = 1   \ny = 2\t\n", "x = 1\ny = 2", "x = 5\ny = 2", b"x = 5\ny = 2\t\n"),
    "trailing-whitespace-in-old": (b"x = 1\ny = 2\n", "x = 1  \ny = 2 ", "x = 5\ny = 2", b"x = 5\ny = 2\n"),
    "crlf-file-lf-edit": (b"a = 1\r\nb = 2\r\n", "a = 1\nb = 2\n", "a = 1\nb = 3\n", b"a = 1\r\nb = 3\r\n"),
    "lf-file-crlf-edit": (b"a = 1\nb = 2\n", "a = 1\r\nb = 2", "a = 1\r\nb = 3", b"a = 1\nb = 3\n"),
    "mixed-endings-crlf-most": (b"a\r\nb\r\nc\nd\r\n", "b\nc", "B\nc", b"a\r\nB\r\nc\nd\r\n"),
    "mixed-endings-lf-most": (b"a\nb\nc\r\nd\n", "c\nd", "C\nd", b"a\nb\nC\r\nd\n"),
    "mixed-endings-added-line": (b"a\r\nb\r\nc\n", "a\nb", "a\nx\nb", b"a\r\nx\r\nb\r\nc\n"),
    "bom-and-crlf-kept": (
        b"\xef\xbb\xbfa = 1\r\nb = 2\r\n",
        "b = 2",
        "b = 3",
        b"\xef\xbb\xbfa = 1\r\nb = 3\r\n",
    ),
    "curly-quotes-in-old": (b's = "it\'s"\n', "s = \u201cit\u2019s\u201d", "s = \u201cit is\u201d", b's = "it is"\n'),
    "ascii-quotes-against-curly-file": (
        "s = \u201chi\u201d\n".encode(),
        's = "hi"',
        's = "hi there"',
        "s = \u201chi there\u201d\n".encode(),
    ),
    "en-dash-and-nbsp": (b"a = 1 - 2\n", "a\u00a0= 1 \u2013 2", "a = 1 - 3", b"a = 1 - 3\n"),
    "zero-width-space": (b"total = a + b\n", "total\u200b = a + b", "total = a - b", b"total = a - b\n"),
    "ellipsis": (b"print('wait...')\n", "print('wait\u2026')", "print('done')", b"print('done')\n"),
    "nfc-old-nfd-file": (
        nfd(CAFE).encode(),
        "name = 'caf\u00e9'",
        "name = 'tea'",
        nfd(CAFE).replace(nfd("name = 'caf\u00e9'"), "name = 'tea'").encode(),
    ),
    "nfd-old-nfc-file": (
        CAFE.encode(),
        nfd("name = 'caf\u00e9'"),
        "name = 'tea'",
        CAFE.replace("name = 'caf\u00e9'", "name = 'tea'").encode(),
    ),
    "nfd-multiline": (
        nfd("# r\u00e9sum\u00e9\nx = 1\n").encode(),
        "# r\u00e9sum\u00e9\nx = 1\n",
        "# r\u00e9sum\u00e9\nx = 2\n",
        nfd("# r\u00e9sum\u00e9\n").encode() + b"x = 2\n",
    ),
    "read-line-numbers-tab": (
        PY.encode(),
        "     2\t    if a:\n     3\t        return 1",
        "     2\t    if a:\n     3\t        return 9",
        PY.replace("return 1", "return 9").encode(),
    ),
    "read-line-numbers-old-only": (
        PY.encode(),
        "     3\t        return 1",
        "        return 9",
        PY.replace("return 1", "return 9").encode(),
    ),
    "arrow-line-numbers": (
        PY.encode(),
        "  3\u2192        return 1",
        "  3\u2192        return 9",
        PY.replace("return 1", "return 9").encode(),
    ),
    "arrow-then-tab": (
        PY.encode(),
        "     3\u2192\t        return 1",
        "        return 9",
        PY.replace("return 1", "return 9").encode(),
    ),
    "arrow-then-tab-in-both": (
        PY.encode(),
        "  2\u2192\t    if a:\n  3\u2192\t        return 1",
        "  2\u2192\t    if a:\n  3\u2192\t        return 9\n  4\u2192\t        print(a)",
        PY.replace("        return 1\n", "        return 9\n        print(a)\n").encode(),
    ),
    "arrow-then-tab-in-a-tab-file": (
        TABS.encode(),
        "  2\u2192\tif a:\n  3\u2192\t\treturn 1",
        "  2\u2192\tif a:\n  3\u2192\t\treturn 9",
        TABS.replace("return 1", "return 9").encode(),
    ),
    "escaped-twice": (
        PY.encode(),
        "    if a:\\n        return 1",
        '    if a:\\n        return 9\\n    print(\\"a\\\\tb\\")',
        PY.replace("        return 1\n", '        return 9\n    print("a\\tb")\n').encode(),
    ),
    "escaped-twice-new-only": (
        PY.encode(),
        "        return 1\n",
        "        x = 1\\n        return x\\n",
        PY.replace("        return 1\n", "        x = 1\n        return x\n").encode(),
    ),
    "one-line-escape-kept": (b's = "a"\n', 's = "a"', 's = "a\\nb"', b's = "a\\nb"\n'),
    "spaces-in-new-for-a-tab-file": (
        TABS.encode(),
        "\t\treturn 1",
        "        log(a)\n        return 1",
        TABS.replace("\t\treturn 1", "\t\tlog(a)\n\t\treturn 1").encode(),
    ),
    "tabs-in-new-for-a-space-file": (
        PY.encode(),
        "        return 1",
        "\t\tlog(a)\n\t\treturn 1",
        PY.replace("        return 1", "        log(a)\n        return 1").encode(),
    ),
    "makefile-recipe-with-spaces": (
        b"all:\n\tcc -o a a.c\n\ttouch done\n",
        "\tcc -o a a.c",
        "    cc -O2 -o a a.c",
        b"all:\n\tcc -O2 -o a a.c\n\ttouch done\n",
    ),
    "whole-body-restyled-as-asked": (
        b"def f():\n\tif a:\n\t\treturn 1\n",
        "\tif a:\n\t\treturn 1",
        "    if a:\n        return 2",
        b"def f():\n    if a:\n        return 2\n",
    ),
    "read-line-numbers-new-only": (b"if a:\n    x = 1\n", "    x = 1", "     2\t    x = 2", b"if a:\n    x = 2\n"),
    "tab-separated-new-kept": (b"id\tname\n", "id\tname\n", "id\tname\n1\tAlice\n2\tBob\n", b"id\tname\n1\tAlice\n2\tBob\n"),
    "blank-line-quoted-past-the-end": (b"x = 1\n", "x = 1\n\n", "x = 2\n", b"x = 2\n"),
    "no-final-newline": (b"x = 1\ny = 2", "y = 2\n", "y = 3\n", b"x = 1\ny = 3"),
    "no-final-newline-exact": (b"x = 1\ny = 2", "y = 2", "y = 3", b"x = 1\ny = 3"),
    "long-line-kept": (b"x = '" + b"a" * 200_000 + b"'\ny = 1\n", "y = 1", "y = 2", b"x = '" + b"a" * 200_000 + b"'\ny = 2\n"),
    "latin-1": ("caf\u00e9 = 1\n".encode("latin-1"), "caf\u00e9 = 1", "caf\u00e9 = 2", "caf\u00e9 = 2\n".encode("latin-1")),
    "cp1252-euro": ("price = '\u20ac1'\n".encode("cp1252"), "'\u20ac1'", "'\u20ac2'", "price = '\u20ac2'\n".encode("cp1252")),
    "utf16-bom": ("a = 1\nb = 2\n".encode("utf-16"), "b = 2", "b = 3", "a = 1\nb = 3\n".encode("utf-16")),
    "replace-all": (b"x = 1\nx = 1\n", "x = 1", "x = 2", b"x = 2\nx = 2\n"),
}


@pytest.mark.parametrize("case", list(APPLIES), ids=list(APPLIES))
async def test_an_edit_in_a_model_habit_applies_as_meant(workspace: Path, case: str) -> None:
    data, old, new, after = APPLIES[case]
    error, text, written = await _edit(workspace, "f.py", data, old_string=old, new_string=new, replace_all=case == "replace-all")
    assert not error, text
    assert written == after
    assert not text.startswith("WARNING")


# (file bytes, old_string, new_string, the start of the one-sentence error)
REFUSED: dict[str, tuple[bytes, str, str, str]] = {
    "ambiguous": (
        b"x = 1\ny = 0\nx = 1\n",
        "x = 1",
        "x = 2",
        "old_string occurs 2 times in f.py; include more surrounding lines",
    ),
    "ambiguous-up-to-indentation": (
        b"if a:\n    x = 1\n    y = 2\nif b:\n        x = 1\n        y = 2\n",
        "  x = 1\n  y = 2",
        "  x = 1\n  y = 3",
        "old_string was not found exactly, and 2 places match it up to indentation and spacing",
    ),
    "ambiguous-up-to-punctuation": (
        "a = \u201cq\u201d\nb = 0\na = \u201cq\u201d\n".encode(),
        'a = "q"',
        'a = "r"',
        "old_string was not found exactly, and 2 places match it with typographic punctuation",
    ),
    "not-there": (PY.encode(), "return 7", "return 8", "old_string was not found in f.py."),
    "empty-old": (PY.encode(), "", "x", "old_string is empty; use write to create a file or to replace all of it"),
    "no-change": (PY.encode(), "return 1", "return 1", "old_string and new_string are identical"),
    "binary": (b"\x00\x01\x02abc\x00\xff", "abc", "xyz", "f.py is a binary file; edit changes text files only"),
    "latin-1-cannot-hold": (
        "caf\u00e9 = 1\n".encode("latin-1"),
        "caf\u00e9 = 1",
        "caf\u00e9 = '\u4e2d'",
        "the new text has '\u4e2d', which this file's encoding (cp1252) cannot hold; nothing was written",
    ),
    "indentation-that-fits-no-mapping": (
        b"def f():\n    if a:\n        pass\n",
        "if a:\npass",
        "if a:\nreturn",
        "old_string matches line 2 only up to indentation and spacing, and was not changed",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
async def test_an_edit_that_cannot_apply_safely_fails_in_one_sentence_and_changes_nothing(workspace: Path, case: str) -> None:
    data, old, new, error = REFUSED[case]
    failed, text, written = await _edit(workspace, "f.py", data, old_string=old, new_string=new)
    assert failed
    assert text.startswith(error), text
    assert "\n" not in text
    assert written == data


@pytest.mark.parametrize(
    ("name", "data", "old", "new", "language"),
    [
        ("m.py", PY, "        return 1", "      return 1\n        x", "Python"),
        ("c.yaml", "a:\n  b: 1\n  c: 2\n", "  c: 2", " c: 2", "YAML"),
        ("c.json", '{"a": 1, "b": 2}\n', '"b": 2', '"b": 2,', "JSON"),
        ("c.toml", "[a]\nb = 1\n", "b = 1", "b = ", "TOML"),
    ],
    ids=["python-indentation", "yaml-indentation", "json-trailing-comma", "toml-missing-value"],
)
async def test_an_edit_that_breaks_a_valid_file_says_so_first(
    workspace: Path, name: str, data: str, old: str, new: str, language: str
) -> None:
    failed, text, written = await _edit(workspace, name, data.encode(), old_string=old, new_string=new)
    assert not failed
    assert text.startswith(f"WARNING: {name} is no longer valid {language} after this change ("), text
    assert written == data.replace(old, new).encode()


async def test_several_edits_of_one_file_in_one_response_apply_in_order(workspace: Path) -> None:
    """A model's multi-edit: the calls of one response run one after another; an edit whose
    text an earlier one already changed fails plainly, and nothing is lost."""
    (workspace / "a.py").write_text(PY)
    edits = [
        call("edit", path="a.py", old_string="    if a:\n        return 1", new_string="    if a:\n        return 5"),
        call("edit", path="a.py", old_string="    return 2", new_string="    return 6"),
        call("edit", path="a.py", old_string="        return 1\n    return 6", new_string="        return 0\n    return 6"),
        call("edit", path="a.py", old_string="def f(a):", new_string="def f(a, b):"),
    ]
    _rt, results = await run_script(workspace, [{"tool_calls": edits}, {"text": "ok"}])
    assert [r.is_error for r in results] == [False, False, True, False], [r.text for r in results]
    assert results[2].text.startswith("old_string was not found in a.py.")
    assert (workspace / "a.py").read_text() == "def f(a, b):\n    if a:\n        return 5\n    return 6\n"


@pytest.mark.parametrize(
    ("content", "written", "note"),
    [
        ("     1\tx = 1\n     2\ty = 2\n", "x = 1\ny = 2\n", True),
        ("     9\tdef g():\n    10\t    return 1\n", "def g():\n    return 1\n", True),
        ("  1\u2192x = 1\n  2\u2192y = 2\n", "x = 1\ny = 2\n", True),
        ("1\tAlice\n2\tBob\n", "1\tAlice\n2\tBob\n", False),
        ("     1\tx\n     5\ty\n", "     1\tx\n     5\ty\n", False),
        ("1\u21922 add a column\n2\u21923 drop it\n", "1\u21922 add a column\n2\u21923 drop it\n", False),
    ],
    ids=["read-form", "read-form-from-line-9", "arrow-form", "tab-separated-data", "numbers-not-consecutive", "arrow-text"],
)
async def test_write_leaves_out_line_numbers_copied_from_read(workspace: Path, content: str, written: str, note: bool) -> None:
    _rt, [result] = await run_script(
        workspace, [{"tool_calls": [call("write", path="new.txt", content=content)]}, {"text": "ok"}]
    )
    assert not result.is_error, result.text
    assert (workspace / "new.txt").read_text() == written
    assert result.text.endswith("(the line numbers copied from read's output were left out; check the file)") == note


@pytest.mark.parametrize(
    ("content", "written", "note"),
    [
        ("def g():\\n    return 1\\n", "def g():\n    return 1\n", True),
        ("x = 1\\ny = 2\\n", "x = 1\ny = 2\n", True),
        ('if a:\\n\\tprint(\\"a\\\\n\\")\\n', 'if a:\n\tprint("a\\n")\n', True),
        ('print("a\\nb")\n', 'print("a\\nb")\n', False),
        ('print("a\\nb")', 'print("a\\nb")', False),
        ('print("\\n\\n")', 'print("\\n\\n")', False),
        ("log('usage:\\n  -h  help')", "log('usage:\\n  -h  help')", False),
    ],
    ids=[
        "indented",
        "ends-with-escape",
        "tab-quotes-and-backslash",
        "string-escape-in-a-file",
        "one-line-of-code",
        "breaks-inside-a-string",
        "indent-inside-a-string",
    ],
)
async def test_write_reads_content_escaped_twice_as_lines(workspace: Path, content: str, written: str, note: bool) -> None:
    """A model that escaped its text twice sends one line of ``\\n`` escapes; a one-line file's
    own escapes stay as written."""
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("write", path="new.py", content=content)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert (workspace / "new.py").read_text() == written
    said = "(its \\n escapes were read as line breaks, since it had no real ones (it was escaped twice); check the file)"
    assert result.text.endswith(said) == note, result.text


async def test_a_one_line_new_string_keeps_the_escapes_inside_its_string_literals(workspace: Path) -> None:
    """Lines joined into one whose string literal holds ``\\n\\n`` (``"\\n\\n".join``) are code
    as written, not text escaped twice: the file keeps the escapes inside the quotes."""
    source = "let out = '';\nfor (const p of parts) {\n  out += p + '\\n\\n';\n}\n"
    old = "let out = '';\nfor (const p of parts) {\n  out += p + '\\n\\n';\n}"
    new = 'const out = parts.join("\\n\\n");'
    error, text, written = await _edit(workspace, "a.js", source.encode(), old_string=old, new_string=new)
    assert not error, text
    assert written == b'const out = parts.join("\\n\\n");\n', written
    assert "escaped twice" not in text, text


@pytest.mark.parametrize(
    ("name", "source", "old", "new"),
    [
        (
            "Makefile",
            "SRCS = a.c \\\n    b.c \\\n    c.c \\\n    d.c \\\n    e.c\n\nall:\n\tcc $(SRCS)\n",
            "all:\n\tcc $(SRCS)",
            "all:\n\tcc -O2 $(SRCS)\n\tstrip a.out",
        ),
        (
            "build.mk",
            "FLAGS = -a \\\n    -b \\\n    -c \\\n    -d\n\nbuild:\n\tmake it\n",
            "build:\n\tmake it",
            "build:\n\tmake it\n\tmake docs",
        ),
        (
            "run.sh",
            "main() {\n    a\n    b\n    c\n    d\n}\nx\n",
            "x",
            "cat <<-EOF\n\thello\n\tEOF",
        ),
    ],
    ids=["makefile-recipe", "mk-recipe", "shell-heredoc-that-strips-tabs"],
)
async def test_tabs_that_are_syntax_stay_tabs_in_a_spaces_file(
    workspace: Path, name: str, source: str, old: str, new: str
) -> None:
    """A recipe line of a makefile starts with a tab, and ``<<-`` strips leading tabs only: as
    spaces, make says 'missing separator' and the here-document never ends."""
    error, text, written = await _edit(workspace, name, source.encode(), old_string=old, new_string=new)
    assert not error, text
    assert written == source.replace(old, new).encode(), written
    assert "spaces a level" not in text, text


async def test_spaces_that_are_no_whole_number_of_tabs_are_written_as_sent_saying_so(workspace: Path) -> None:
    error, text, written = await _edit(
        workspace, "f.txt", TABS.encode(), old_string="\t\treturn 1", new_string="         return 2"
    )
    assert not error, text
    assert text.startswith(
        "edited f.txt: 1 replacement (new_string is indented with spaces and the file with tabs, in no whole number of "
        "tabs; it was written as sent; check the diff)"
    ), text
    assert written == TABS.replace("\t\treturn 1", "         return 2").encode()
