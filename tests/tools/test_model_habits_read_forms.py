"""``read`` against the paths and windows models ask for, through the real loop: windows out of
range, huge files, folders (the workspace itself too), images and PDFs, ``~``, absolute and
``..`` paths, paths outside the workspace, and text that stops being UTF-8 far down a file.
Each answer is the text meant, or one plain line saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.harness import call, run_script, write_files

PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n" + bytes(range(256)) * 4 + b"\n%%EOF\n"


def png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (2, 2), "red").save(out, "PNG")
    return out.getvalue()


FILES: dict[str, bytes] = {
    "a.py": b"".join(b"line %d\n" % n for n in range(1, 11)),
    "empty.txt": b"",
    "sub/x.txt": b"in sub\n",
    "late.txt": b"ascii\n" * 3000 + "caf\u00e9\n".encode("latin-1"),
    "doc.pdf": PDF,
    "pixel.png": png(),
    "broken.png": png()[:40],
    "big.txt": b"z" * 99 + b"\n" + (b"y" * 99 + b"\n") * 99_999,
    "crlf.txt": b"one\r\ntwo\r\n",
    "utf16.txt": "h\u00e9llo\n".encode("utf-16"),
}


@pytest.fixture
def files(workspace: Path) -> Path:
    return write_files(workspace, FILES)


async def _read(workspace: Path, **arguments: object) -> tuple[bool, str]:
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("read", **arguments)]}, {"text": "ok"}])
    return result.is_error, result.text


@pytest.mark.parametrize(
    ("arguments", "first", "last"),
    [
        ({"path": "a.py", "offset": 9, "limit": 50}, "     9\tline 9", "    10\tline 10"),
        (
            {"path": "a.py", "offset": "2", "limit": "1"},
            "     2\tline 2",
            "[showing lines 2-2 of 10 (1 lines); continue with offset=3]",
        ),
        ({"path": "./sub/../a.py", "limit": 1}, "     1\tline 1", "[showing lines 1-1 of 10 (1 lines); continue with offset=2]"),
        ({"path": "crlf.txt"}, "     1\tone", "     2\ttwo"),
        ({"path": "utf16.txt"}, "[not UTF-8: decoded as utf-16; edit and write keep this encoding]", "     1\th\u00e9llo"),
        (
            {"path": "late.txt", "offset": 3000},
            "[not UTF-8 from line 3001 on: decoded as cp1252; edit and write keep this encoding]",
            "  3001\tcaf\u00e9",
        ),
        ({"path": "late.txt", "limit": 2}, "     1\tascii", "[showing lines 1-2 of 3001 (2 lines); continue with offset=3]"),
        (
            {"path": "big.txt", "limit": 100_000},
            "     1\t" + "z" * 99,
            "[showing lines 1-467 of 100000 (50 KB); continue with offset=468]",
        ),
        ({"path": "big.txt", "offset": 99_999}, " 99999\t" + "y" * 99, "100000\t" + "y" * 99),
        ({"path": "empty.txt"}, "empty.txt is empty", "empty.txt is empty"),
    ],
    ids=[
        "window-past-the-end",
        "strings",
        "dot-dot",
        "crlf",
        "utf16",
        "latin-1-far-down",
        "utf-8-part",
        "huge-limit",
        "huge-end",
        "empty",
    ],
)
async def test_read_windows_and_encodings(files: Path, arguments: dict[str, object], first: str, last: str) -> None:
    error, text = await _read(files, **arguments)
    assert not error, text
    lines = text.splitlines()
    assert (lines[0], lines[-1]) == (first, last)
    assert "\ufffd" not in text


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"path": "a.py", "offset": 11}, "offset 11 is past the end of a.py (10 lines)"),
        ({"path": "sub"}, "sub is a folder; use ls or glob to list it"),
        ({"path": "."}, ". is a folder; use ls or glob to list it"),
        ({"path": "./"}, "./ is a folder; use ls or glob to list it"),
        ({"path": "doc.pdf"}, "doc.pdf looks like a binary file"),
        ({"path": "nope.py"}, "nope.py: no such file"),
        (
            {"path": "broken.png"},
            "broken.png starts like an image (image/png) but cannot be decoded (damaged or cut short); "
            "inspect it with bash (`file broken.png`)",
        ),
        ({"path": "a.py:3"}, "a.py:3: no such file; to read a.py from line 3, send path='a.py' and offset=3"),
        ({"path": "sub/*.txt"}, "sub/*.txt: no such file; read takes one file: find the files with glob, then read each"),
        ({"path": "/etc/hostname"}, "refused: /etc/hostname: outside the workspace"),
        ({"path": "../outside.txt"}, "refused: ../outside.txt: outside the workspace"),
        ({"path": "~/.bashrc"}, "refused: ~/.bashrc: outside the workspace"),
    ],
    ids=[
        "offset-past-end",
        "folder",
        "workspace-itself",
        "workspace-slash",
        "pdf",
        "missing",
        "broken-image",
        "location",
        "glob",
        "absolute",
        "dot-dot",
        "tilde",
    ],
)
async def test_read_refusals_are_one_plain_line(files: Path, arguments: dict[str, object], error: str) -> None:
    failed, text = await _read(files, **arguments)
    assert failed
    assert text.startswith(error), text
    assert "\n" not in text


async def test_read_paths_inside_the_workspace_written_absolute_or_with_tilde(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(files.parent))  # the workspace is ~/ws
    for path in (str(files / "sub" / "x.txt"), "~/ws/sub/x.txt", f"{files}/./sub/x.txt"):
        error, text = await _read(files, path=path)
        assert not error, text
        assert text == "     1\tin sub"


async def test_an_image_is_attached(files: Path) -> None:
    error, text = await _read(files, path="pixel.png")
    assert not error, text
    assert text == f"image pixel.png (image/png, {len(png())} bytes) is attached"


@pytest.mark.parametrize(
    ("tool", "arguments", "error"),
    [
        ("read", {"path": "x.txt"}, "x.txt: no such file"),
        ("edit", {"path": "x.txt", "old_string": "in sub", "new_string": "out"}, "x.txt does not exist; use write to create it"),
        ("read", {"path": "deep/x.txt"}, "deep/x.txt: no such file"),
        ("grep", {"pattern": "sub", "path": "x.txt"}, "x.txt: no such file or folder"),
    ],
    ids=["read", "edit", "wrong-folder", "grep"],
)
async def test_a_missing_file_names_the_files_of_that_name(
    files: Path, tool: str, arguments: dict[str, object], error: str
) -> None:
    """A path meant relative to a folder an earlier ``cd`` moved to is found where it is."""
    _rt, [result] = await run_script(files, [{"tool_calls": [call(tool, **arguments)]}, {"text": "ok"}])
    assert result.is_error
    assert result.text == (
        f"{error}. Files named x.txt in the workspace: sub/x.txt (paths are relative to the workspace, not to a "
        "folder a command moved to)"
    )
    assert (files / "sub" / "x.txt").read_bytes() == b"in sub\n"


async def test_a_missing_file_with_no_namesake_says_only_that(files: Path) -> None:
    failed, text = await _read(files, path="nowhere.txt")
    assert failed
    assert text == "nowhere.txt: no such file"
