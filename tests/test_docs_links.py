"""Messages send a user to documentation every install has: the published pages' addresses
(``roder_tui.docs_links``), never a path of the repository's ``docs/`` folder, which an
installed wheel does not have. Read from the source, so a new message is checked as it is added."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from roder_tui.docs_links import DOCS_URL, docs_page

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [path for package in ("roder_core", "roder_tui", "extensions") for path in sorted((ROOT / package).rglob("*.py"))]
#: ``docs/x.md`` as a path of its own; inside an address (``.../main/docs/x.md``) it is preceded by ``/``.
REPO_DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*\.md")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """Every string constant of a module but its docstrings (which no user sees)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_the_docs_address_is_the_packages_documentation_url() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"]["Documentation"] == DOCS_URL
    assert docs_page("providers.md") == f"{DOCS_URL}/providers.md"


def test_no_message_names_a_path_of_the_repositorys_docs_folder() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in SOURCES
        for line, text in _strings(path)
        if REPO_DOCS_PATH.search(text)
    ]
    assert found == []


def test_the_check_sees_such_a_path_in_a_string_and_not_in_an_address() -> None:
    assert REPO_DOCS_PATH.search("add a table (see docs/providers.md).")
    assert not REPO_DOCS_PATH.search(docs_page("providers.md"))


def test_every_page_a_message_names_exists() -> None:
    pages = [
        str(node.args[0].value)
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "docs_page"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    assert {"providers.md", "customization.md", "batch.md"} <= set(pages)
    assert [page for page in pages if not (ROOT / "docs" / page).is_file()] == []
