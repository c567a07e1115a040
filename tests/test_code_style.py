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
