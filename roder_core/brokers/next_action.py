"""Files that run code at the user's next ordinary action, defined once.

A model that writes ``.venv/lib/python3.11/site-packages/x.pth`` has not run anything yet: the
user's next ``python`` does, outside the sandbox. The same goes for a commit hook manager's
config (``git commit``), direnv's and mise's files (``cd``), an editor's task and launch files
(opening the folder), a package manager's hooks (``pnpm install``, ``bun run``, ``cargo
build``), a toolchain file (rustup runs the toolchain it names), a debugger's init file and the
startup file an interpreter reads from the folder it starts in (R, irb, pry, Octave). Writing
them is not forbidden (installing packages into the project's virtualenv is ordinary work), but
it is never silent: the file tools and shell redirects ask in every mode but bypass (so a
headless run refuses them), and a shell command changes them only when the person approved that
very command, or in bypass; otherwise the sandbox keeps the existing ones read-only and
quarantines new ones (``tree_guard``).

Names compare case-insensitively, at any depth. ``.git/hooks``, ``.vscode/``, ``.idea/``,
``.husky/``, ``.envrc``, ``.npmrc`` and ``.yarnrc*`` are protected names already
(``protected_names``), which is stricter. Documented in docs/security.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path

#: Folders whose contents run at the next ordinary action (a virtualenv is also recognised by
#: its ``pyvenv.cfg``, whatever it is called).
NEXT_ACTION_DIRS = frozenset(
    {
        ".venv",
        "site-packages",
        "dist-packages",
        ".direnv",
        ".lefthook",
        ".cargo",
        ".mvn",
        ".zed",
        ".fleet",
        ".nova",
        ".theia",
    }
)
#: Files that do.
NEXT_ACTION_FILES = frozenset(
    {
        "pyvenv.cfg",
        "sitecustomize.py",
        "usercustomize.py",
        ".pre-commit-config.yaml",
        ".pre-commit-config.yml",
        "lefthook.yml",
        "lefthook.yaml",
        ".lefthook.yml",
        ".lefthook.yaml",
        "lefthook-local.yml",
        "lefthook-local.yaml",
        ".lefthook-local.yml",
        ".lefthook-local.yaml",
        ".huskyrc",
        ".huskyrc.json",
        ".huskyrc.js",
        "husky.config.js",
        ".pnpmfile.cjs",
        ".pnpmfile.mjs",
        "bunfig.toml",
        "mise.toml",
        ".mise.toml",
        "mise.local.toml",
        ".mise.local.toml",
        ".exrc",
        "_exrc",
        ".vimrc",
        "_vimrc",
        ".gvimrc",
        "_gvimrc",
        ".nvimrc",
        ".nvim.lua",
        ".gdbinit",
        ".lldbinit",
        # rustup runs the toolchain a ``path`` names at the next ``cargo``
        "rust-toolchain",
        "rust-toolchain.toml",
        # the JVM options sbt starts with (``-javaagent:``)
        ".jvmopts",
        ".sbtopts",
        # interpreters that run a startup file of the folder they start in
        ".Rprofile",
        ".Renviron",
        ".irbrc",
        ".pryrc",
        ".octaverc",
    }
)
#: File name endings that do (``.pth`` files run their ``import`` lines at interpreter start).
NEXT_ACTION_SUFFIXES = (".pth", ".code-workspace", ".sublime-project")
VENV_MARK = "pyvenv.cfg"
#: Folders of the class only inside a given parent (Yarn runs ``.yarn/releases`` and
#: ``.yarn/plugins``; its ``.yarn/cache`` is ordinary data an install writes).
NEXT_ACTION_CHILDREN = {".yarn": frozenset({"releases", "plugins", "sdks"})}

_DIRS = frozenset(name.casefold() for name in NEXT_ACTION_DIRS)
_FILES = frozenset(name.casefold() for name in NEXT_ACTION_FILES)
_NAMES = _DIRS | _FILES


def is_next_action_name(name: str, parent: str = "") -> bool:
    """Whether an entry called ``name`` (in a folder called ``parent``) is of the class."""
    folded = name.casefold()
    if folded in _NAMES or folded.endswith(NEXT_ACTION_SUFFIXES):
        return True
    return bool(parent) and parent.casefold() in NEXT_ACTION_CHILDREN and folded in NEXT_ACTION_CHILDREN[parent.casefold()]


_WRITES_ALLOWED: ContextVar[bool] = ContextVar("next_action_writes_allowed", default=False)


@contextlib.contextmanager
def writes_allowed(allowed: bool) -> Iterator[None]:
    """Within the block, commands may change files of the class: the turn runner sets it for a
    call the person approved, or in bypass mode. Everywhere else (the default) they may not."""
    token = _WRITES_ALLOWED.set(allowed)
    try:
        yield
    finally:
        _WRITES_ALLOWED.reset(token)


def writes_are_allowed() -> bool:
    """Whether the command being launched may change files of the class."""
    return _WRITES_ALLOWED.get()


def next_action_reason(parts: Sequence[str], root: Path | None = None) -> str | None:
    """Why writing the path with these components (relative to ``root``) makes code run at the
    user's next ordinary action, or None. With ``root``, folders on the way that hold a
    ``pyvenv.cfg`` (a virtualenv of any name) count too."""
    parts = [p for p in parts if p not in ("", ".")]
    for index, part in enumerate(parts):
        folded = part.casefold()
        where = "/".join(parts[: index + 1])
        parent = parts[index - 1] if index else ""
        if (folded in _DIRS or folded in NEXT_ACTION_CHILDREN.get(parent.casefold(), ())) and index < len(parts) - 1:
            return f"{where}/ holds code that runs at your next ordinary action"
        if index == len(parts) - 1 and is_next_action_name(part, parent):
            return f"{where} runs code at your next ordinary action"
        if root is not None and index < len(parts) - 1 and os.path.isfile(root.joinpath(*parts[: index + 1], VENV_MARK)):
            return f"{where}/ is a virtualenv (its code runs at your next python)"
    return None
