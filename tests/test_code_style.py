"""The tree stays formatted and lint-clean: CI runs the README's test command only, so the style
checks live in the suite rather than in a separate CI step that a contributor could skip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is missing: it is part of the test extra (pip install -e '.[test]')")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_format_leaves_the_tree_unchanged() -> None:
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_finds_nothing() -> None:
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes() -> None:
    """``mypy --strict`` on the packages ``[tool.mypy] files`` lists (pyproject.toml), with the
    incremental cache in the gitignored ``.mypy_cache`` so a rerun checks only what changed."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _asyncio_wait_for_calls(source: str) -> list[int]:
    """Lines that reach ``asyncio.wait_for`` (by attribute, an alias of the module, or a from-import)."""
    import ast

    tree = ast.parse(source)
    modules = {"asyncio"}
    found: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "asyncio"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("asyncio"):
            found += [node.lineno for alias in node.names if alias.name == "wait_for"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "wait_for":
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                found.append(node.lineno)
    return found


def test_the_detector_finds_each_way_of_reaching_wait_for() -> None:
    assert _asyncio_wait_for_calls("import asyncio\nasync def f(x):\n    await asyncio.wait_for(x, 1)\n") == [3]
    assert _asyncio_wait_for_calls("import asyncio as aio\nasync def f(x):\n    await aio.wait_for(x, 1)\n") == [3]
    assert _asyncio_wait_for_calls("from asyncio import wait_for\n") == [1]
    assert _asyncio_wait_for_calls("import asyncio\nasyncio.tasks.wait_for\n") == [2]
    assert _asyncio_wait_for_calls("async def f(log):\n    await log.wait_for('up')\n") == []


def test_nothing_uses_asyncio_wait_for() -> None:
    """On Python 3.11 ``asyncio.wait_for`` can swallow a cancel that lands as the awaited thing
    finishes (a turn's interrupt lost while a command exits): use ``async with asyncio.timeout(...)``."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("roder_core", "roder_tui", "extensions", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in _asyncio_wait_for_calls(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, offenders


HANDLER_SNIPPET = """
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.protocol import THREAD_START, ThreadResult, ThreadStartParams, TurnResult, TurnStartParams


@handles(THREAD_START)
async def {name}(app: Dispatcher, params: {params}, ctx: CallContext) -> {result}:
    raise NotImplementedError
"""


@pytest.mark.parametrize(
    ("params", "result", "agrees"),
    [
        ("ThreadStartParams", "ThreadResult", True),
        ("TurnStartParams", "ThreadResult", False),  # the params of another method
        ("ThreadStartParams", "TurnResult", False),  # the result of another method
    ],
)
def test_mypy_checks_a_handler_against_its_method_spec(tmp_path: Path, params: str, result: str, agrees: bool) -> None:
    """``@handles(SPEC)`` is typed by the spec: a handler whose params or result disagree fails
    ``mypy --strict``."""
    module = tmp_path / "handler_under_test.py"
    module.write_text(HANDLER_SNIPPET.format(name="thread_start", params=params, result=result))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(ROOT / ".mypy_cache"), str(module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (checked.returncode == 0) is agrees, checked.stdout + checked.stderr
    if not agrees:
        assert "Argument 1 has incompatible type" in checked.stdout or "incompatible type" in checked.stdout, checked.stdout
