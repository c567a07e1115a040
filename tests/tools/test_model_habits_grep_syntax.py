"""``grep`` patterns written for other tools, through the real loop, with ripgrep, with a ripgrep
built without PCRE2, and without ripgrep: look-around and backreferences match as PCRE does
(they were searched as literal text); grep's basic syntax (``foo\\|bar``), options typed into the
pattern (``-i foo``) and a JavaScript literal (``/foo/i``), which are valid patterns that match
nothing as written, are read as meant once the pattern as written found nothing, and the
result's first line says how it was read. A pattern that matches as written is never reread."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.tools.harness import call, run_script, write_files

FILES = {"a.py": "foo_bar\nfoo_baz\naa = 1\nFOO = 2\nabab\npipe = 'x|y'\n", "b.txt": "bar\n"}
ENGINES = ["ripgrep", "ripgrep-without-pcre2", "python"]


def _env(engine: str, tmp_path: Path) -> dict[str, str] | None:
    if engine == "python":
        return {"PATH": "/nonexistent"}
    real = shutil.which("rg")
    if real is None:
        pytest.skip("ripgrep is not installed")
    if engine == "ripgrep":
        return None
    # A ripgrep whose build has no PCRE2: it answers --pcre2 the way such a build does.
    shim = tmp_path / "shim"
    shim.mkdir()
    rg = shim / "rg"
    no_pcre2 = "echo 'PCRE2 is not available in this build of ripgrep.' >&2; exit 2"
    rg.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --pcre2 ] && {{ {no_pcre2}; }}; done\nexec {real} "$@"\n')
    rg.chmod(0o755)
    return {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}


async def _grep(workspace: Path, env: dict[str, str] | None, **arguments: object) -> tuple[bool, str]:
    write_files(workspace, FILES)
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("grep", **arguments)]}, {"text": "ok"}], env=env)
    return result.is_error, result.text


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("foo_(?=bar)", "a.py:1:foo_bar"),
        ("foo_(?!bar)", "a.py:2:foo_baz"),
        ("(?<=foo_)baz", "a.py:2:foo_baz"),
        ("(?<!foo_)bar", "b.txt:1:bar"),
        ("^(a)\\1 ", "a.py:3:aa = 1"),
    ],
    ids=["lookahead", "negative-lookahead", "lookbehind", "negative-lookbehind", "backreference"],
)
async def test_look_around_and_backreferences_match_as_pcre_does(
    workspace: Path, tmp_path: Path, engine: str, pattern: str, found: str
) -> None:
    error, text = await _grep(workspace, _env(engine, tmp_path), pattern=pattern)
    assert (error, text) == (False, found)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        (
            {"pattern": "foo_bar\\|abab"},
            "no matches for 'foo_bar\\\\|abab' as written; read in grep's basic syntax, as 'foo_bar|abab', it matches:\n"
            "a.py:1:foo_bar\na.py:5:abab",
        ),
        (
            {"pattern": "^\\(ab\\)\\{2\\}$"},
            "no matches for '^\\\\(ab\\\\)\\\\{2\\\\}$' as written; read in grep's basic syntax, as '^(ab){2}$', it matches:\n"
            "a.py:5:abab",
        ),
        (
            {"pattern": "-i foo =", "path": "a.py"},
            "no matches for '-i foo =' as written; with '-i' read as grep's options, it matches:\na.py:4:FOO = 2",
        ),
        (
            {"pattern": "-rn 'FOO ='"},
            "no matches for \"-rn 'FOO ='\" as written; with '-rn' read as grep's options, it matches:\na.py:4:FOO = 2",
        ),
        (
            {"pattern": "/^foo =/i"},
            "no matches for '/^foo =/i' as written; as the regular expression between the slashes, it matches:\na.py:4:FOO = 2",
        ),
        ({"pattern": "x\\|y"}, "a.py:6:pipe = 'x|y'"),
        ({"pattern": "-v foo"}, "no matches for '-v foo' in ."),
    ],
    ids=[
        "basic-alternation",
        "basic-group-and-count",
        "dash-i",
        "dash-rn-quoted",
        "slashes",
        "matches-as-written",
        "other-options",
    ],
)
async def test_patterns_in_other_tools_syntax_are_read_as_meant_and_say_so(
    workspace: Path, tmp_path: Path, engine: str, arguments: dict[str, object], text: str
) -> None:
    error, got = await _grep(workspace, _env(engine, tmp_path), **arguments)
    assert (error, got) == (False, text)
