"""``apply_patch`` against the forms models write, through the real loop: Codex patches with
fuzzy context, unified diffs with wrong line numbers and counts, ``git diff`` output (headers,
``a/``/``b/``, new, deleted and renamed files), a missing final-newline marker, whitespace and
Unicode differences in context, and hunks whose place is not clear or that were applied already.
Each applies as meant or fails in plain words, changing nothing."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from tests.tools.harness import call, run_script, write_files

PY = "def f(a):\n    if a:\n        return 1\n    return 2\n"
TWICE = "x = 1\ny = 2\nx = 1\ny = 2\n"


def codex(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


def git_diff(old: str, new: str, *body: str) -> str:
    return (
        "\n".join([f"diff --git a/{old} b/{new}", "index 83db48f..bf269f4 100644", f"--- a/{old}", f"+++ b/{new}", *body]) + "\n"
    )


async def _patch(workspace: Path, files: dict[str, bytes], patch: str) -> tuple[bool, str]:
    write_files(workspace, files)
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=patch)]}, {"text": "ok"}])
    return result.is_error, result.text


# (files before, patch, files after; None: the file is gone)
APPLIES: dict[str, tuple[dict[str, bytes], str, dict[str, bytes | None]]] = {
    "codex-context-indented-off-by-2": (
        {"a.py": PY.encode()},
        codex("*** Update File: a.py", "@@ def f(a):", "  if a:", "-      return 1", "+      return 7"),
        {"a.py": PY.replace("return 1", "return 7").encode()},
    ),
    "codex-context-with-tabs-for-spaces": (
        {"a.py": PY.encode()},
        codex("*** Update File: a.py", "@@", " \tif a:", "-\t\treturn 1", "+\t\treturn 7", "+\t\t# done"),
        {"a.py": PY.replace("        return 1\n", "        return 7\n        # done\n").encode()},
    ),
    "codex-context-trailing-spaces-in-file": (
        {"a.py": b"x = 1  \ny = 2\t\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3"),
        {"a.py": b"x = 1  \ny = 3\n"},
    ),
    "unified-wrong-line-numbers": (
        {"a.py": PY.encode()},
        "--- a/a.py\n+++ b/a.py\n@@ -40,3 +40,3 @@\n     if a:\n-        return 1\n+        return 8\n     return 2\n",
        {"a.py": PY.replace("return 1", "return 8").encode()},
    ),
    "unified-wrong-hunk-counts": (
        {"a.py": b"x = 1\ny = 2\nz = 3\n"},
        "--- a/a.py\n+++ b/a.py\n@@ -1,9 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n z = 3\n",
        {"a.py": b"x = 1\ny = 3\nz = 3\n"},
    ),
    "unified-without-prefixes": (
        {"a.py": PY.encode()},
        "--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n def f(a):\n-    if a:\n+    if not a:\n",
        {"a.py": PY.replace("if a:", "if not a:").encode()},
    ),
    "git-diff-with-header-and-index": (
        {"src/a.py": PY.encode()},
        git_diff("src/a.py", "src/a.py", "@@ -2,2 +2,2 @@ def f(a):", "     if a:", "-        return 1", "+        return 9"),
        {"src/a.py": PY.replace("return 1", "return 9").encode()},
    ),
    "git-diff-new-deleted-renamed": (
        {"old.py": b"o = 1\n", "gone.py": b"x = 1\n"},
        "diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\nrename to new.py\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\nindex 5bd8a82..0000000\n--- a/gone.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-x = 1\n"
        "diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0000000..3c0b3e2\n--- /dev/null\n+++ b/n.py\n"
        "@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n",
        {"old.py": None, "new.py": b"o = 1\n", "gone.py": None, "n.py": b"a = 1\nb = 2\n"},
    ),
    "git-diff-rename-with-changes": (
        {"old.py": b"a = 1\nb = 2\n"},
        "diff --git a/old.py b/new.py\nsimilarity index 50%\nrename from old.py\nrename to new.py\nindex 1..2 100644\n"
        "--- a/old.py\n+++ b/new.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n",
        {"old.py": None, "new.py": b"a = 1\nb = 3\n"},
    ),
    "git-diff-empty-file-added": (
        {},
        "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0000000..e69de29\n",
        {"empty.txt": b""},
    ),
    "file-without-final-newline-patch-without-marker": (
        {"a.py": b"x = 1\ny = 2"},
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n",
        {"a.py": b"x = 1\ny = 3"},
    ),
    "file-without-final-newline-patch-with-marker": (
        {"a.py": b"x = 1\ny = 2"},
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n\\ No newline at end of file\n"
        "+y = 3\n\\ No newline at end of file\n",
        {"a.py": b"x = 1\ny = 3"},
    ),
    "marker-after-added-line-drops-the-final-newline": (
        {"a.py": b"x = 1\n"},
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n\\ No newline at end of file\n",
        {"a.py": b"x = 2"},
    ),
    "marker-after-removed-line-adds-the-final-newline": (
        {"a.py": b"x = 1\ny = 2"},
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n\\ No newline at end of file\n+y = 3\n",
        {"a.py": b"x = 1\ny = 3\n"},
    ),
    "marker-after-context-keeps-the-end": (
        {"a.py": b"x = 1\ny = 2"},
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 0\n y = 2\n\\ No newline at end of file\n",
        {"a.py": b"x = 0\ny = 2"},
    ),
    "new-file-from-dev-null-with-b-prefix-and-marker": (
        {},
        "--- /dev/null\n+++ b/src/n.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n\\ No newline at end of file\n",
        {"src/n.py": b"a = 1\nb = 2", "b/src/n.py": None},
    ),
    "deleted-file-to-dev-null-with-a-prefix": (
        {"gone.py": b"x = 1\n"},
        "--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n",
        {"gone.py": None},
    ),
    "codex-add-file-with-marker": (
        {},
        codex("*** Add File: n.txt", "+last", "\\ No newline at end of file"),
        {"n.txt": b"last"},
    ),
    "escaped-twice": (
        {"a.py": b"x = 1\ny = 1\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 1", "+y = 2").replace("\n", "\\n"),
        {"a.py": b"x = 1\ny = 2\n"},
    ),
    "move-into-a-folder": (
        {"a.py": b"x = 1\n"},
        codex("*** Update File: a.py", "*** Move to: sub/", "@@", "-x = 1", "+x = 2"),
        {"a.py": None, "sub/a.py": b"x = 2\n"},
    ),
    "crlf-file": (
        {"a.py": b"x = 1\r\ny = 2\r\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3"),
        {"a.py": b"x = 1\r\ny = 3\r\n"},
    ),
    "mixed-line-endings": (
        {"a.py": b"x = 1\r\ny = 2\nz = 3\r\n"},
        codex("*** Update File: a.py", "@@", "-x = 1", "+x = 0", " y = 2", "+w = 9"),
        {"a.py": b"x = 0\r\ny = 2\nw = 9\r\nz = 3\r\n"},
    ),
    "bom-file": (
        {"a.py": b"\xef\xbb\xbfx = 1\ny = 2\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3"),
        {"a.py": b"\xef\xbb\xbfx = 1\ny = 3\n"},
    ),
    "latin-1-file": (
        {"a.txt": "caf\u00e9\nb\n".encode("latin-1")},
        codex("*** Update File: a.txt", "@@", " caf\u00e9", "-b", "+c"),
        {"a.txt": "caf\u00e9\nc\n".encode("latin-1")},
    ),
    "curly-quotes-in-context": (
        {"a.py": b'msg = "it\'s"\nn = 1\n'},
        codex("*** Update File: a.py", "@@", " msg = \u201cit\u2019s\u201d", "-n = 1", "+n = 2"),
        {"a.py": b'msg = "it\'s"\nn = 2\n'},
    ),
    "nfc-context-nfd-file": (
        {"a.txt": unicodedata.normalize("NFD", "caf\u00e9\nb\n").encode()},
        codex("*** Update File: a.txt", "@@", " caf\u00e9", "-b", "+c"),
        {"a.txt": unicodedata.normalize("NFD", "caf\u00e9\nc\n").encode()},
    ),
    "duplicate-context-chosen-by-the-line-number": (
        {"a.py": TWICE.encode()},
        "--- a/a.py\n+++ b/a.py\n@@ -3,2 +3,2 @@\n x = 1\n-y = 2\n+y = 3\n",
        {"a.py": b"x = 1\ny = 2\nx = 1\ny = 3\n"},
    ),
    "duplicate-context-chosen-by-a-later-hunk": (
        {"a.py": b"x = 1\ny = 2\nmid = 0\nx = 1\ny = 2\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3", "@@", "-mid = 0", "+mid = 1"),
        {"a.py": b"x = 1\ny = 3\nmid = 1\nx = 1\ny = 2\n"},
    ),
    "duplicate-context-chosen-by-an-anchor": (
        {"a.py": b"def f():\n    x = 1\ndef g():\n    x = 1\n"},
        codex("*** Update File: a.py", "@@ def g():", "-    x = 1", "+    x = 2"),
        {"a.py": b"def f():\n    x = 1\ndef g():\n    x = 2\n"},
    ),
    "prose-around-the-patch": (
        {"a.py": b"x = 1\n"},
        "Here is the patch:\n\n" + codex("*** Update File: a.py", "@@", "-x = 1", "+x = 2") + "\n\nThis sets x to 2.",
        {"a.py": b"x = 2\n"},
    ),
    "indented-patch": (
        {"a.py": b"x = 1\ny = 1\n"},
        "\n".join("    " + line for line in codex("*** Update File: a.py", "@@", " x = 1", "-y = 1", "+y = 2").split("\n")),
        {"a.py": b"x = 1\ny = 2\n"},
    ),
    "crlf-patch-text": (
        {"a.py": b"x = 1\ny = 1\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 1", "+y = 2").replace("\n", "\r\n"),
        {"a.py": b"x = 1\ny = 2\n"},
    ),
    "dot-slash-paths": (
        {"a.py": b"x = 1\n"},
        codex("*** Update File: ./a.py", "@@", "-x = 1", "+x = 2", "*** Add File: ./b.py", "+b = 1"),
        {"a.py": b"x = 2\n", "b.py": b"b = 1\n"},
    ),
    "markdown-fenced": (
        {"a.py": b"x = 1\n"},
        "```diff\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n```",
        {"a.py": b"x = 2\n"},
    ),
}


@pytest.mark.parametrize("case", list(APPLIES), ids=list(APPLIES))
async def test_a_patch_in_a_model_habit_applies_as_meant(workspace: Path, case: str) -> None:
    before, patch, after = APPLIES[case]
    failed, text = await _patch(workspace, before, patch)
    assert not failed, text
    for name, data in after.items():
        if data is None:
            assert not (workspace / name).exists(), name
        else:
            assert (workspace / name).read_bytes() == data, name


# (files, patch, the start of the error)
REFUSED: dict[str, tuple[dict[str, bytes], str, str]] = {
    "duplicate-context-without-anything-to-choose": (
        {"a.py": TWICE.encode()},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3"),
        "a.py, hunk 1: its lines occur 2 times in the file (at lines 1, 3), so the place to change is not clear",
    ),
    "duplicate-context-line-number-halfway": (
        {"a.py": TWICE.encode()},
        "--- a/a.py\n+++ b/a.py\n@@ -2,2 +2,2 @@\n x = 1\n-y = 2\n+y = 3\n",
        "a.py, hunk 1: its lines occur 2 times in the file (at lines 1, 3)",
    ),
    "applied-already": (
        {"a.py": b"x = 1\ny = 3\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3"),
        "a.py, hunk 1: its lines were not found, and the lines it would produce are already there (line 1)",
    ),
    "insertion-applied-already": (
        {"a.py": b"x = 1\nz = 0\ny = 2\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "+z = 0", " y = 2"),
        "a.py, hunk 1: its lines were not found, and the lines it would produce are already there (line 1)",
    ),
    "wrong-context": (
        {"a.py": PY.encode()},
        codex("*** Update File: a.py", "@@", "     if b:", "-        return 1", "+        return 3"),
        "a.py, hunk 1: these lines were not found (read the file again):",
    ),
    "binary-file": (
        {"a.png": b"\x89PNG"},
        "diff --git a/a.png b/a.png\nindex 1..2 100644\nBinary files a/a.png and b/a.png differ\n",
        "the diff changes a binary file (Binary files a/a.png and b/a.png differ); apply_patch changes text files only",
    ),
    "copied-file": (
        {"a.py": b"x = 1\n"},
        "diff --git a/a.py b/b.py\nsimilarity index 100%\ncopy from a.py\ncopy to b.py\n",
        "the diff copies a file, which apply_patch cannot do; send the copy as an added file",
    ),
    "missing-end": (
        {"a.py": b"x = 1\n"},
        "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n",
        "the patch must end with '*** End Patch'",
    ),
    "hunk-without-a-file": (
        {"a.py": b"x = 1\n"},
        "@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        "the patch has a hunk but names no file: start it with '*** Begin Patch' and '*** Update File: PATH' (or, as a "
        "unified diff, with '--- a/PATH' and '+++ b/PATH' lines)",
    ),
    "add-existing": (
        {"a.py": b"x = 1\n"},
        codex("*** Add File: a.py", "+y = 1"),
        "a.py already exists; use '*** Update File:' to change it",
    ),
    "no-newline-marker-mid-file": (
        {"a.py": b"x = 1\ny = 2\nz = 4\n"},
        codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3", "\\ No newline at end of file"),
        "a.py, hunk 1: '\\\\ No newline at end of file' follows line 2, which is not the file's last (it has 3); "
        "leave the marker out",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
async def test_a_patch_that_cannot_apply_safely_says_why_and_changes_nothing(workspace: Path, case: str) -> None:
    before, patch, error = REFUSED[case]
    failed, text = await _patch(workspace, before, patch)
    assert failed
    assert text.startswith(error), text
    for name, data in before.items():
        assert (workspace / name).read_bytes() == data


async def test_a_new_file_with_git_prefixes_over_an_existing_one_is_refused_in_place(workspace: Path) -> None:
    """``+++ b/a.py`` after ``--- /dev/null`` names ``a.py``: it exists, so the patch is refused,
    and no ``b/a.py`` is made beside it."""
    failed, text = await _patch(workspace, {"a.py": b"x = 1\n"}, "--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+y = 1\n")
    assert failed
    assert text.startswith("a.py already exists"), text
    assert sorted(p.name for p in workspace.iterdir()) == ["a.py"]
    assert (workspace / "a.py").read_bytes() == b"x = 1\n"


async def test_a_second_hunk_is_placed_after_the_first(workspace: Path) -> None:
    """Hunks are found in order: the same context after the first hunk's place is the second's."""
    patch = codex("*** Update File: a.py", "@@", " x = 1", "-y = 2", "+y = 3", "@@", " x = 1", "-y = 2", "+y = 4")
    failed, text = await _patch(workspace, {"a.py": TWICE.encode()}, patch)
    assert not failed, text
    assert (workspace / "a.py").read_text() == "x = 1\ny = 3\nx = 1\ny = 4\n"


async def test_the_same_patch_sent_twice_in_one_response_applies_once(workspace: Path) -> None:
    (workspace / "a.py").write_text(PY)
    patch = codex("*** Update File: a.py", "@@", "     if a:", "-        return 1", "+        return 5")
    _rt, results = await run_script(
        workspace, [{"tool_calls": [call("apply_patch", patch=patch), call("apply_patch", patch=patch)]}, {"text": "ok"}]
    )
    assert [r.is_error for r in results] == [False, True]
    assert "the change looks made already" in results[1].text
    assert (workspace / "a.py").read_text() == PY.replace("return 1", "return 5")


async def test_an_edit_sent_twice_says_it_looks_made_already(workspace: Path) -> None:
    (workspace / "a.py").write_text(PY)
    edit = call("edit", path="a.py", old_string="        return 1", new_string="        return 5")
    _rt, results = await run_script(workspace, [{"tool_calls": [edit, edit]}, {"text": "ok"}])
    assert [r.is_error for r in results] == [False, True]
    assert results[1].text == (
        "old_string was not found in a.py. new_string is already there (line 3), so the edit looks made already; "
        "read the file to check."
    )


def test_lines_found_in_thousands_of_places_are_placed_with_a_few_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hunk of lines as common as ``}`` and a blank line occurs once per function: choosing
    its place by the later hunks searches the file a few times (a binary search), not once per
    place, which on a file of thousands of functions held the session for many seconds."""
    import roder_ext_builtin_coding_tools.patch as patch_module

    blocks = 2000
    text = "".join(f"function f{i}() {{\n  return {i};\n}}\n\n" for i in range(blocks))
    hunks = patch_module.parse_patch(
        codex("*** Update File: a.js", "@@", " }", "+// end of f0", " ", "@@", "-  return 1;", "+  return -1;")
    )[0].hunks
    searches = 0
    seek_all = patch_module._seek_all

    def counted(lines: list[str], needle: list[str], start: int) -> tuple[list[int], int]:
        nonlocal searches
        searches += 1
        return seek_all(lines, needle, start)

    monkeypatch.setattr(patch_module, "_seek_all", counted)
    out = patch_module.apply_hunks(text, hunks, "a.js")
    assert out.startswith("function f0() {\n  return 0;\n}\n// end of f0\n\nfunction f1() {\n  return -1;\n}\n")
    assert searches < 40, searches
