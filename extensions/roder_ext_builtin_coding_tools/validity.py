"""Whether a change broke a file Roder can parse: Python, JSON, TOML and YAML.

A change that turns a valid file into an invalid one is written (the model may be halfway
through a larger change) but the tool result says so on its first line, so the model does not
take "edited" for "done". Files that were already invalid, new files and other languages get no
check.
"""

from __future__ import annotations

import ast
import json
import tomllib
import warnings
from collections.abc import Callable
from pathlib import PurePosixPath

#: Larger files are not parsed (a check must not cost more than the edit).
MAX_CHECKED_CHARS = 2_000_000


def _python(text: str) -> str | None:
    try:
        with warnings.catch_warnings():  # invalid escape sequences and the like are not errors
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return f"{exc.msg} at line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
    except ValueError as exc:  # NUL bytes
        return str(exc)
    return None


def _json(text: str) -> str | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return None


def _toml(text: str) -> str | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return str(exc)
    return None


def _yaml(text: str) -> str | None:
    import yaml  # lazily: most edits are not YAML

    try:
        for _document in yaml.safe_load_all(text):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem or exc.context or 'invalid YAML'}{where}"
    except yaml.YAMLError as exc:
        return str(exc)
    return None


_CHECKS: dict[str, tuple[str, Callable[[str], str | None]]] = {
    ".py": ("Python", _python),
    ".pyi": ("Python", _python),
    ".json": ("JSON", _json),
    ".toml": ("TOML", _toml),
    ".yaml": ("YAML", _yaml),
    ".yml": ("YAML", _yaml),
}


def syntax_regression(shown: str, before: str | None, after: str | None) -> str | None:
    """The warning line for a change that made a valid ``shown`` invalid, else None."""
    check = _CHECKS.get(PurePosixPath(shown).suffix.lower())
    if check is None or before is None or after is None or before == after:
        return None
    if len(before) > MAX_CHECKED_CHARS or len(after) > MAX_CHECKED_CHARS:
        return None
    language, problem_of = check
    try:
        if problem_of(before) is not None:
            return None
        problem = problem_of(after)
    except (RecursionError, MemoryError):  # nested deeper than the parser follows: no verdict
        return None
    if problem is None:
        return None
    return f"WARNING: {shown} is no longer valid {language} after this change ({problem}). The change was written; fix the file."
